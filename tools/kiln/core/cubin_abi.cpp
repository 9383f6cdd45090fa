// Cubin ABI reading and comparison; the layout notes are in cubin_abi.h. Every offset read from
// the file is range-checked against the buffer before use (subtraction, not addition, so a huge
// offset cannot wrap), because a cubin is the output of a tool we do not control.
#include "core/cubin_abi.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/naming.h"

namespace kiln::core {

namespace {

constexpr std::uint8_t kStoCudaEntry = 0x10;
constexpr int kFormatSized = 4;
constexpr int kAttrParamSize = 0x19;  // EIATTR_CBANK_PARAM_SIZE
constexpr int kAttrParamInfo = 0x17;  // EIATTR_KPARAM_INFO

class Reader {
 public:
  Reader(std::string_view bytes, const std::string& what) : bytes_(bytes), what_(what) {}

  bool fits(std::uint64_t offset, std::uint64_t size) const {
    return offset <= bytes_.size() && size <= bytes_.size() - offset;
  }
  template <typename T>
  T get(std::uint64_t offset) const {  // caller checked fits(offset, sizeof(T))
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      value |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes_[offset + i])) << (8 * i);
    }
    return static_cast<T>(value);
  }
  std::string_view slice(std::uint64_t offset, std::uint64_t size) const {
    return bytes_.substr(offset, size);
  }
  Error malformed(const std::string& detail) const {
    return makeError(fmt::format("{}: malformed cubin: {}", what_, detail));
  }

 private:
  std::string_view bytes_;
  const std::string& what_;
};

struct Section {
  std::uint32_t name = 0;
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
};

std::string cString(std::string_view table, std::uint64_t offset) {
  if (offset >= table.size()) return {};
  const auto end = table.find('\0', offset);
  return std::string(
      table.substr(offset, end == std::string_view::npos ? std::string_view::npos : end - offset));
}

// Parses the attribute records of one ".nv.info.<entry>" section.
Result<KernelAbi> parseInfo(const Reader& r, std::string_view info, const std::string& entry) {
  KernelAbi abi;
  std::size_t at = 0;
  while (at + 4 <= info.size()) {
    const int format = static_cast<std::uint8_t>(info[at]);
    const int attr = static_cast<std::uint8_t>(info[at + 1]);
    const int value =
        static_cast<std::uint8_t>(info[at + 2]) | static_cast<std::uint8_t>(info[at + 3]) << 8;
    at += 4;
    if (format != kFormatSized) {
      if (attr == kAttrParamSize) abi.param_bytes = value;
      continue;
    }
    if (static_cast<std::size_t>(value) > info.size() - at) {
      return r.malformed(
          fmt::format(".nv.info.{}: attribute 0x{:02x} runs past the section", entry, attr));
    }
    if (attr == kAttrParamInfo && value >= 12) {
      Reader p(info.substr(at, 12), entry);
      KernelParam param;
      param.ordinal = p.get<std::uint16_t>(4);
      param.offset = p.get<std::uint16_t>(6);
      param.size = static_cast<int>((p.get<std::uint32_t>(8) >> 18) & 0x3fff);
      abi.params.push_back(param);
    }
    at += static_cast<std::size_t>(value);
  }
  std::sort(abi.params.begin(), abi.params.end(),
            [](const KernelParam& a, const KernelParam& b) { return a.ordinal < b.ordinal; });
  return abi;
}

}  // namespace

Result<std::map<std::string, KernelAbi>> readCubinAbi(std::string_view bytes,
                                                      const std::string& what) {
  const Reader r(bytes, what);
  if (!r.fits(0, 64) ||
      bytes.substr(0, 4) != std::string_view("\x7f"
                                             "ELF",
                                             4) ||
      bytes[4] != 2 || bytes[5] != 1) {
    return r.malformed("not a 64-bit little-endian ELF file");
  }
  std::map<std::string, KernelAbi> entries;
  const auto shoff = r.get<std::uint64_t>(0x28);
  const auto shentsize = r.get<std::uint16_t>(0x3a);
  const auto shnum = r.get<std::uint16_t>(0x3c);
  const auto shstrndx = r.get<std::uint16_t>(0x3e);
  if (shoff == 0 || shnum == 0) return entries;
  if (shentsize < 64 || !r.fits(shoff, static_cast<std::uint64_t>(shentsize) * shnum)) {
    return r.malformed("section headers run past the file");
  }
  std::vector<Section> sections(shnum);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + static_cast<std::uint64_t>(i) * shentsize;
    Section& s = sections[i];
    s.name = r.get<std::uint32_t>(h);
    s.type = r.get<std::uint32_t>(h + 4);
    s.offset = r.get<std::uint64_t>(h + 24);
    s.size = r.get<std::uint64_t>(h + 32);
    s.link = r.get<std::uint32_t>(h + 40);
    if (s.type != 8 /* SHT_NOBITS */ && !r.fits(s.offset, s.size)) {
      return r.malformed(fmt::format("section {} runs past the file", i));
    }
  }
  auto contents = [&](const Section& s) { return r.slice(s.offset, s.size); };
  if (shstrndx >= shnum) return r.malformed("no section name table");
  const std::string_view names = contents(sections[shstrndx]);

  std::map<std::string, std::string_view> infos;  // entry -> its .nv.info.<entry> section
  for (const Section& s : sections) {
    const std::string name = cString(names, s.name);
    if (name.rfind(".nv.info.", 0) == 0) infos[name.substr(9)] = contents(s);
  }
  for (const Section& s : sections) {
    if (s.type != 2 /* SHT_SYMTAB */) continue;
    if (s.link >= shnum) return r.malformed("symbol table without a string table");
    const std::string_view strings = contents(sections[s.link]);
    for (std::uint64_t at = 0; at + 24 <= s.size; at += 24) {
      const std::uint64_t sym = s.offset + at;
      const auto info = r.get<std::uint8_t>(sym + 4);
      const auto other = r.get<std::uint8_t>(sym + 5);
      const bool global_function =
          (info >> 4) == 1 /* STB_GLOBAL */ && (info & 0xf) == 2 /* STT_FUNC */;
      if (!global_function || (other & kStoCudaEntry) == 0) continue;
      const std::string name = cString(strings, r.get<std::uint32_t>(sym));
      KernelAbi abi;
      if (auto it = infos.find(name); it != infos.end()) {
        auto parsed = parseInfo(r, it->second, name);
        if (!parsed) return parsed.failure();
        abi = *parsed;
      }
      entries[name] = abi;
    }
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
