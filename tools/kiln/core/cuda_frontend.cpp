// The CUDA C++ front end: one nvcc invocation per (variant, SM) producing a cubin, with
// `-Xptxas -v` so the resource report comes from the same compile that produced the code.
// The constants reach the kernel as -D macros exactly as docs/registry.md specifies; that table
// and nvccCommand() must change together.
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/cute_dsl_frontend.h"
#include "core/frontend.h"
#include "core/naming.h"

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

class CudaFrontEnd final : public FrontEnd {
 public:
  std::vector<std::vector<std::string>> commands(const CompileRequest& request) const override {
    return {nvccCommand(request)};
  }

  Result<CompileOutput> compile(const CompileRequest& request,
                                io::ProcessRunner& runner) const override {
    const Variant& variant = *request.variant;
    CompileOutput output;
    output.target = nvccTarget(request.sm, variant.arch_specific);
    output.commands = commands(request);
    const auto start = std::chrono::steady_clock::now();
    auto result = runner.run(output.commands.front());
    output.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!result) return result.failure();
    output.log = result->stdout_text + result->stderr_text;
    if (result->exit_code != 0) {
      return makeError(fmt::format("{} for {}: nvcc failed with exit code {}:\n{}", variant.name,
                                   output.target, result->exit_code, output.log));
    }
    output.kernels = parsePtxasReport(output.log);
    for (const auto& entry : variant.entries) {
      if (output.kernels.count(entry) == 0) {
        std::vector<std::string> found;
        for (const auto& [name, resources] : output.kernels) found.push_back(name);
        return makeError(fmt::format(
            "{} for {}: entry '{}' (declared in kiln.toml) is not an entry kernel of the cubin; "
            "ptxas compiled [{}] (is it extern \"C\" __global__?)",
            variant.name, output.target, entry, fmt::join(found, ", ")));
      }
    }
    return output;
  }
};

}  // namespace

std::vector<std::string> nvccCommand(const CompileRequest& request) {
  const Variant& variant = *request.variant;
  std::vector<std::string> argv = {request.cuda != nullptr ? request.cuda->nvcc : "nvcc",
                                   "-cubin",
                                   "-arch=" + nvccTarget(request.sm, variant.arch_specific),
                                   "-O3",
                                   "-std=c++17",
                                   "-Xptxas",
                                   "-v",
                                   "-lineinfo",
                                   "-I",
                                   (request.root / "kernels").string()};
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
  argv.push_back("-o");
  argv.push_back(request.cubin.string());
  argv.push_back(variant.source.string());
  return argv;
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
