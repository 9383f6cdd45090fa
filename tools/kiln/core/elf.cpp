// The ELF reader (see elf.h). Layouts, from the System V ABI (ELF-64 / ELF-32):
//
//   field          64-bit offset/size   32-bit offset/size
//   e_type         16 / 2               16 / 2
//   e_machine      18 / 2               18 / 2
//   e_shoff        40 / 8               32 / 4
//   e_flags        48 / 4               36 / 4
//   e_shentsize    58 / 2               46 / 2
//   e_shnum        60 / 2               48 / 2
//   e_shstrndx     62 / 2               50 / 2
//   header         64 bytes             52 bytes
//
//   section header (64 / 40 bytes): sh_name 0/0, sh_type 4/4, sh_offset 24/16, sh_size 32/20,
//   sh_link 40/24, sh_entsize 56/36 (64-bit / 32-bit offsets; addresses and sizes 8 / 4 bytes)
//   symbol (24 / 16 bytes): st_name 0/0, st_info 4/12, st_other 5/13, st_shndx 6/14,
//   st_value 8/4, st_size 16/8
//
// With more than 0xff00 sections, e_shnum is 0 and the count is section 0's sh_size, and an
// e_shstrndx of 0xffff (SHN_XINDEX) means section 0's sh_link holds the index.
#include "core/elf.h"

#include <fmt/format.h>

namespace kiln::core {

namespace {

// [offset, offset + length) lies inside a buffer of `size` bytes, without overflowing.
bool inRange(std::uint64_t offset, std::uint64_t length, std::uint64_t size) {
  return offset <= size && length <= size - offset;
}

// A little-endian unsigned value of `width` bytes at `offset`; the caller checked the range.
std::uint64_t le(std::string_view bytes, std::uint64_t offset, int width) {
  std::uint64_t value = 0;
  for (int i = 0; i < width; ++i) {
    value |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[offset + i])) << (8 * i);
  }
  return value;
}

struct Layout {
  int header_size;
  int shoff_at, shoff_width, flags_at, shentsize_at, shnum_at, shstrndx_at;
  int section_size;  // the smallest e_shentsize that holds every field read
  int sh_offset_at, sh_size_at, sh_link_at, sh_entsize_at, sh_width;
  int symbol_size;
  int st_info_at, st_other_at, st_shndx_at, st_value_at, st_size_at, st_width;
};

constexpr Layout kElf64 = {.header_size = 64,
                           .shoff_at = 40,
                           .shoff_width = 8,
                           .flags_at = 48,
                           .shentsize_at = 58,
                           .shnum_at = 60,
                           .shstrndx_at = 62,
                           .section_size = 64,
                           .sh_offset_at = 24,
                           .sh_size_at = 32,
                           .sh_link_at = 40,
                           .sh_entsize_at = 56,
                           .sh_width = 8,
                           .symbol_size = 24,
                           .st_info_at = 4,
                           .st_other_at = 5,
                           .st_shndx_at = 6,
                           .st_value_at = 8,
                           .st_size_at = 16,
                           .st_width = 8};
constexpr Layout kElf32 = {.header_size = 52,
                           .shoff_at = 32,
                           .shoff_width = 4,
                           .flags_at = 36,
                           .shentsize_at = 46,
                           .shnum_at = 48,
                           .shstrndx_at = 50,
                           .section_size = 40,
                           .sh_offset_at = 16,
                           .sh_size_at = 20,
                           .sh_link_at = 24,
                           .sh_entsize_at = 36,
                           .sh_width = 4,
                           .symbol_size = 16,
                           .st_info_at = 12,
                           .st_other_at = 13,
                           .st_shndx_at = 14,
                           .st_value_at = 4,
                           .st_size_at = 8,
                           .st_width = 4};

const Layout& layoutOf(const ElfHeader& header) {
  return header.bits == 64 ? kElf64 : kElf32;
}

constexpr std::uint16_t kShnXindex = 0xffff;

// The NUL-terminated string at `index` of a string table's contents. `field` names what holds
// the index ("t.o: ELF section 3: sh_name"), `table` the table ("the section name table (section
// 1)").
Result<std::string_view> stringAt(std::string_view contents, std::uint64_t index,
                                  const std::string& field, const std::string& table) {
  if (index >= contents.size()) {
    return makeError(
        fmt::format("{} {} lies outside {} ({} bytes)", field, index, table, contents.size()));
  }
  const auto start = static_cast<std::size_t>(index);
  const std::size_t end = contents.find('\0', start);
  if (end == std::string_view::npos) {
    return makeError(fmt::format("{} {}: the name runs to the end of {} ({} bytes) with no NUL",
                                 field, index, table, contents.size()));
  }
  return contents.substr(start, end - start);
}

}  // namespace

