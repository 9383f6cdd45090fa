// libFuzzer target: core::parseGroup (a kiln.toml) on arbitrary bytes. parseGroup reads a path,
// so each input is written to one scratch kernels/demo/kiln.toml per process first (with the
// k.cu source the seeds name, so valid seeds get past the source check); its errors must be
// messages, never crashes.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/registry.h"

namespace {

const std::filesystem::path& scratchToml() {
  static const std::filesystem::path path = [] {
    auto dir = std::filesystem::temp_directory_path() /
               ("kiln-fuzz-registry-" + std::to_string(::getpid())) / "kernels" / "demo";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "k.cu") << "// fuzz source\n";
    return dir / "kiln.toml";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  {
    std::ofstream out(scratchToml(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto group = kiln::core::parseGroup(scratchToml(), {80, 86, 87, 89, 90, 100, 110, 120});
  (void)group.ok();
  return 0;
}
