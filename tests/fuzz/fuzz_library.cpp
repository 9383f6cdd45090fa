// libFuzzer target: the static-library and ELF readers on their own (readArArchive, then
// readElfHeader, elfGlobalSymbolsOf and readCubin on every member), which inside fuzz_tarball
// sit behind a gzip layer and a checksum the fuzzer rarely gets past.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/ar_archive.h"
#include "core/cubin.h"
#include "core/elf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto members = kiln::core::readArArchive(bytes, "fuzz.a");
  if (members) {
    for (const auto& member : *members) {
      (void)kiln::core::elfGlobalSymbolsOf(member.data, member.name).ok();
      (void)kiln::core::readCubin(member.data, member.name).ok();
    }
  }
  // The bytes as a lone object too.
  (void)kiln::core::elfGlobalSymbolsOf(bytes, "fuzz.o").ok();
  (void)kiln::core::readCubin(bytes, "fuzz.cubin").ok();
  return 0;
}
