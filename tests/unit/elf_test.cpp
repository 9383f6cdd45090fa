// kiln's one ELF reader (core/elf.h) on synthetic 64- and 32-bit little-endian objects: the header,
// section names and contents, symbols (which count as global definitions), and refusals of
// truncated and overflowing files, each naming the field and offset; every prefix and every
// byte-flipped copy of a valid file is read without a crash (the fuzz target fuzz_elf does the same
// at random, under ASan).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/elf.h"

namespace kiln::core {
namespace {

// Writes `value` as `width` little-endian bytes at `offset` (growing the string as needed).
void put(std::string& bytes, std::uint64_t offset, std::uint64_t value, int width) {
  if (bytes.size() < offset + width) bytes.resize(offset + width, '\0');
  for (int i = 0; i < width; ++i) bytes[offset + i] = static_cast<char>((value >> (8 * i)) & 0xff);
}

std::uint64_t get(const std::string& bytes, std::uint64_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i)
    value |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[offset + i])) << (8 * i);
  return value;
}

struct Sym {
  std::string name;
  int binding;  // 0 local, 1 global, 2 weak
  int type;     // 2 function
  std::uint16_t shndx;
};

// Sections of every object made here, in this order after the null section 0.
enum Section { kShstrtab = 1, kStrtab = 2, kSymtab = 3, kText = 4, kBss = 5, kSectionCount = 6 };

// Field offsets of the two classes (elf.cpp's table, restated for the tests).
struct Fields {
  int header, shoff, shoff_width, shentsize, shnum, shstrndx, section, sh_offset, sh_size, sh_link,
      sh_entsize, width, symbol;
};
constexpr Fields k64 = {64, 40, 8, 58, 60, 62, 64, 24, 32, 40, 56, 8, 24};
constexpr Fields k32 = {52, 32, 4, 46, 48, 50, 40, 16, 20, 24, 36, 4, 16};

// A relocatable object: .shstrtab, .strtab, .symtab (the null symbol, then `symbols`), .text
// holding "TEXT", and a 4096-byte .bss; contents after the header, the section table last.
std::string makeObject(int bits, int machine, const std::vector<Sym>& symbols) {
  const Fields& f = bits == 64 ? k64 : k32;
  std::string shstrtab(1, '\0'), strtab(1, '\0'), symtab(f.symbol, '\0');
  std::vector<std::uint32_t> name_at;
  for (const char* name : {".shstrtab", ".strtab", ".symtab", ".text", ".bss"}) {
    name_at.push_back(static_cast<std::uint32_t>(shstrtab.size()));
    shstrtab += std::string(name) + '\0';
  }
  for (const Sym& s : symbols) {
    std::string entry(f.symbol, '\0');
    put(entry, 0, strtab.size(), 4);
    const std::uint64_t info = (static_cast<std::uint64_t>(s.binding) << 4) | s.type;
    put(entry, bits == 64 ? 4 : 12, info, 1);
    put(entry, bits == 64 ? 6 : 14, s.shndx, 2);
    symtab += entry;
    strtab += s.name + '\0';
  }
  const std::vector<std::string> contents = {shstrtab, strtab, symtab, "TEXT"};
  std::string elf =
      "\x7f"
      "ELF";
  elf += static_cast<char>(bits == 64 ? 2 : 1);
  elf += '\x01';  // little endian
  elf += '\x01';  // EV_CURRENT
  elf.resize(f.header, '\0');
  put(elf, 16, 1, 2);  // ET_REL
  put(elf, 18, static_cast<std::uint64_t>(machine), 2);
  std::vector<std::uint64_t> offsets;
  for (const auto& c : contents) {
    offsets.push_back(elf.size());
    elf += c;
  }
  const std::uint64_t shoff = elf.size();
  put(elf, f.shoff, shoff, f.shoff_width);
  put(elf, f.shentsize, static_cast<std::uint64_t>(f.section), 2);
  put(elf, f.shnum, kSectionCount, 2);
  put(elf, f.shstrndx, kShstrtab, 2);
  elf.resize(shoff + static_cast<std::uint64_t>(f.section) * kSectionCount, '\0');
  for (int i = 1; i < kSectionCount; ++i) {
    const std::uint64_t at = shoff + static_cast<std::uint64_t>(i) * f.section;
    put(elf, at, name_at[i - 1], 4);
    const std::uint32_t type = i == kShstrtab || i == kStrtab ? kShtStrtab
                               : i == kSymtab                 ? kShtSymtab
                               : i == kBss                    ? kShtNobits
                                                              : 1;  // SHT_PROGBITS
    put(elf, at + 4, type, 4);
    put(elf, at + f.sh_offset, i == kBss ? 0x10000 : offsets[i - 1], f.width);
    put(elf, at + f.sh_size, i == kBss ? 4096 : contents[i - 1].size(), f.width);
    if (i == kSymtab) {
      put(elf, at + f.sh_link, kStrtab, 4);
      put(elf, at + f.sh_entsize, static_cast<std::uint64_t>(f.symbol), f.width);
    }
  }
  return elf;
}

