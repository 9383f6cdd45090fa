// libFuzzer target: core::parseGroup (a kiln.toml) on arbitrary bytes. parseGroup reads a path,
// so each input is written to one scratch kernels/demo/kiln.toml per process first (with the
// k.cu source the seeds name, so valid seeds get past the source check, and outside.cu, a
// symlink to /etc/passwd that the path rules refuse); its errors must be messages, never crashes
// or hangs (tests/fuzz/corpus/registry/ holds a seed per rule of docs/registry.md, "Limits").
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "core/registry.h"

namespace {

const std::filesystem::path& scratchToml() {
  static const std::filesystem::path path = [] {
    auto dir = std::filesystem::temp_directory_path() /
               ("kiln-fuzz-registry-" + std::to_string(::getpid())) / "kernels" / "demo";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "k.cu") << "// fuzz source\n";
    // A symlink leading out of the group directory, which a `source` naming it must be refused.
    std::error_code ec;
    std::filesystem::create_symlink("/etc/passwd", dir / "outside.cu", ec);
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
