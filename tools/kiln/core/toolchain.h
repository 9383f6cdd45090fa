// The external tools a build needs, found and interrogated before anything is planned or
// deleted (contract 6): nvcc (version, the SMs it can target), the host compiler and archiver
// for the target arch, and the CUTLASS headers when a selected group uses them.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/process.h"

namespace kiln::core {

struct CudaToolchain {
  std::string nvcc;                   // the command: "/usr/local/cuda/bin/nvcc" or "nvcc"
  std::string version;                // "13.0.88"
  std::vector<int> sms;               // what `nvcc --list-gpu-code` lists, ascending
  std::filesystem::path include_dir;  // the toolkit's include/ (cuda.h, for the runtime's types)
};

struct HostToolchain {
  std::string arch;     // x86_64 | aarch64
  std::string cxx;      // "g++", "aarch64-linux-gnu-g++"
  std::string version;  // first line of `cxx --version`
  std::string target;   // `cxx -dumpmachine`: "x86_64-linux-gnu"
  std::string ar;       // "ar", "aarch64-linux-gnu-ar"
};

struct CutlassHeaders {
  std::filesystem::path include_dir;
  std::optional<std::string> version;  // from the venv's nvidia_cutlass dist-info, when found
};

// The arch this kiln binary runs on, in kiln's spelling (x86_64 | aarch64).
std::string hostArch();

// "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0.88"; empty when absent.
std::string parseNvccVersion(const std::string& text);
// `nvcc --list-gpu-code` ("sm_75\nsm_80\n...") -> {75, 80, ...}, ascending, unique.
std::vector<int> parseGpuCodeList(const std::string& text);

// `nvcc` is the command to use (from --nvcc or KILN_NVCC); empty: CUDA_HOME/bin/nvcc,
// /usr/local/cuda/bin/nvcc, then nvcc in PATH. Missing or broken: an environment error.
Result<CudaToolchain> detectCuda(io::ProcessRunner& runner, const std::string& nvcc,
                                 const std::string& cuda_home);
// For --arch x86_64 | aarch64: the native g++/ar when the arch is the host's, else the
// <arch>-linux-gnu- cross tools. `cxx` overrides the compiler (and derives ar from its prefix).
Result<HostToolchain> detectHost(io::ProcessRunner& runner, const std::string& arch,
                                 const std::string& cxx);
// The compiler launcher (--compiler-launcher or KILN_COMPILER_LAUNCHER): one program, a name
// looked up in PATH or a path, returned as given. Not runnable: an environment error naming it.
Result<std::string> checkLauncher(io::ProcessRunner& runner, const std::string& launcher);
// `env_include` is KILN_CUTLASS_INCLUDE (may be empty); else the venv under `root`.
Result<CutlassHeaders> detectCutlass(const std::filesystem::path& root,
                                     const std::string& env_include);

}  // namespace kiln::core