const std::vector<Sym> kSymbols = {
    {"local_helper", 0, 2, kText}, {"kiln_defined", 1, 2, kText}, {"weak_inline", 2, 2, kText},
    {"undefined_call", 1, 2, 0},   {"kiln_data", 1, 1, kBss},
};

// Offset of field `field_at` of section header `index`.
std::uint64_t sectionField(const std::string& elf, int bits, int index, int field_at) {
  const Fields& f = bits == 64 ? k64 : k32;
  return get(elf, static_cast<std::uint64_t>(f.shoff), f.shoff_width) +
         static_cast<std::uint64_t>(index) * f.section + static_cast<std::uint64_t>(field_at);
}

std::string errorOf(const std::string& bytes) {
  auto elf = ElfFile::parse(bytes, "t.o");
  if (!elf) return elf.error();
  auto symbols = elf->symbols();
  return symbols ? std::string() : symbols.error();
}

#define EXPECT_ERROR_HAS(bytes, text)                                       \
  do {                                                                      \
    const std::string error_ = errorOf(bytes);                              \
    EXPECT_NE(error_.find(text), std::string::npos) << "error: " << error_; \
  } while (0)

TEST(Elf, ReadsA64BitObject) {
  const std::string bytes = makeObject(64, kElfMachineX86_64, kSymbols);
  auto header = readElfHeader(bytes, "t.o");
  ASSERT_TRUE(header) << header.error();
  EXPECT_EQ(header->bits, 64);
  EXPECT_EQ(header->machine, kElfMachineX86_64);
  auto elf = ElfFile::parse(bytes, "t.o");
  ASSERT_TRUE(elf) << elf.error();
  ASSERT_EQ(elf->sections().size(), 6u);
  EXPECT_EQ(elf->sections()[kSymtab].name, ".symtab");
  EXPECT_EQ(elf->sections()[kText].contents, "TEXT");
  EXPECT_EQ(elf->sections()[kBss].size, 4096u);
  EXPECT_TRUE(elf->sections()[kBss].contents.empty());  // SHT_NOBITS: no file bytes
  EXPECT_EQ(elf->findSection(".bss"), nullptr);
  ASSERT_NE(elf->findSection(".text"), nullptr);
  auto symbols = elf->symbols();
  ASSERT_TRUE(symbols) << symbols.error();
  ASSERT_EQ(symbols->size(), kSymbols.size() + 1);  // the null symbol first
  EXPECT_EQ((*symbols)[2].name, "kiln_defined");
  EXPECT_EQ((*symbols)[2].binding, kStbGlobal);
  EXPECT_EQ((*symbols)[2].type, kSttFunc);

  // Only the defined STB_GLOBAL symbols: not the local, weak or undefined ones.
  auto globals = elfGlobalSymbolsOf(bytes, "t.o");
  ASSERT_TRUE(globals) << globals.error();
  EXPECT_EQ(*globals, (std::vector<std::string>{"kiln_defined", "kiln_data"}));
  auto text = elfSection(bytes, "t.o", ".text");
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(text->value_or("none"), "TEXT");
  auto none = elfSection(bytes, "t.o", ".nv.info");
  ASSERT_TRUE(none) << none.error();
  EXPECT_FALSE(none->has_value());
}

