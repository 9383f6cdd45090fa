// Cubin ABI reading and comparison; the layout notes are in cubin_abi.h. The ELF structure
// (sections, symbols, names) comes from the one ELF reader (core/elf.h), which checks every offset
// the file gives; the .nv.info records are parsed here, each record's length checked against its
// section, because a cubin is the output of a tool we do not control.
#include "core/cubin_abi.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/elf.h"
#include "core/naming.h"

namespace kiln::core {

namespace {

constexpr std::uint8_t kStoCudaEntry = 0x10;
constexpr int kFormatSized = 4;
constexpr int kAttrParamSize = 0x19;  // EIATTR_CBANK_PARAM_SIZE
constexpr int kAttrParamInfo = 0x17;  // EIATTR_KPARAM_INFO
constexpr std::string_view kInfoPrefix = ".nv.info.";

// A little-endian value of `width` bytes at `at`; the caller checked `at + width <= bytes.size()`.
std::uint32_t le(std::string_view bytes, std::size_t at, int width) {
  std::uint32_t value = 0;
  for (int i = 0; i < width; ++i)
    value |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(bytes[at + i])) << (8 * i);
  return value;
}

Error malformed(const std::string& what, const std::string& detail) {
  return makeError(fmt::format("{}: malformed cubin: {}", what, detail));
}

// Parses the attribute records of one ".nv.info.<entry>" section.
Result<KernelAbi> parseInfo(const std::string& what, std::string_view info,
                            const std::string& entry) {
  KernelAbi abi;
  std::size_t at = 0;
  while (info.size() - at >= 4) {
    const int format = static_cast<std::uint8_t>(info[at]);
    const int attr = static_cast<std::uint8_t>(info[at + 1]);
    const auto value = le(info, at + 2, 2);
    at += 4;
    if (format != kFormatSized) {
      if (attr == kAttrParamSize) abi.param_bytes = value;
      continue;
    }
    if (value > info.size() - at) {
      return malformed(what,
                       fmt::format(".nv.info.{}: attribute 0x{:02x} at offset {} holds {} bytes "
                                   "and runs past the section ({} bytes)",
                                   entry, attr, at - 4, value, info.size()));
    }
    if (attr == kAttrParamInfo && value >= 12) {
      KernelParam param;
      param.ordinal = static_cast<int>(le(info, at + 4, 2));
      param.offset = static_cast<int>(le(info, at + 6, 2));
      param.size = static_cast<int>((le(info, at + 8, 4) >> 18) & 0x3fff);
      abi.params.push_back(param);
    }
    at += value;
  }
  std::sort(abi.params.begin(), abi.params.end(),
            [](const KernelParam& a, const KernelParam& b) { return a.ordinal < b.ordinal; });
  return abi;
}

}  // namespace

Result<std::map<std::string, KernelAbi>> readCubinAbi(std::string_view bytes,
                                                      const std::string& what) {
  auto elf = ElfFile::parse(bytes, what + ": malformed cubin");
  if (!elf) return elf.failure();
  if (elf->header().bits != 64) {
    return malformed(what, fmt::format("a {}-bit ELF file; cubins are 64-bit", elf->header().bits));
  }
  std::map<std::string, KernelAbi> entries;
  std::map<std::string_view, std::string_view> infos;  // entry -> its .nv.info.<entry> contents
  for (const ElfSection& s : elf->sections()) {
    if (s.name.substr(0, kInfoPrefix.size()) == kInfoPrefix && s.type != kShtNobits)
      infos.emplace(s.name.substr(kInfoPrefix.size()), s.contents);
  }
  auto symbols = elf->symbols();
  if (!symbols) return symbols.failure();
  for (const ElfSymbol& sym : *symbols) {
    if (sym.binding != kStbGlobal || sym.type != kSttFunc || (sym.other & kStoCudaEntry) == 0)
      continue;
    const std::string name(sym.name);
    KernelAbi abi;
    if (auto it = infos.find(sym.name); it != infos.end()) {
      auto parsed = parseInfo(what, it->second, name);
      if (!parsed) return parsed.failure();
      abi = *parsed;
    }
    entries[name] = abi;
  }
  return entries;
}

