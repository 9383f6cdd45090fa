// libFuzzer target: the one ELF reader (core/elf.h) on arbitrary bytes, and what is built on it
// (readCubin, readCubinAbi). Every offset and size in an ELF comes from the file, so whatever the
// header, section table or symbol tables claim, the reader must return an error, never crash or
// read outside the buffer. The input is copied into a buffer of exactly its size, so that ASan
// sees any read past the end.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cubin.h"
#include "core/cubin_abi.h"
#include "core/elf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)kiln::core::readElfHeader(bytes, "fuzz.o").ok();
  auto elf = kiln::core::ElfFile::parse(bytes, "fuzz.o");
  if (elf) {
    for (const auto& section : elf->sections()) {
      // Touch every byte a view claims, so that a view past the buffer is an ASan report.
      unsigned sum = 0;
      for (char c : section.contents) sum += static_cast<unsigned char>(c);
      for (char c : section.name) sum += static_cast<unsigned char>(c);
      if (section.type == kiln::core::kShtSymtab) {
        auto symbols = elf->symbols(section);
        if (symbols) {
          for (const auto& symbol : *symbols)
            for (char c : symbol.name) sum += static_cast<unsigned char>(c);
        }
      }
      (void)sum;
    }
  }
  (void)kiln::core::elfGlobalSymbolsOf(bytes, "fuzz.o").ok();
  (void)kiln::core::elfSection(bytes, "fuzz.cubin", ".note.nv.tkinfo").ok();
  (void)kiln::core::readCubin(bytes, "fuzz.cubin").ok();
  (void)kiln::core::readCubinAbi(bytes, "fuzz.cubin").ok();
  return 0;
}
