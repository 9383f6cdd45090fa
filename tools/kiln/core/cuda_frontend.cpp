// The CUDA C++ front end: one nvcc invocation per (variant, SM) producing a cubin, with
// `-Xptxas -v` so the resource report comes from the same compile that produced the code; or,
// for a compute_NN target, producing PTX (no ptxas runs, so no resources: the entry check reads
// the PTX text instead).
// The constants reach the kernel as -D macros exactly as docs/registry.md specifies; that table
// and nvccCommand() must change together.
#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/cute_dsl_frontend.h"
#include "core/frontend.h"
#include "core/naming.h"
#include "core/ptx.h"
#include "io/fs.h"

namespace kiln::core {

namespace {

std::vector<std::string> constantDefines(const Constant& constant) {
  const std::string macro = constantMacro(constant.name);
  switch (constant.type) {
    case ConstantType::kInt:
      return {fmt::format("-D{}={}", macro, std::get<std::int64_t>(constant.value))};
    case ConstantType::kBool:
      return {fmt::format("-D{}={}", macro, std::get<bool>(constant.value) ? 1 : 0)};
    case ConstantType::kDtype: {
      const auto& value = std::get<std::string>(constant.value);
      const char* cxx = dtypeCxxType(value);
      return {fmt::format("-D{}={}", macro, cxx != nullptr ? cxx : value),
              fmt::format("-D{}_{}=1", macro, upperCase(value))};
    }
    case ConstantType::kEnum:
      return {fmt::format("-D{}_{}=1", macro, upperCase(std::get<std::string>(constant.value)))};
  }
  return {};
}

// The first entry of kiln.toml that `found` lacks.
std::optional<std::string> missingEntry(const Variant& variant,
                                        const std::vector<std::string>& found) {
  for (const auto& entry : variant.entries) {
    if (std::find(found.begin(), found.end(), entry) == found.end()) return entry;
  }
  return std::nullopt;
}

class CudaFrontEnd final : public FrontEnd {
 public:
  std::vector<std::vector<std::string>> commands(const CompileRequest& request) const override {
    return {nvccCommand(request)};
  }

  Result<CompileOutput> compile(const CompileRequest& request,
                                io::ProcessRunner& runner) const override {
    const Variant& variant = *request.variant;
    CompileOutput output;
    output.target = nvccTarget(request.sm, variant.arch_specific, request.ptx);
    output.commands = commands(request);
    auto result = runCompileCommand(runner, &output);
    if (!result) return result.failure();
    if (result->exit_code != 0) {
      return makeError(fmt::format("{} for {}: nvcc failed with exit code {}:\n{}", variant.name,
                                   output.target, result->exit_code, output.log));
    }
    if (request.ptx) {
      auto text = io::readFile(request.cubin);
      if (!text) {
        return makeError(fmt::format("{} for {}: nvcc reported success but {}", variant.name,
                                     output.target, text.error()));
      }
      output.ptx_entries = ptxEntries(*text);
      std::sort(output.ptx_entries.begin(), output.ptx_entries.end());
      if (auto missing = missingEntry(variant, output.ptx_entries)) {
        return makeError(fmt::format(
            "{} for {}: entry '{}' (declared in kiln.toml) is not an entry kernel of the PTX; "
            "its .entry directives are [{}] (is it extern \"C\" __global__?)",
            variant.name, output.target, *missing, fmt::join(output.ptx_entries, ", ")));
      }
      return output;
    }
    output.kernels = parsePtxasReport(output.log);
    std::vector<std::string> found;
    for (const auto& [name, resources] : output.kernels) found.push_back(name);
    if (auto missing = missingEntry(variant, found)) {
      return makeError(fmt::format(
          "{} for {}: entry '{}' (declared in kiln.toml) is not an entry kernel of the cubin; "
          "ptxas compiled [{}] (is it extern \"C\" __global__?)",
          variant.name, output.target, *missing, fmt::join(found, ", ")));
    }
    return output;
  }
};

}  // namespace

std::vector<std::string> nvccCommand(const CompileRequest& request) {
  const Variant& variant = *request.variant;
  // The same flags for both formats, so the PTX is the code the cubin would have been compiled
  // from; PTX has no ptxas run, hence no -Xptxas -v.
  std::vector<std::string> argv = {
      request.cuda != nullptr ? request.cuda->nvcc : "nvcc", request.ptx ? "-ptx" : "-cubin",
      "-arch=" + nvccTarget(request.sm, variant.arch_specific, request.ptx), "-O3", "-std=c++17"};
  if (!request.ptx) {
    argv.push_back("-Xptxas");
    argv.push_back("-v");
  }
  // -lineinfo for Nsight Compute's source view. The line table holds each source's directory and
  // modification time, hence `sources`: a staged copy at a path and time that depend on nothing
  // but the sources' content.
  for (const char* arg : {"-lineinfo", "-I"}) argv.push_back(arg);
  argv.push_back((request.sources / "kernels").string());
  if (!request.cutlass_include.empty()) {
    argv.push_back("-I");
    argv.push_back(request.cutlass_include.string());
  }
  for (const auto& constant : variant.constants) {
    for (auto& define : constantDefines(constant)) argv.push_back(std::move(define));
  }
  if (variant.sm_constant) argv.push_back(fmt::format("-DKILN_TARGET_SM={}", request.sm));
  argv.push_back("-DKILN_VARIANT_NAME=" + variant.name);
  for (const auto& flag : variant.nvcc_flags) argv.push_back(flag);
  // -c changes nothing here (-cubin and -ptx stop nvcc before any host compile, and the image's
  // bytes are the same), but ccache caches an nvcc command only when it has -c: without it, it
  // counts the command as a link and runs it uncached (a compiler launcher, docs/cli.md).
  argv.push_back("-c");
  argv.push_back("-o");
  argv.push_back(request.cubin.string());
  argv.push_back((request.sources / variant.source.lexically_relative(request.root)).string());
  return argv;
}

Result<io::ProcessResult> runCompileCommand(io::ProcessRunner& runner, CompileOutput* output) {
  const auto start = std::chrono::steady_clock::now();
  auto result = runner.run(output->commands.front());
  output->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (result) output->log = result->stdout_text + result->stderr_text;
  return result;
}

Result<const FrontEnd*> frontEndFor(SourceKind kind) {
  static const CudaFrontEnd cuda;
  if (kind == SourceKind::kCuda) return static_cast<const FrontEnd*>(&cuda);
  if (kind == SourceKind::kCuteDsl) return &cuteDslFrontEnd();
  return makeError(fmt::format("source kind '{}' has no front end yet (only 'cuda' is built)",
                               sourceKindName(kind)),
                   ErrorKind::kUsage);
}

}  // namespace kiln::core
