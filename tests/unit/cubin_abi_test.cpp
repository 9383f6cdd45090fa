// The cubin ABI reader on synthetic ELF files laid out as CUDA 13 writes cubins (entry symbols
// flagged STO_CUDA_ENTRY, .nv.info.<entry> attribute records), and the per-variant comparison
// the multi-SM builder runs: same ABI passes; a missing entry or another parameter layout fails
// naming the variant and both SMs.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/cubin_abi.h"

namespace kiln::core {
namespace {

void put(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>(i < 8 ? (value >> (8 * i)) & 0xff : 0);
}

struct Param {
  int ordinal, offset, size;
};

// .nv.info.<entry> contents: a non-sized record first (as ptxas writes), the parameter size,
// then one KPARAM_INFO record per parameter.
std::string nvInfo(const std::vector<Param>& params, int total) {
  std::string out;
  put(out, 0x03, 1);  // format 3 (2-byte value), attribute 0x1b
  put(out, 0x1b, 1);
  put(out, 0xff, 2);
  put(out, 0x03, 1);
  put(out, 0x19, 1);  // CBANK_PARAM_SIZE
  put(out, static_cast<std::uint64_t>(total), 2);
  for (const auto& p : params) {
    put(out, 0x04, 1);
    put(out, 0x17, 1);  // KPARAM_INFO
    put(out, 12, 2);
    put(out, 0, 4);
    put(out, static_cast<std::uint64_t>(p.ordinal), 2);
    put(out, static_cast<std::uint64_t>(p.offset), 2);
    put(out, (static_cast<std::uint64_t>(p.size) << 18) | 0xf000, 4);
  }
  return out;
}

struct Symbol {
  std::string name;
  bool entry;
};

// A 64-bit little-endian ELF with e_machine 190: section names, a symbol table and one
// .nv.info.<name> section per `infos` key.
std::string makeCubin(const std::vector<Symbol>& symbols,
                      const std::map<std::string, std::string>& infos) {
  std::vector<std::pair<std::string, std::string>> sections;  // name, contents (after the null one)
  std::string shstrtab(1, '\0'), strtab(1, '\0'), symtab(24, '\0');
  for (const auto& s : symbols) {
    put(symtab, strtab.size(), 4);
    put(symtab, (1u << 4) | 2u, 1);  // STB_GLOBAL, STT_FUNC
    put(symtab, s.entry ? 0x10 : 0, 1);
    put(symtab, 0, 2 + 8 + 8);
    strtab += s.name + '\0';
  }
  sections.push_back({".shstrtab", ""});
  sections.push_back({".strtab", strtab});
  sections.push_back({".symtab", symtab});
  for (const auto& [name, info] : infos) sections.push_back({".nv.info." + name, info});
  std::vector<std::uint32_t> name_offsets;
  for (const auto& [name, contents] : sections) {
    name_offsets.push_back(static_cast<std::uint32_t>(shstrtab.size()));
    shstrtab += name + '\0';
  }
  sections[0].second = shstrtab;

  std::string data;
  std::vector<std::uint64_t> offsets;
  for (const auto& [name, contents] : sections) {
    offsets.push_back(64 + data.size());
    data += contents;
  }
  const std::uint64_t shoff = 64 + data.size();
  std::string elf =
      "\x7f"
      "ELF";
  elf += '\x02';
  elf += '\x01';
  elf += '\x01';
  elf.resize(16, '\0');
  put(elf, 1, 2);      // e_type
  put(elf, 190, 2);    // e_machine
  put(elf, 1, 4);      // e_version
  put(elf, 0, 8 + 8);  // e_entry, e_phoff
  put(elf, shoff, 8);
  put(elf, 0, 4 + 2 + 2 + 2);  // e_flags, e_ehsize, e_phentsize, e_phnum
  put(elf, 64, 2);
  put(elf, sections.size() + 1, 2);
  put(elf, 1, 2);  // e_shstrndx
  elf += data;
  elf += std::string(64, '\0');  // the null section
  for (std::size_t i = 0; i < sections.size(); ++i) {
    const std::string& name = sections[i].first;
    const std::uint32_t type = name == ".symtab"                ? 2
                               : name.rfind(".nv.info", 0) == 0 ? 0x70000000
                                                                : 3;
    put(elf, name_offsets[i], 4);
    put(elf, type, 4);
    put(elf, 0, 8 + 8);
    put(elf, offsets[i], 8);
    put(elf, sections[i].second.size(), 8);
    put(elf, name == ".symtab" ? 2 : 0, 4);  // sh_link: .symtab -> .strtab (section 2)
    put(elf, 0, 4 + 8);
    put(elf, name == ".symtab" ? 24 : 0, 8);
  }
  return elf;
}

TEST(CubinAbi, ReadsEntriesAndParameterLayout) {
  const std::string cubin = makeCubin({{"k1", true}, {"helper", false}, {"k2", true}},
                                      {{"k1", nvInfo({{1, 8, 8}, {0, 0, 8}, {2, 16, 4}}, 20)}});
  auto abi = readCubinAbi(cubin, "t.cubin");
  ASSERT_TRUE(abi) << abi.error();
  ASSERT_EQ(abi->size(), 2u);  // the non-entry helper is not an entry
  const KernelAbi& k1 = abi->at("k1");
  EXPECT_EQ(k1.param_bytes, 20);
  ASSERT_EQ(k1.params.size(), 3u);
  EXPECT_EQ(k1.params[0], (KernelParam{0, 0, 8}));  // sorted by ordinal
  EXPECT_EQ(k1.params[2], (KernelParam{2, 16, 4}));
  EXPECT_EQ(abi->at("k2").param_bytes, -1);  // no .nv.info: unknown, not zero
}

TEST(CubinAbi, NoSectionsMeansNoEntriesAndGarbageIsAnError) {
  std::string bare = makeCubin({}, {});
  bare.replace(0x28, 8, std::string(8, '\0'));  // e_shoff = 0
  auto none = readCubinAbi(bare, "bare.cubin");
  ASSERT_TRUE(none) << none.error();
  EXPECT_TRUE(none->empty());
  auto garbage = readCubinAbi("not an elf", "x.cubin");
  ASSERT_FALSE(garbage);
  EXPECT_NE(garbage.error().find("x.cubin: malformed cubin"), std::string::npos) << garbage.error();
  std::string truncated = makeCubin({{"k1", true}}, {{"k1", nvInfo({{0, 0, 8}}, 8)}});
  truncated.resize(truncated.size() - 100);  // the section headers run past the end
  EXPECT_FALSE(readCubinAbi(truncated, "t.cubin"));
  std::string overlong = makeCubin({{"k1", true}}, {{"k1", nvInfo({{0, 0, 8}}, 8)}});
  const auto at = overlong.find(std::string("\x04\x17\x0c\x00", 4));
  ASSERT_NE(at, std::string::npos);
  overlong[at + 2] = '\x7f';  // a record longer than its section
  auto bad = readCubinAbi(overlong, "o.cubin");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("runs past the section"), std::string::npos) << bad.error();
}

ImageAbi image(int sm, std::vector<std::string> ptxas, std::map<std::string, KernelAbi> elf = {}) {
  return ImageAbi{sm, std::move(ptxas), std::move(elf), false};
}

TEST(CubinAbi, CompareAcceptsTheSameAbiOnEverySm) {
  KernelAbi k{20, {{0, 0, 8}, {1, 8, 8}, {2, 16, 4}}};
  EXPECT_EQ(compareImageAbis("v", {image(87, {"k"}, {{"k", k}}), image(90, {"k"}, {{"k", k}})}),
            "");
  // A fake cubin without sections on one side compares by the ptxas entries only.
  EXPECT_EQ(compareImageAbis("v", {image(87, {"k"}), image(90, {"k"}, {{"k", k}})}), "");
  EXPECT_EQ(compareImageAbis("v", {image(90, {"k"})}), "");
}

TEST(CubinAbi, CompareNamesTheVariantBothSmsAndTheDifference) {
  const std::string missing = compareImageAbis("rms_h1", {image(87, {"a"}), image(90, {"a", "b"})});
  EXPECT_EQ(
      missing.rfind(
          "rms_h1: ABI differs between sm_87 and sm_90: entry 'b' is in the sm_90 cubin only", 0),
      0u)
      << missing;
  const std::string elf_only = compareImageAbis(
      "v", {image(80, {"a"}, {{"a", {}}, {"c", {}}}), image(90, {"a"}, {{"a", {}}})});
  EXPECT_NE(elf_only.find("entry 'c' is in the sm_80 cubin only"), std::string::npos) << elf_only;
  const std::string size = compareImageAbis(
      "v", {image(87, {"k"}, {{"k", {24, {}}}}), image(90, {"k"}, {{"k", {32, {}}}})});
  EXPECT_NE(
      size.find(
          "v: ABI differs between sm_87 and sm_90: entry 'k' takes 24 parameter bytes on sm_87 "
          "but 32 on sm_90"),
      std::string::npos)
      << size;
  const std::string layout =
      compareImageAbis("v", {image(87, {"k"}, {{"k", {16, {{0, 0, 8}, {1, 8, 8}}}}}),
                             image(90, {"k"}, {{"k", {16, {{0, 0, 8}, {1, 8, 4}, {2, 12, 4}}}}})});
  EXPECT_NE(layout.find("entry 'k' has parameters [#0 8B@0, #1 8B@8] on sm_87 but "
                        "[#0 8B@0, #1 4B@8, #2 4B@12] on sm_90"),
            std::string::npos)
      << layout;
  // Three SMs: the odd one out is named against the lowest.
  const std::string third =
      compareImageAbis("v", {image(80, {"a"}), image(87, {"a"}), image(90, {"z"})});
  EXPECT_NE(third.find("between sm_80 and sm_90"), std::string::npos) << third;
}

}  // namespace
}  // namespace kiln::core
