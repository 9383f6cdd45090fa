// The external tools a build needs, found and interrogated before anything is planned or
// deleted (contract 6): the CUDA toolkit of the requested major (--cuda-version: nvcc, its
// version, the SMs it can target), the host compiler and archiver for the target arch, and the
// CUTLASS headers when a selected group uses them.
//
// CUDA 12 beside CUDA 13 (docs/cli.md, "CUDA versions"): a CUDA 12 toolkit with its own nvcc
// (KILN_CUDA12_HOME/bin/nvcc) is used as it is. PyPI has no CUDA 12 nvcc, only its ptxas
// (nvidia-cuda-nvcc-cu12 ships bin/ptxas, libnvvm and the crt headers, no nvcc, cicc or
// cudafe++), so the default CUDA 12 toolchain is split: the system nvcc (CUDA 13) compiles to
// PTX, the PTX's .version is lowered to the newest ISA the CUDA 12 ptxas reads (retargetPtx), and
// that ptxas assembles the cubin. The cubin is then a CUDA 12 ptxas product, which is what a
// CUDA 12 driver loads; PTX that uses an instruction the older ISA lacks fails in ptxas, loudly.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "io/process.h"

namespace kiln::core {

// The CUDA majors kiln builds with (--cuda-version), and the default.
inline constexpr int kCudaMajors[] = {12, 13};
inline constexpr int kDefaultCudaMajor = 13;
// Where scripts/setup.sh installs the pinned nvidia-cuda-nvcc-cu12 (pip --target), under the
// repository root, and the toolkit folder inside it (the default KILN_CUDA12_HOME).
inline constexpr char kCuda12Dir[] = ".cuda12";
inline constexpr char kCuda12Toolkit[] = ".cuda12/nvidia/cuda_nvcc";
// The pinned wheel; must equal CUDA12_NVCC_VERSION in scripts/setup.sh (a unit test checks).
inline constexpr char kCuda12NvccWheelVersion[] = "12.6.85";

struct CudaToolchain {
  std::string nvcc;                   // the command: "/usr/local/cuda/bin/nvcc" or "nvcc"
  std::string version;                // "13.0.88"; with `ptxas`, the ptxas' ("12.6.85")
  std::vector<int> sms;               // what `nvcc --list-gpu-code` lists, ascending (with
                                      // `ptxas`, only those that ptxas also assembles)
  std::filesystem::path include_dir;  // the toolkit's include/ (cuda.h, for the runtime's types)
  // The split toolchain (see the top of this file); all empty when nvcc compiles the cubins.
  std::string ptxas;             // the CUDA 12 ptxas that assembles nvcc's PTX
  std::string frontend_version;  // nvcc's own version ("13.0.88")
  std::string ptx_isa;           // the PTX ISA the ptxas reads ("8.5"), .version is lowered to it

  int major() const;  // of `version`: 13, 12; 0 when malformed
  bool split() const { return !ptxas.empty(); }
};

// Where the CUDA toolkit of each major comes from (BuildOptions' environment fields).
struct CudaSearch {
  std::string nvcc;         // KILN_NVCC: the CUDA 13 nvcc, and the split CUDA 12's front end
  std::string cuda_home;    // CUDA_HOME
  std::string cuda12_home;  // KILN_CUDA12_HOME; empty: <root>/.cuda12/nvidia/cuda_nvcc
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

// "--cuda-version 12" -> 12: one of kCudaMajors, else a usage error naming the value and them.
Result<int> parseCudaMajor(const std::string& text);
// `ptxas --help` -> the sm_NN its --gpu-name allows, ascending, unique.
std::vector<int> parsePtxasArchList(const std::string& text);
// The newest PTX ISA a CUDA 12.x ptxas reads ("12.6.85" -> "8.5"); empty when unknown.
std::string ptxIsaOf(const std::string& cuda_version);
// PTX text with its `.version` directive lowered to `isa` (left alone when it is not newer); an
// error when the text has no .version directive.
Result<std::string> retargetPtx(const std::string& text, const std::string& isa);

// The toolkit for --cuda-version `major`: 13 is detectCuda as below, and must report 13.x. 12 is
// KILN_CUDA12_HOME (default <root>/.cuda12/nvidia/cuda_nvcc): its bin/nvcc when it has one, else
// the split toolchain, its bin/ptxas (12.x) behind the system nvcc. Missing or of another major:
// an environment error naming what was found and what to run.
Result<CudaToolchain> selectCuda(io::ProcessRunner& runner, const CudaSearch& search,
                                 const std::filesystem::path& root, int major);

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
