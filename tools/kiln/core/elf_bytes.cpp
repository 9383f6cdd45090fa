// In-memory ELF reading with overflow-safe bounds checks (see elf_bytes.h for why it exists next
// to io/fs.h). Offsets come from the file, so each is checked with inRange() before any access.
#include "core/elf_bytes.h"

#include <cstring>

#include <fmt/format.h>

namespace kiln::core {

namespace {

// [offset, offset + length) lies inside a buffer of `size` bytes, without overflowing.
bool inRange(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

template <typename T>
T load(std::string_view bytes, std::uint64_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

struct Section {
  std::uint32_t name = 0;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
};

constexpr std::uint32_t kShtSymtab = 2;
constexpr std::uint32_t kShtNobits = 8;

Result<std::vector<Section>> readSections(std::string_view bytes, const std::string& what) {
  auto header = readElfHeader(bytes, what);
  if (!header) return header.failure();
  const auto shoff = load<std::uint64_t>(bytes, 40);
  const auto shentsize = load<std::uint16_t>(bytes, 58);
  const auto shnum = load<std::uint16_t>(bytes, 60);
  if (shnum == 0) return std::vector<Section>{};
  if (shentsize < 64 || !inRange(shoff, std::uint64_t{shnum} * shentsize, bytes.size())) {
    return makeError(
        fmt::format("{}: ELF section table ({} entries of {} bytes at offset {}) lies outside the "
                    "file ({} bytes)",
                    what, shnum, shentsize, shoff, bytes.size()));
  }
  std::vector<Section> sections(shnum);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t sh = shoff + std::uint64_t{i} * shentsize;
    Section& s = sections[i];
    s.name = load<std::uint32_t>(bytes, sh);
    s.type = load<std::uint32_t>(bytes, sh + 4);
    s.offset = load<std::uint64_t>(bytes, sh + 24);
    s.size = load<std::uint64_t>(bytes, sh + 32);
    s.link = load<std::uint32_t>(bytes, sh + 40);
    s.entsize = load<std::uint64_t>(bytes, sh + 56);
    if (s.type != kShtNobits && !inRange(s.offset, s.size, bytes.size())) {
      return makeError(
          fmt::format("{}: ELF section {} ({} bytes at offset {}) lies outside the file ({} bytes)",
                      what, i, s.size, s.offset, bytes.size()));
    }
  }
  return sections;
}

// A NUL-terminated name at `index` of a string table section; nullopt when it runs off the end.
std::optional<std::string_view> stringAt(std::string_view bytes, const Section& table,
                                         std::uint64_t index) {
  if (index >= table.size || !inRange(table.offset, table.size, bytes.size())) return std::nullopt;
  const std::string_view strings = bytes.substr(table.offset, table.size);
  const size_t end = strings.find('\0', index);
  if (end == std::string_view::npos) return std::nullopt;
  return strings.substr(index, end - index);
}

}  // namespace

Result<ElfHeader> readElfHeader(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 64 || std::memcmp(bytes.data(),
                                       "\x7f"
                                       "ELF",
                                       4) != 0) {
    return makeError(fmt::format("{}: not an ELF file", what));
  }
  if (bytes[4] != 2 || bytes[5] != 1) {
    return makeError(fmt::format("{}: not a 64-bit little-endian ELF file (class {}, data {})",
                                 what, static_cast<int>(bytes[4]), static_cast<int>(bytes[5])));
  }
  ElfHeader header;
  header.os_abi = static_cast<unsigned char>(bytes[7]);
  header.abi_version = static_cast<unsigned char>(bytes[8]);
  header.machine = load<std::uint16_t>(bytes, 18);
  header.flags = load<std::uint32_t>(bytes, 48);
  return header;
}

Result<std::vector<std::string>> elfGlobalSymbolsOf(std::string_view bytes,
                                                    const std::string& what) {
  auto sections = readSections(bytes, what);
  if (!sections) return sections.failure();
  std::vector<std::string> names;
  for (const Section& s : *sections) {
    if (s.type != kShtSymtab) continue;
    if (s.link >= sections->size() || s.entsize < 24) {
      return makeError(
          fmt::format("{}: ELF symbol table has string table {} of {} and entry size {} (>= 24)",
                      what, s.link, sections->size(), s.entsize));
    }
    const Section& strings = (*sections)[s.link];
    for (std::uint64_t e = s.offset; e + s.entsize <= s.offset + s.size; e += s.entsize) {
      const auto name = load<std::uint32_t>(bytes, e);
      const auto info = static_cast<unsigned char>(bytes[e + 4]);
      const auto shndx = load<std::uint16_t>(bytes, e + 6);
      if ((info >> 4) != 1 || shndx == 0) continue;  // STB_GLOBAL, defined
      auto text = stringAt(bytes, strings, name);
      if (!text)
        return makeError(
            fmt::format("{}: ELF symbol name offset {} lies outside its string table", what, name));
      names.emplace_back(*text);
    }
  }
  return names;
}

Result<std::optional<std::string_view>> elfSection(std::string_view bytes, const std::string& what,
                                                   std::string_view name) {
  auto sections = readSections(bytes, what);
  if (!sections) return sections.failure();
  if (sections->empty()) return std::optional<std::string_view>{};
  const auto shstrndx = load<std::uint16_t>(bytes, 62);
  if (shstrndx >= sections->size()) {
    return makeError(
        fmt::format("{}: ELF section name table index {} is not below the section count {}", what,
                    shstrndx, sections->size()));
  }
  const Section& names = (*sections)[shstrndx];
  for (const Section& s : *sections) {
    auto text = stringAt(bytes, names, s.name);
    if (text && *text == name && s.type != kShtNobits) {
      return std::optional<std::string_view>{bytes.substr(s.offset, s.size)};
    }
  }
  return std::optional<std::string_view>{};
}

}  // namespace kiln::core
