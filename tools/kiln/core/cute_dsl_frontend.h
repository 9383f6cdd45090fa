// The CuTe DSL front end (docs/cute-dsl.md). A `kind = "cute_dsl"` variant names a Python kernel
// script; kiln runs it at build time in the project's virtual environment (pinned
// nvidia-cutlass-dsl), where the DSL traces the kernel over storage-free placeholders and compiles
// it for the target SM with its own bundled compiler, GPU-free. kiln keeps only the cubin (entry
// kernels renamed to the names kiln.toml declares) and its resource report; the DSL's host code
// and runtime are dropped, so the variant is an ordinary kiln image from here on and the target
// needs no Python, no DSL runtime library and no JIT.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/frontend.h"
#include "core/result.h"
#include "io/process.h"

namespace kiln::core {

// The pinned DSL. scripts/setup.sh installs exactly this version (a unit test checks the two
// agree), with the CUDA-major libraries of the toolkit, `nvidia-cutlass-dsl[cu13]`.
inline constexpr char kCuteDslVersion[] = "4.8.1";

struct CuteDslToolchain {
  std::string python;   // the venv's interpreter: "<root>/.venv/bin/python" or KILN_PYTHON
  std::string version;  // the installed nvidia-cutlass-dsl, == kCuteDslVersion once detected
  int cuda_major = 0;   // the toolkit's major; the DSL's libs-cu<major> must be installed
};

// The interpreter (`python`: KILN_PYTHON, empty for <root>/.venv/bin/python) must exist and its
// nvidia-cutlass-dsl must be the pinned version with the libraries for `cuda_major`; checked by
// running the interpreter once, before the builder writes or deletes anything.
Result<CuteDslToolchain> detectCuteDsl(io::ProcessRunner& runner, const std::filesystem::path& root,
                                       const std::string& python, int cuda_major);

// "13.0.88" -> 13; 0 when malformed.
int cudaMajorOf(const std::string& cuda_version);

// The argv the front end runs for `request` (the driver script at `driver`): exposed for tests.
std::vector<std::string> cuteDslCommand(const CompileRequest& request,
                                        const std::filesystem::path& driver);

// Where the front end writes the driver for `request` (inside request.scratch).
std::filesystem::path cuteDslDriverPath(const CompileRequest& request);

// The driver's Python source: the bytes of tools/kiln/core/cute_dsl_driver.py, embedded into
// kiln at build time, so the kiln binary pins the driver it runs.
std::string_view cuteDslDriverSource();

// A cute_dsl variant's fingerprint: the kind-independent one (metadata.h) with the DSL version,
// the DSL's CUDA major and the sha256 of the driver folded in, so a new DSL or a changed driver
// makes every DSL variant stale and no CUDA variant. The two-argument form uses this kiln's
// driver, cuteDslDriverSource().
std::string cuteDslFingerprint(const std::string& base_fingerprint, const CuteDslToolchain& dsl);
std::string cuteDslFingerprint(const std::string& base_fingerprint, const CuteDslToolchain& dsl,
                               std::string_view driver_source);

const FrontEnd& cuteDslFrontEnd();

}  // namespace kiln::core