TEST(Elf, ReadsA32BitObject) {
  const std::string bytes = makeObject(32, 40 /* EM_ARM */, kSymbols);
  auto header = readElfHeader(bytes, "t.o");
  ASSERT_TRUE(header) << header.error();
  EXPECT_EQ(header->bits, 32);
  EXPECT_EQ(header->machine, 40);
  auto globals = elfGlobalSymbolsOf(bytes, "t.o");
  ASSERT_TRUE(globals) << globals.error();
  EXPECT_EQ(*globals, (std::vector<std::string>{"kiln_defined", "kiln_data"}));
  auto text = elfSection(bytes, "t.o", ".text");
  ASSERT_TRUE(text && *text) << text.error();
  EXPECT_EQ(**text, "TEXT");
}

// e_shoff 0: no section header table, so no sections and no symbols (the builder's fakes).
TEST(Elf, NoSectionTableIsNoSections) {
  std::string bytes = makeObject(64, kElfMachineCuda, kSymbols);
  put(bytes, 40, 0, 8);
  auto elf = ElfFile::parse(bytes, "t.o");
  ASSERT_TRUE(elf) << elf.error();
  EXPECT_TRUE(elf->sections().empty());
  EXPECT_TRUE(elfGlobalSymbolsOf(bytes, "t.o")->empty());
}

// More sections than e_shnum holds: the count is section 0's sh_size, the name table's index its
// sh_link (e_shstrndx SHN_XINDEX).
TEST(Elf, ReadsExtendedSectionNumbering) {
  std::string bytes = makeObject(64, kElfMachineX86_64, kSymbols);
  put(bytes, 60, 0, 2);
  put(bytes, 62, 0xffff, 2);
  put(bytes, sectionField(bytes, 64, 0, 32), kSectionCount, 8);
  put(bytes, sectionField(bytes, 64, 0, 40), kShstrtab, 4);
  auto elf = ElfFile::parse(bytes, "t.o");
  ASSERT_TRUE(elf) << elf.error();
  ASSERT_EQ(elf->sections().size(), 6u);
  EXPECT_EQ(elf->sections()[kText].name, ".text");
  // A count that runs past the file.
  put(bytes, sectionField(bytes, 64, 0, 32), 1u << 30, 8);
  EXPECT_ERROR_HAS(bytes, "1073741824 entries of 64 bytes) runs past the end of the file");
}

TEST(Elf, RefusesWhatIsNotALittleEndianElf) {
  EXPECT_ERROR_HAS("", "t.o: not an ELF file");
  EXPECT_ERROR_HAS("not an elf at all, just text", "t.o: not an ELF file");
  EXPECT_ERROR_HAS(std::string("\x7f"
                               "ELF\x02\x01",
                               6),
                   "t.o: truncated ELF file: 6 bytes, shorter than the identification");
  std::string bytes = makeObject(64, kElfMachineX86_64, kSymbols);
  bytes[4] = 3;
  EXPECT_ERROR_HAS(bytes, "t.o: ELF EI_CLASS (offset 4) is 3, neither 1 (32-bit) nor 2 (64-bit)");
  bytes[4] = 2;
  bytes[5] = 2;
  EXPECT_ERROR_HAS(bytes, "t.o: ELF EI_DATA (offset 5) is 2, not 1 (little endian)");
}

TEST(Elf, RefusesATruncatedHeader) {
  const std::string full64 = makeObject(64, kElfMachineX86_64, kSymbols);
  EXPECT_ERROR_HAS(full64.substr(0, 63),
                   "t.o: truncated ELF header: 63 bytes, a 64-bit ELF "
                   "header has 64");
  EXPECT_FALSE(readElfHeader(full64.substr(0, 63), "t.o"));
  const std::string full32 = makeObject(32, 3, kSymbols);
  EXPECT_ERROR_HAS(full32.substr(0, 51),
                   "truncated ELF header: 51 bytes, a 32-bit ELF header "
                   "has 52");
  // The header alone reads; the section table it points at does not.
  EXPECT_TRUE(readElfHeader(full64.substr(0, 64), "t.o"));
  EXPECT_ERROR_HAS(full64.substr(0, 64), "ELF section header table (e_shoff");
  EXPECT_ERROR_HAS(full64.substr(0, 64), "runs past the end of the file (64 bytes)");
}

