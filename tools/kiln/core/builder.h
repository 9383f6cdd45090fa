// `kiln build` as a library call: dependency checks, selection, staged compile (front end per
// kind, in parallel), merge with an existing artifact, code generation, host library, metadata,
// atomic publish (docs/artifact-format.md, contracts 2-6). Nothing here prints; progress goes to
// a BuildSink, and every failure is a Result error whose kind picks the exit code. builder.cpp
// runs the stages, each in its own file: build_inputs.h, artifact_plan.h, compile.h,
// assemble.h, publish.h.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/metadata.h"
#include "core/result.h"
#include "io/process.h"

namespace kiln::core {

struct BuildOptions {
  std::string gpu_arch;         // "sm_90" (a comma list is a multi-SM build)
  std::string arch;             // x86_64 | aarch64; empty: the host's
  std::string kernels = "ALL";  // "ALL" or "g1,g2"
  bool clean = false;
  int cuda_major = 13;                // --cuda-version: 12 | 13 (core/toolchain.h, kCudaMajors)
  int jobs = 0;                       // parallel compiles; 0: every core
  std::filesystem::path root;         // the repository (holds kernels/, runtime/)
  std::filesystem::path output_dir;   // empty: <root>/artifacts
  std::filesystem::path runtime_dir;  // the runtime sources (include/, src/); empty: <root>/runtime
  // Tool overrides, normally from the environment (the CLI reads it; the library does not).
  std::string nvcc;             // KILN_NVCC
  std::string cuda_home;        // CUDA_HOME
  std::string cuda12_home;      // KILN_CUDA12_HOME; empty: <root>/.cuda12/nvidia/cuda_nvcc
  std::string cxx;              // KILN_CXX
  std::string cutlass_include;  // KILN_CUTLASS_INCLUDE
  std::string python;           // KILN_PYTHON (cute_dsl variants); empty: <root>/.venv/bin/python
  // KILN_COMPILER_LAUNCHER or --compiler-launcher: a program (ccache, sccache, distcc) put in
  // front of every nvcc and host-compiler command the build runs, never of the queries
  // (--version), ar or a cute_dsl script; empty: none. It changes how the compiles run, not what
  // they make: neither the metadata's commands nor any fingerprint records it.
  std::string compiler_launcher;
  std::string stage_dir;  // KILN_SOURCE_STAGE_DIR, where nvcc's sources are staged (core/inputs.h);
                          // empty: /tmp. Images record this path, so builds compare byte for
                          // byte only with the same one.
  std::string kiln_version = KILN_VERSION;
};

struct CompileProgress {
  int done = 0;
  int total = 0;
  std::string variant;
  std::string target;  // "sm_90"
  double seconds = 0;
  std::string slowest_variant;
  double slowest_seconds = 0;
};

// Receives progress; called from worker threads, but never concurrently (the builder serialises).
class BuildSink {
 public:
  virtual ~BuildSink() = default;
  virtual void note(const std::string& /*line*/) {}
  virtual void command(const std::vector<std::string>& /*argv*/) {}
  virtual void toolOutput(const std::string& /*text*/) {}
  virtual void compiled(const CompileProgress& /*progress*/) {}
};

struct BuildSummary {
  std::filesystem::path artifact_dir;
  ArtifactMetadata metadata;
  std::vector<std::pair<std::string, int>> built;  // (variant, SM) compiled by this build
  std::vector<std::string> kept;                   // variants merged in from the old artifact
};

Result<BuildSummary> runBuild(const BuildOptions& options, io::ProcessRunner& runner,
                              BuildSink& sink);

}  // namespace kiln::core
