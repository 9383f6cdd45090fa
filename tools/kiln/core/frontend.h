// The front-end interface: one implementation per kernel source kind (CUDA C++: nvcc; CuTe DSL:
// core/cute_dsl_frontend.h). A front end turns (variant, target SM, output path) into a cubin (or,
// for a compute_NN target, PTX), a per-entry resource report and the commands it ran; everything
// downstream (shims, headers, metadata, library) reads only this output, so a new kind plugs in
// here and nowhere else.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/ptxas.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/toolchain.h"
#include "io/process.h"

namespace kiln::core {

struct CuteDslToolchain;  // core/cute_dsl_frontend.h

struct CompileRequest {
  const Variant* variant = nullptr;
  int sm = 0;
  std::filesystem::path root;   // the repository root (holds kernels/)
  std::filesystem::path cubin;  // where the image goes (the cubin, or the PTX text when `ptx`)
  const CudaToolchain* cuda = nullptr;
  std::filesystem::path cutlass_include;       // empty unless the variant uses cutlass
  const CuteDslToolchain* cute_dsl = nullptr;  // set for cute_dsl variants
  std::filesystem::path scratch{};  // a directory the front end may write helper files into
  bool ptx = false;                 // compile PTX for compute_<sm> instead of a cubin for sm_<sm>
  // Where the CUDA front end reads the sources: the staged copy of the variant's inputs
  // (core/inputs.h), laid out as `root` (kernels/<group>/, kernels/common/).
  std::filesystem::path sources{};
};

struct CompileOutput {
  std::string target;  // the device target: "sm_90", "sm_90a" or "compute_80"
  std::map<std::string, KernelResources> kernels;  // entry -> resources (empty for PTX)
  std::vector<std::string> ptx_entries;  // PTX only: the `.entry` kernels of the text, sorted
  std::vector<std::vector<std::string>> commands;  // what ran, in order
  double seconds = 0;
  std::string log;  // the tools' diagnostics, for --verbose
};

class FrontEnd {
 public:
  virtual ~FrontEnd() = default;
  // The commands compile() would run, for --verbose before the run and for tests.
  virtual std::vector<std::vector<std::string>> commands(const CompileRequest& request) const = 0;
  virtual Result<CompileOutput> compile(const CompileRequest& request,
                                        io::ProcessRunner& runner) const = 0;
};

// Runs a front end's one compile command, output->commands.front(): its wall time goes to
// output->seconds and its stdout + stderr to output->log. The process's result (the caller judges
// its exit code), or the error that it could not be started.
Result<io::ProcessResult> runCompileCommand(io::ProcessRunner& runner, CompileOutput* output);

// The front end for a source kind; an error for a kind that has none yet.
Result<const FrontEnd*> frontEndFor(SourceKind kind);

// The CUDA C++ front end's nvcc argv (docs/registry.md): exposed for tests and --verbose. It
// names the files under `request.sources`, never under `request.root`. For a PTX request:
// `-ptx -arch=compute_NN` in place of `-cubin -arch=sm_NN[a]`, and no `-Xptxas -v`.
std::vector<std::string> nvccCommand(const CompileRequest& request);

// The split CUDA 12 toolchain's commands (core/toolchain.h, CudaToolchain::split()): nvcc
// writing PTX for the target into splitPtxPath(), then (for a cubin) the CUDA 12 ptxas with -v
// assembling it into request.cubin. The front end lowers the PTX's .version in between.
std::vector<std::vector<std::string>> splitCommands(const CompileRequest& request);
std::filesystem::path splitPtxPath(const CompileRequest& request);

}  // namespace kiln::core