TEST(Elf, RefusesASectionTableOutsideTheFile) {
  const std::string good = makeObject(64, kElfMachineX86_64, kSymbols);
  std::string bytes = good;
  put(bytes, 58, 32, 2);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF e_shentsize (offset 58) is 32, smaller than a 64-bit section "
                   "header (64 bytes)");
  // e_shoff near 2^64: shoff + 6 * 64 wraps around to a small number, which a check by addition
  // would take for in range.
  bytes = good;
  put(bytes, 40, 0xffffffffffffff00ull, 8);
  EXPECT_ERROR_HAS(bytes,
                   "ELF section header table (e_shoff 18446744073709551360 at offset 40: 6 "
                   "entries of 64 bytes) runs past the end of the file");
  bytes = good;
  put(bytes, 60, 0xffff, 2);
  EXPECT_ERROR_HAS(bytes, "65535 entries of 64 bytes) runs past the end of the file");
  // A 32-bit file's fields are at its own offsets.
  std::string small = makeObject(32, 3, kSymbols);
  put(small, 32, 0xfffffff0u, 4);
  EXPECT_ERROR_HAS(small, "(e_shoff 4294967280 at offset 32: 6 entries of 40 bytes)");
  small = makeObject(32, 3, kSymbols);
  put(small, 46, 16, 2);
  EXPECT_ERROR_HAS(small,
                   "ELF e_shentsize (offset 46) is 16, smaller than a 32-bit section header "
                   "(40 bytes)");
}

TEST(Elf, RefusesASectionOutsideTheFile) {
  const std::string good = makeObject(64, kElfMachineX86_64, kSymbols);
  std::string bytes = good;
  // sh_offset + sh_size wraps past 2^64 to 8.
  put(bytes, sectionField(bytes, 64, kText, 24), 0xfffffffffffffff8ull, 8);
  put(bytes, sectionField(bytes, 64, kText, 32), 16, 8);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF section 4: sh_offset 18446744073709551608 + sh_size 16 runs "
                   "past the end of the file");
  bytes = good;
  put(bytes, sectionField(bytes, 64, kText, 32), 0xffffffffffffffc0ull, 8);
  EXPECT_ERROR_HAS(bytes, "sh_size 18446744073709551552 runs past the end of the file");
  bytes = good;
  put(bytes, sectionField(bytes, 64, kSymtab, 32), bytes.size(), 8);
  EXPECT_ERROR_HAS(bytes, "t.o: ELF section 3: sh_offset");
  // SHT_NOBITS occupies no file space, so any offset and size are fine.
  bytes = good;
  put(bytes, sectionField(bytes, 64, kBss, 24), 0xffffffffffffffffull, 8);
  put(bytes, sectionField(bytes, 64, kBss, 32), 0xffffffffffffffffull, 8);
  EXPECT_EQ(errorOf(bytes), "");
}

TEST(Elf, RefusesBadSectionNames) {
  const std::string good = makeObject(64, kElfMachineX86_64, kSymbols);
  std::string bytes = good;
  put(bytes, 62, 9, 2);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF e_shstrndx (offset 62) names section 9, not below the section "
                   "count 6");
  bytes = good;
  put(bytes, sectionField(bytes, 64, kText, 0), 5000, 4);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF section 4: sh_name 5000 lies outside the section name table "
                   "(section 1)");
  // The name table cut before the last name's NUL.
  bytes = good;
  const auto size_at = sectionField(bytes, 64, kShstrtab, 32);
  put(bytes, size_at, get(bytes, size_at, 8) - 1, 8);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF section 5: sh_name 33: the name runs to the end of the section "
                   "name table (section 1)");
  bytes = good;
  put(bytes, sectionField(bytes, 64, kShstrtab, 4), kShtNobits, 4);
  EXPECT_ERROR_HAS(bytes, "t.o: ELF section name table (section 1) is SHT_NOBITS");
}

