// `ar` parsing (format summary in ar_archive.h). Sizes and offsets come from the file, so each is
// parsed as decimal with a digit check and compared against what is left before use.
#include "core/ar_archive.h"

#include <cstdint>
#include <optional>

#include <fmt/format.h>

namespace kiln::core {

namespace {

constexpr std::string_view kMagic = "!<arch>\n";
constexpr std::string_view kThinMagic = "!<thin>\n";
constexpr size_t kHeaderSize = 60;

// A space-padded decimal field; nullopt when it holds anything else or nothing.
std::optional<std::uint64_t> decimalField(std::string_view field) {
  std::uint64_t value = 0;
  bool any = false;
  for (char c : field) {
    if (c == ' ') {
      if (any) break;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    if (value > (UINT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
    any = true;
  }
  if (!any) return std::nullopt;
  return value;
}

std::string_view trimRight(std::string_view text) {
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  return text;
}

}  // namespace

Result<std::vector<ArMember>> readArArchive(std::string_view bytes, const std::string& what) {
  if (bytes.substr(0, kThinMagic.size()) == kThinMagic) {
    return makeError(
        fmt::format("{}: is a thin archive (members stored outside it); expected a normal "
                    "static library (\"!<arch>\")",
                    what));
  }
  if (bytes.substr(0, kMagic.size()) != kMagic) {
    return makeError(
        fmt::format("{}: not a static library (expected the \"!<arch>\" header)", what));
  }
  std::vector<ArMember> members;
  std::string_view long_names;
  size_t at = kMagic.size();
  while (at < bytes.size()) {
    if (bytes[at] == '\n' && at + 1 == bytes.size()) break;  // trailing padding
    if (bytes.size() - at < kHeaderSize) {
      return makeError(fmt::format("{}: member header at offset {} is cut short ({} of {} bytes)",
                                   what, at, bytes.size() - at, kHeaderSize));
    }
    const std::string_view header = bytes.substr(at, kHeaderSize);
    if (header.substr(58, 2) != "`\n") {
      return makeError(
          fmt::format("{}: member header at offset {} lacks its end marker", what, at));
    }
    const auto size = decimalField(header.substr(48, 10));
    if (!size) {
      return makeError(fmt::format(
          "{}: member header at offset {} has size field '{}', expected a decimal number", what, at,
          trimRight(header.substr(48, 10))));
    }
    const size_t data_at = at + kHeaderSize;
    if (*size > bytes.size() - data_at) {
      return makeError(fmt::format("{}: member at offset {} claims {} bytes; only {} remain", what,
                                   at, *size, bytes.size() - data_at));
    }
    const std::string_view data = bytes.substr(data_at, *size);
    const std::string_view raw_name = trimRight(header.substr(0, 16));
    at = data_at + *size + (*size % 2);  // members are 2-byte aligned

    if (raw_name == "/" || raw_name == "/SYM64/") continue;  // symbol tables
    if (raw_name == "//") {
      long_names = data;
      continue;
    }
    std::string name;
    if (raw_name.substr(0, 3) == "#1/") {
      return makeError(fmt::format("{}: member '{}' uses a BSD long name; expected GNU ar's format",
                                   what, raw_name));
    }
    if (raw_name.size() > 1 && raw_name[0] == '/') {
      const auto offset = decimalField(raw_name.substr(1));
      if (!offset || *offset >= long_names.size()) {
        return makeError(
            fmt::format("{}: member name '{}' points outside the long-name table ({} bytes)", what,
                        raw_name, long_names.size()));
      }
      const std::string_view rest = long_names.substr(*offset);
      const size_t end = rest.find("/\n");
      if (end == std::string_view::npos) {
        return makeError(
            fmt::format("{}: long name at offset {} is not terminated", what, *offset));
      }
      name = std::string(rest.substr(0, end));
    } else {
      name = std::string(raw_name);
      if (!name.empty() && name.back() == '/') name.pop_back();
    }
    if (name.empty())
      return makeError(
          fmt::format("{}: member at offset {} has an empty name", what, data_at - kHeaderSize));
    members.push_back({std::move(name), data});
  }
  return members;
}

}  // namespace kiln::core
