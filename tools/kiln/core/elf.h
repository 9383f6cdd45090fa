// kiln's one ELF reader. Every ELF kiln looks at goes through it: the cubins nvcc and the CuTe DSL
// write (64-bit), the host objects the builder archives and the members of a published
// lib/libkiln.a (x86_64 and aarch64, 64-bit; 32-bit little-endian objects are read too, so that a
// wrong-arch object is reported by its machine rather than as garbage). It reads from bytes already
// in memory: verify reads cubins and archive members out of a tarball, never from their own files.
//
// Input may be hostile (a downloaded tarball, a fuzzer), so every offset and size taken from the
// file is checked against the buffer without overflow before it is used (subtraction, never an
// addition that could wrap), and a malformed file is an error naming the file (`what`), the field
// and the value, never a crash or a read past the end:
//   "t.cubin: ELF section 5 ('.symtab'): sh_offset 4096 + sh_size 96 runs past the end of the
//    file (4000 bytes)".
// Little-endian only (every target kiln builds for); the byte order of the machine running kiln
// does not matter, values are assembled byte by byte.
//
// Views (names, section contents) point into the caller's bytes, which must outlive them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::core {

inline constexpr int kElfMachineX86_64 = 62;
inline constexpr int kElfMachineAarch64 = 183;
inline constexpr int kElfMachineCuda = 190;

inline constexpr int kElfTypeExecutable = 2;  // ET_EXEC
inline constexpr int kElfTypeShared = 3;      // ET_DYN: a shared object or a PIE executable

inline constexpr std::uint32_t kShtSymtab = 2;
inline constexpr std::uint32_t kShtStrtab = 3;
inline constexpr std::uint32_t kShtNobits = 8;

inline constexpr int kStbGlobal = 1;
inline constexpr int kSttFunc = 2;

struct ElfHeader {
  int bits = 64;            // EI_CLASS: 32 or 64
  int type = 0;             // e_type: 1 relocatable, 2 executable, 3 shared object or PIE
  int machine = 0;          // e_machine: 62 x86_64, 183 aarch64, 190 CUDA
  int os_abi = 0;           // EI_OSABI
  int abi_version = 0;      // EI_ABIVERSION
  std::uint32_t flags = 0;  // e_flags
  std::uint64_t shoff = 0;  // e_shoff: 0 when the file has no section header table
  int shentsize = 0;        // e_shentsize
  int shnum = 0;            // e_shnum as written (0 with extended numbering)
  int shstrndx = 0;         // e_shstrndx as written (0xffff with extended numbering)
};

struct ElfSection {
  std::size_t index = 0;
  std::string_view name;  // from the section name table
  std::uint32_t type = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint32_t link = 0;
  std::uint64_t entsize = 0;
  std::string_view contents;  // the bytes [offset, offset + size); empty for SHT_NOBITS
};

struct ElfSymbol {
  std::size_t index = 0;  // in its symbol table
  std::string_view name;
  int binding = 0;  // st_info >> 4: 0 local, 1 global, 2 weak
  int type = 0;     // st_info & 0xf: 2 function
  std::uint8_t other = 0;
  std::uint16_t shndx = 0;  // 0: undefined
  std::uint64_t value = 0;
  std::uint64_t size = 0;
};

// The identification and the file header only (class, byte order, e_machine, e_flags, where the
// section table is); the section table is not read, so this is all a machine check needs.
Result<ElfHeader> readElfHeader(std::string_view bytes, const std::string& what);

// A parsed ELF: the header, and the section table with every section's bounds and name checked.
// Symbols are read on demand, each symbol table checked as it is read.
class ElfFile {
 public:
  static Result<ElfFile> parse(std::string_view bytes, const std::string& what);

  const ElfHeader& header() const { return header_; }
  // Empty when the file has no section header table (e_shoff 0).
  const std::vector<ElfSection>& sections() const { return sections_; }
  // The first section called `name` that has contents (not SHT_NOBITS); nullptr if none.
  const ElfSection* findSection(std::string_view name) const;
  // The symbols of one SHT_SYMTAB section (the null symbol 0 included), names from its sh_link.
  Result<std::vector<ElfSymbol>> symbols(const ElfSection& symtab) const;
  // The symbols of every SHT_SYMTAB section, in section order.
  Result<std::vector<ElfSymbol>> symbols() const;

 private:
  std::string_view bytes_;
  std::string what_;
  ElfHeader header_;
  std::vector<ElfSection> sections_;
};

// The defined STB_GLOBAL symbols (weak, local and undefined ones excluded: the linker merges weak
// and COMDAT symbols, so only these can clash between two objects).
Result<std::vector<std::string>> elfGlobalSymbolsOf(std::string_view bytes,
                                                    const std::string& what);

// The contents of the first section called `name`; nullopt when there is none.
Result<std::optional<std::string_view>> elfSection(std::string_view bytes, const std::string& what,
                                                   std::string_view name);

}  // namespace kiln::core
