// libFuzzer target: the tarball reader and verifier (core::verifyTarballBytes: libarchive's tar
// and gzip readers, entry path checks, metadata.json, the ar and ELF readers of the library and
// the cubins). A tarball is the most hostile input kiln reads; every malformed one must end in
// an error message, with bounded memory (TarLimits), never a crash. The file name matches the
// seed corpus's valid tarball (x86_64, sm_80, CUDA 13), so the success path is fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto report = kiln::core::verifyTarballBytes(bytes, "kiln_x86_64_sm_80_cuda13.tar.gz");
  (void)report.ok();
  return 0;
}
