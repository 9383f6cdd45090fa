// ELF facts read from bytes already in memory: verify reads cubins and static-library members
// out of a tarball or an archive, never from their own files, so it cannot use io/fs.h's
// path-based helpers. Input may be hostile (a downloaded tarball, a fuzzer), so every offset is
// range-checked without overflow and a malformed file is an error naming `what`, never a crash.
// 64-bit little-endian ELF only, as in io/fs.h: x86_64 and aarch64 hosts, and cubins.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::core {

struct ElfHeader {
  int machine = 0;          // e_machine: 62 x86_64, 183 aarch64, 190 CUDA
  int os_abi = 0;           // EI_OSABI
  int abi_version = 0;      // EI_ABIVERSION
  std::uint32_t flags = 0;  // e_flags
};

// `what` names the bytes in errors: "sm_90/lib/libkiln.a(rmsnorm.o)".
Result<ElfHeader> readElfHeader(std::string_view bytes, const std::string& what);

// The defined STB_GLOBAL symbols (weak and undefined excluded), the same rule as
// io::elfGlobalSymbols.
Result<std::vector<std::string>> elfGlobalSymbolsOf(std::string_view bytes,
                                                    const std::string& what);

// The contents of the first section called `name`; nullopt when there is none.
Result<std::optional<std::string_view>> elfSection(std::string_view bytes, const std::string& what,
                                                   std::string_view name);

}  // namespace kiln::core