Result<ElfHeader> readElfHeader(std::string_view bytes, const std::string& what) {
  if (bytes.size() < 4 || bytes.substr(0, 4) != std::string_view("\x7f"
                                                                 "ELF",
                                                                 4)) {
    return makeError(fmt::format("{}: not an ELF file (no \\x7fELF magic at offset 0)", what));
  }
  if (bytes.size() < 16) {
    return makeError(
        fmt::format("{}: truncated ELF file: {} bytes, shorter than the identification (16 bytes)",
                    what, bytes.size()));
  }
  ElfHeader header;
  const int elf_class = static_cast<std::uint8_t>(bytes[4]);
  const int data = static_cast<std::uint8_t>(bytes[5]);
  if (elf_class != 1 && elf_class != 2) {
    return makeError(fmt::format(
        "{}: ELF EI_CLASS (offset 4) is {}, neither 1 (32-bit) nor 2 (64-bit)", what, elf_class));
  }
  if (data != 1) {
    return makeError(
        fmt::format("{}: ELF EI_DATA (offset 5) is {}, not 1 (little endian); kiln reads "
                    "little-endian ELF only",
                    what, data));
  }
  header.bits = elf_class == 2 ? 64 : 32;
  const Layout& l = layoutOf(header);
  if (bytes.size() < static_cast<std::size_t>(l.header_size)) {
    return makeError(fmt::format("{}: truncated ELF header: {} bytes, a {}-bit ELF header has {}",
                                 what, bytes.size(), header.bits, l.header_size));
  }
  header.os_abi = static_cast<std::uint8_t>(bytes[7]);
  header.abi_version = static_cast<std::uint8_t>(bytes[8]);
  header.type = static_cast<int>(le(bytes, 16, 2));
  header.machine = static_cast<int>(le(bytes, 18, 2));
  header.flags = static_cast<std::uint32_t>(le(bytes, l.flags_at, 4));
  header.shoff = le(bytes, l.shoff_at, l.shoff_width);
  header.shentsize = static_cast<int>(le(bytes, l.shentsize_at, 2));
  header.shnum = static_cast<int>(le(bytes, l.shnum_at, 2));
  header.shstrndx = static_cast<int>(le(bytes, l.shstrndx_at, 2));
  return header;
}

Result<ElfFile> ElfFile::parse(std::string_view bytes, const std::string& what) {
  auto header = readElfHeader(bytes, what);
  if (!header) return header.failure();
  ElfFile elf;
  elf.bytes_ = bytes;
  elf.what_ = what;
  elf.header_ = *header;
  const ElfHeader& h = elf.header_;
  if (h.shoff == 0) return elf;  // no section header table
  const Layout& l = layoutOf(h);
  const std::uint64_t size = bytes.size();
  if (h.shentsize < l.section_size) {
    return makeError(
        fmt::format("{}: ELF e_shentsize (offset {}) is {}, smaller than a {}-bit section header "
                    "({} bytes)",
                    what, l.shentsize_at, h.shentsize, h.bits, l.section_size));
  }
  const auto entsize = static_cast<std::uint64_t>(h.shentsize);
  std::uint64_t count = static_cast<std::uint64_t>(h.shnum);
  if (count == 0) {  // extended numbering: the count is section 0's sh_size
    if (!inRange(h.shoff, entsize, size)) {
      return makeError(fmt::format(
          "{}: ELF e_shoff (offset {}) is {}: section header 0 ({} bytes) runs past the end of "
          "the file ({} bytes)",
          what, l.shoff_at, h.shoff, entsize, size));
    }
    count = le(bytes, h.shoff + l.sh_size_at, l.sh_width);
    if (count == 0) return elf;
  }
  // count * entsize never overflows here: count is at most size / entsize.
  if (h.shoff > size || count > (size - h.shoff) / entsize) {
    return makeError(fmt::format(
        "{}: ELF section header table (e_shoff {} at offset {}: {} entries of {} bytes) runs past "
        "the end of the file ({} bytes)",
        what, h.shoff, l.shoff_at, count, entsize, size));
  }
  elf.sections_.resize(static_cast<std::size_t>(count));
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::uint64_t at = h.shoff + i * entsize;
    ElfSection& s = elf.sections_[static_cast<std::size_t>(i)];
    s.index = static_cast<std::size_t>(i);
    s.type = static_cast<std::uint32_t>(le(bytes, at + 4, 4));
    s.offset = le(bytes, at + l.sh_offset_at, l.sh_width);
    s.size = le(bytes, at + l.sh_size_at, l.sh_width);
    s.link = static_cast<std::uint32_t>(le(bytes, at + l.sh_link_at, 4));
    s.entsize = le(bytes, at + l.sh_entsize_at, l.sh_width);
    if (s.type == kShtNobits) continue;  // occupies no file space: its offset and size are free
    if (!inRange(s.offset, s.size, size)) {
      return makeError(
          fmt::format("{}: ELF section {}: sh_offset {} + sh_size {} runs past the end of the file "
                      "({} bytes)",
                      what, i, s.offset, s.size, size));
    }
    s.contents = bytes.substr(static_cast<std::size_t>(s.offset), static_cast<std::size_t>(s.size));
  }
  // Section names. Index 0 (SHN_UNDEF) means the file has no name table.
  std::uint64_t names_index = static_cast<std::uint64_t>(h.shstrndx);
  if (names_index == kShnXindex) names_index = elf.sections_[0].link;
  if (names_index == 0) return elf;
  if (names_index >= count) {
    return makeError(fmt::format(
        "{}: ELF e_shstrndx (offset {}) names section {}, not below the section count {}", what,
        l.shstrndx_at, names_index, count));
  }
  const ElfSection& names = elf.sections_[static_cast<std::size_t>(names_index)];
  if (names.type == kShtNobits) {
    return makeError(
        fmt::format("{}: ELF section name table (section {}) is SHT_NOBITS: it has no contents",
                    what, names_index));
  }
  for (std::uint64_t i = 0; i < count; ++i) {
    ElfSection& s = elf.sections_[static_cast<std::size_t>(i)];
    const std::uint64_t at = h.shoff + i * entsize;
    auto name = stringAt(names.contents, le(bytes, at, 4),
                         fmt::format("{}: ELF section {}: sh_name", what, i),
                         fmt::format("the section name table (section {})", names_index));
    if (!name) return name.failure();
    s.name = *name;
  }
  return elf;
}