namespace {

// "sm_90" for a cubin, "compute_80" for PTX.
std::string label(const ImageAbi& image) {
  return gpuArchName(GpuArch(image.sm, image.ptx));
}
// "the sm_90 cubin", "the compute_80 PTX".
std::string imageNoun(const ImageAbi& image) {
  return label(image) + (image.ptx ? " PTX" : " cubin");
}

std::string describeParams(const KernelAbi& abi) {
  std::vector<std::string> parts;
  for (const auto& p : abi.params)
    parts.push_back(fmt::format("#{} {}B@{}", p.ordinal, p.size, p.offset));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// Why `a` (on sm a_sm) and `b` (on sm b_sm) differ, or nullopt.
std::optional<std::string> difference(const ImageAbi& a, const ImageAbi& b) {
  auto onlyIn = [](const std::vector<std::string>& x, const std::vector<std::string>& y) {
    std::vector<std::string> out;
    std::set_difference(x.begin(), x.end(), y.begin(), y.end(), std::back_inserter(out));
    return out;
  };
  auto keys = [](const std::map<std::string, KernelAbi>& m) {
    std::vector<std::string> out;
    for (const auto& [name, abi] : m) out.push_back(name);
    return out;
  };
  auto entrySets = [&](const std::vector<std::string>& x,
                       const std::vector<std::string>& y) -> std::optional<std::string> {
    if (auto extra = onlyIn(x, y); !extra.empty()) {
      return fmt::format("entry '{}' is in the {} only", extra.front(), imageNoun(a));
    }
    if (auto extra = onlyIn(y, x); !extra.empty()) {
      return fmt::format("entry '{}' is in the {} only", extra.front(), imageNoun(b));
    }
    return std::nullopt;
  };
  // ptxas's report (or a PTX image's .entry list) is always there; the ELF view is compared too
  // when both images are cubins that have one (a PTX image has none: its parameter layout is
  // only fixed by the driver's JIT, so only its entry set is compared).
  if (auto why = entrySets(a.ptxas_entries, b.ptxas_entries)) return why;
  const auto ea = keys(a.elf);
  const auto eb = keys(b.elf);
  if (!ea.empty() && !eb.empty()) {
    if (auto why = entrySets(ea, eb)) return why;
  }
  for (const auto& [name, abi_a] : a.elf) {
    auto it = b.elf.find(name);
    if (it == b.elf.end()) continue;
    const KernelAbi& abi_b = it->second;
    if (abi_a.param_bytes >= 0 && abi_b.param_bytes >= 0 &&
        abi_a.param_bytes != abi_b.param_bytes) {
      return fmt::format("entry '{}' takes {} parameter bytes on {} but {} on {}", name,
                         abi_a.param_bytes, smName(a.sm), abi_b.param_bytes, smName(b.sm));
    }
    if (!abi_a.params.empty() && !abi_b.params.empty() && abi_a.params != abi_b.params) {
      return fmt::format("entry '{}' has parameters {} on {} but {} on {}", name,
                         describeParams(abi_a), smName(a.sm), describeParams(abi_b), smName(b.sm));
    }
  }
  return std::nullopt;
}

}  // namespace

std::string compareImageAbis(const std::string& variant, const std::vector<ImageAbi>& images) {
  // Against the first (lowest) SM: any disagreement shows up as a pair that names it.
  for (std::size_t i = 1; i < images.size(); ++i) {
    if (auto why = difference(images[0], images[i])) {
      return fmt::format(
          "{}: ABI differs between {} and {}: {}; the variant's header and kiln_variant "
          "table are shared by all its SMs, so its entry kernels and their parameters "
          "must be the same on each",
          variant, label(images[0]), label(images[i]), *why);
    }
  }
  return {};
}

}  // namespace kiln::core