TEST(Elf, RefusesBadSymbolTables) {
  const std::string good = makeObject(64, kElfMachineX86_64, kSymbols);
  std::string bytes = good;
  put(bytes, sectionField(bytes, 64, kSymtab, 56), 8, 8);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF symbol table (section 3): sh_entsize 8 is smaller than a 64-bit "
                   "symbol (24 bytes)");
  bytes = good;
  put(bytes, sectionField(bytes, 64, kSymtab, 40), 99, 4);
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF symbol table (section 3): sh_link 99 is not a section (the "
                   "file has 6)");
  bytes = good;
  put(bytes, sectionField(bytes, 64, kSymtab, 40), kBss, 4);
  EXPECT_ERROR_HAS(bytes, "its string table (section 5) is SHT_NOBITS");
  bytes = good;
  const std::uint64_t symtab = get(bytes, sectionField(bytes, 64, kSymtab, 24), 8);
  put(bytes, symtab + 2 * 24, 7777, 4);  // symbol 2's st_name
  EXPECT_ERROR_HAS(bytes,
                   "t.o: ELF symbol table (section 3): symbol 2: st_name 7777 lies outside "
                   "its string table (section 2");
  EXPECT_FALSE(elfGlobalSymbolsOf(bytes, "t.o"));
  // A symbol table whose size is not a multiple of its entries: the whole entries are read.
  bytes = good;
  const auto size_at = sectionField(bytes, 64, kSymtab, 32);
  put(bytes, size_at, get(bytes, size_at, 8) - 5, 8);
  auto globals = elfGlobalSymbolsOf(bytes, "t.o");
  ASSERT_TRUE(globals) << globals.error();
  EXPECT_EQ(*globals, (std::vector<std::string>{"kiln_defined"}));  // kiln_data was the last
}

// Every API on a copy of `bytes` in an allocation of exactly its size, so that under ASan (the
// asan preset) a read one byte past the end is reported; only whether it returns matters.
void readEverything(const std::string& original) {
  const std::unique_ptr<char[]> buffer(new char[original.size()]);
  std::copy(original.begin(), original.end(), buffer.get());
  const std::string_view bytes(buffer.get(), original.size());
  (void)readElfHeader(bytes, "t.o").ok();
  auto elf = ElfFile::parse(bytes, "t.o");
  if (elf) {
    for (const auto& s : elf->sections()) {
      std::size_t sum = s.name.size();
      for (char c : s.contents) sum += static_cast<unsigned char>(c);
      if (s.type == kShtSymtab) {
        auto symbols = elf->symbols(s);
        if (symbols)
          for (const auto& sym : *symbols) sum += sym.name.size();
      }
      (void)sum;
    }
  }
  (void)elfGlobalSymbolsOf(bytes, "t.o").ok();
  (void)elfSection(bytes, "t.o", ".text").ok();
}

TEST(Elf, EveryTruncationIsAnErrorOrAResultNeverACrash) {
  for (int bits : {64, 32}) {
    const std::string full = makeObject(bits, kElfMachineAarch64, kSymbols);
    for (std::size_t n = 0; n < full.size(); ++n) {
      const std::string prefix = full.substr(0, n);
      readEverything(prefix);
      // The section table is last, so every cut reaches into it or the header: refused.
      EXPECT_FALSE(ElfFile::parse(prefix, "t.o")) << bits << "-bit, " << n << " bytes";
    }
  }
}

TEST(Elf, EveryFlippedByteIsAnErrorOrAResultNeverACrash) {
  for (int bits : {64, 32}) {
    const std::string full = makeObject(bits, kElfMachineX86_64, kSymbols);
    for (std::size_t i = 0; i < full.size(); ++i) {
      for (int value : {0x00, 0x7f, 0x80, 0xff}) {
        std::string bytes = full;
        bytes[i] = static_cast<char>(value);
        readEverything(bytes);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::core