const ElfSection* ElfFile::findSection(std::string_view name) const {
  for (const ElfSection& s : sections_) {
    if (s.name == name && s.type != kShtNobits) return &s;
  }
  return nullptr;
}

Result<std::vector<ElfSymbol>> ElfFile::symbols(const ElfSection& symtab) const {
  const Layout& l = layoutOf(header_);
  const std::string where = fmt::format("{}: ELF symbol table (section {})", what_, symtab.index);
  if (symtab.type == kShtNobits) {
    return makeError(fmt::format("{} is SHT_NOBITS: it has no contents", where));
  }
  if (symtab.entsize < static_cast<std::uint64_t>(l.symbol_size)) {
    return makeError(fmt::format("{}: sh_entsize {} is smaller than a {}-bit symbol ({} bytes)",
                                 where, symtab.entsize, header_.bits, l.symbol_size));
  }
  if (symtab.link >= sections_.size()) {
    return makeError(fmt::format("{}: sh_link {} is not a section (the file has {})", where,
                                 symtab.link, sections_.size()));
  }
  const ElfSection& strings = sections_[symtab.link];
  if (strings.type == kShtNobits) {
    return makeError(
        fmt::format("{}: its string table (section {}) is SHT_NOBITS", where, symtab.link));
  }
  // Every entry lies inside `contents`, whose bounds parse() checked: j < size / entsize.
  const std::string_view table = symtab.contents;
  const std::uint64_t count = symtab.size / symtab.entsize;
  std::vector<ElfSymbol> symbols;
  symbols.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t j = 0; j < count; ++j) {
    const std::uint64_t at = j * symtab.entsize;
    ElfSymbol sym;
    sym.index = static_cast<std::size_t>(j);
    const auto info = static_cast<std::uint8_t>(table[at + l.st_info_at]);
    sym.binding = info >> 4;
    sym.type = info & 0xf;
    sym.other = static_cast<std::uint8_t>(table[at + l.st_other_at]);
    sym.shndx = static_cast<std::uint16_t>(le(table, at + l.st_shndx_at, 2));
    sym.value = le(table, at + l.st_value_at, l.st_width);
    sym.size = le(table, at + l.st_size_at, l.st_width);
    auto name = stringAt(strings.contents, le(table, at, 4),
                         fmt::format("{}: symbol {}: st_name", where, j),
                         fmt::format("its string table (section {})", symtab.link));
    if (!name) return name.failure();
    sym.name = *name;
    symbols.push_back(sym);
  }
  return symbols;
}

Result<std::vector<ElfSymbol>> ElfFile::symbols() const {
  std::vector<ElfSymbol> all;
  for (const ElfSection& s : sections_) {
    if (s.type != kShtSymtab) continue;
    auto some = symbols(s);
    if (!some) return some.failure();
    all.insert(all.end(), some->begin(), some->end());
  }
  return all;
}

Result<std::vector<std::string>> elfGlobalSymbolsOf(std::string_view bytes,
                                                    const std::string& what) {
  auto elf = ElfFile::parse(bytes, what);
  if (!elf) return elf.failure();
  auto symbols = elf->symbols();
  if (!symbols) return symbols.failure();
  std::vector<std::string> names;
  for (const ElfSymbol& s : *symbols) {
    if (s.binding == kStbGlobal && s.shndx != 0) names.emplace_back(s.name);
  }
  return names;
}

Result<std::optional<std::string_view>> elfSection(std::string_view bytes, const std::string& what,
                                                   std::string_view name) {
  auto elf = ElfFile::parse(bytes, what);
  if (!elf) return elf.failure();
  const ElfSection* section = elf->findSection(name);
  if (section == nullptr) return std::optional<std::string_view>{};
  return std::optional<std::string_view>{section->contents};
}

}  // namespace kiln::core
