// libFuzzer target: core::parseMetadata on arbitrary bytes. metadata.json arrives from outside
// (a downloaded tarball, a hand-edited artifact), so the reader must return an error, never crash,
// hang or read out of bounds, whatever it is given.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = kiln::core::parseMetadata(text);
  if (parsed) {
    // A document that parses must also survive a write and a re-read.
    auto again = kiln::core::parseMetadata(kiln::core::toJson(*parsed));
    if (!again) __builtin_trap();
  }
  return 0;
}
