// The CUDA C++ front end: one nvcc invocation per (variant, SM) producing a cubin, with
// `-Xptxas -v` so the resource report comes from the same compile that produced the code; or,
// for a compute_NN target, producing PTX (no ptxas runs, so no resources: the entry check reads
// the PTX text instead).
// The constants reach the kernel as -D macros exactly as docs/registry.md specifies; that table
// and nvccCommand() must change together.
// With the split CUDA 12 toolchain (core/toolchain.h) the same nvcc command writes PTX for the
// target instead (compute_NN[a], into the scratch folder), its .version is lowered to the ISA of
// the CUDA 12 ptxas, and that ptxas assembles the cubin with -v: two commands, one report.
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
    if (request.cuda != nullptr && request.cuda->split()) return splitCommands(request);
    return {nvccCommand(request)};
  }

  Result<CompileOutput> compile(const CompileRequest& request,
                                io::ProcessRunner& runner) const override {
    const Variant& variant = *request.variant;
    CompileOutput output;
    output.target = nvccTarget(request.sm, variant.arch_specific, request.ptx);
    output.commands = commands(request);
    if (request.cuda != nullptr && request.cuda->split()) {
      auto assembled = compileSplit(request, runner, &output);
      if (!assembled) return assembled.failure();
      return checkEntries(request, std::move(output));
    }
    auto result = runCompileCommand(runner, &output);
    if (!result) return result.failure();
    if (result->exit_code != 0) {
      return makeError(fmt::format("{} for {}: nvcc failed with exit code {}:\n{}", variant.name,
                                   output.target, result->exit_code, output.log));
    }
    return checkEntries(request, std::move(output));
  }

 private:
  // The PTX image's entries, or the ptxas report's: every entry of kiln.toml must be there.
  static Result<CompileOutput> checkEntries(const CompileRequest& request, CompileOutput output) {
    const Variant& variant = *request.variant;
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

  // The split toolchain: nvcc -> PTX (scratch), .version lowered, then ptxas (cubin) or the PTX
  // written as the image. The output's log and seconds cover both tools.
  static Result<void> compileSplit(const CompileRequest& request, io::ProcessRunner& runner,
                                   CompileOutput* output) {
    const Variant& variant = *request.variant;
    const CudaToolchain& cuda = *request.cuda;
    // nvcc -ptx runs no ptxas, so options meant for it would silently miss the CUDA 12 ptxas.
    for (const auto& flag : variant.nvcc_flags) {
      if (flag.rfind("-Xptxas", 0) == 0 || flag.rfind("--ptxas-options", 0) == 0 ||
          flag.find("maxrregcount") != std::string::npos) {
        return makeError(fmt::format("{}: nvcc_flags '{}' is a ptxas option, which the split CUDA "
                                     "{} toolchain (nvcc's PTX, then ptxas) does not forward",
                                     variant.name, flag, cuda.version),
                         ErrorKind::kUsage);
      }
    }
    const auto start = std::chrono::steady_clock::now();
    const auto elapsed = [&start] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    auto front = runner.run(output->commands.front());
    if (!front) return front.failure();
    output->log = front->stdout_text + front->stderr_text;
    if (front->exit_code != 0) {
      return makeError(
          fmt::format("{} for {}: nvcc {} (the CUDA {} front end) failed with exit "
                      "code {}:\n{}",
                      variant.name, output->target, cuda.frontend_version, cuda.version,
                      front->exit_code, output->log));
    }
    const std::filesystem::path ptx_file = splitPtxPath(request);
    auto text = io::readFile(ptx_file);
    if (!text) {
      return makeError(fmt::format("{} for {}: nvcc reported success but {}", variant.name,
                                   output->target, text.error()));
    }
    auto lowered = retargetPtx(*text, cuda.ptx_isa);
    if (!lowered) {
      return makeError(fmt::format("{} for {}: {}: {}", variant.name, output->target,
                                   ptx_file.string(), lowered.error()));
    }
    const std::filesystem::path& written = request.ptx ? request.cubin : ptx_file;
    if (auto ok = io::writeFile(written, *lowered); !ok) return ok.failure();
    if (request.ptx) {
      output->seconds = elapsed();
      return {};
    }
    auto back = runner.run(output->commands.back());
    output->seconds = elapsed();
    if (!back) return back.failure();
    output->log += back->stdout_text + back->stderr_text;
    if (back->exit_code != 0) {
      return makeError(fmt::format(
          "{} for {}: ptxas {} failed with exit code {} on nvcc {}'s PTX (lowered to PTX ISA {}: "
          "does the kernel need an instruction CUDA {} lacks?):\n{}",
          variant.name, output->target, cuda.version, back->exit_code, cuda.frontend_version,
          cuda.ptx_isa, cuda.version, output->log));
    }
    return {};
  }
};

}  // namespace

std::filesystem::path splitPtxPath(const CompileRequest& request) {
  return request.scratch / fmt::format("{}.{}.ptx", request.variant->name,
                                       nvccTarget(request.sm, request.variant->arch_specific));
}

std::vector<std::vector<std::string>> splitCommands(const CompileRequest& request) {
  const Variant& variant = *request.variant;
  const CudaToolchain& cuda = *request.cuda;
  // nvcc writes PTX for the target itself (compute_90a for an arch-specific sm_90a variant, as
  // nvcc -cubin -arch=sm_90a would compile it), into the scratch folder.
  std::vector<std::string> front = nvccCommand(request);
  if (!request.ptx) {
    for (auto& arg : front) {
      if (arg == "-cubin") {
        arg = "-ptx";
      } else if (arg.rfind("-arch=", 0) == 0) {
        arg = fmt::format("-arch=compute_{}{}", request.sm, variant.arch_specific ? "a" : "");
      }
    }
    const auto xptxas = std::find(front.begin(), front.end(), "-Xptxas");
    if (xptxas != front.end() && xptxas + 1 != front.end()) front.erase(xptxas, xptxas + 2);
  }
  const auto out = std::find(front.begin(), front.end(), "-o");
  if (out != front.end() && out + 1 != front.end()) *(out + 1) = splitPtxPath(request).string();
  if (request.ptx) return {front};
  // -lineinfo of nvcc is ptxas's --generate-line-info; -O3 is ptxas's default, said anyway.
  std::vector<std::string> back = {cuda.ptxas,
                                   "-arch=" + nvccTarget(request.sm, variant.arch_specific),
                                   "-O3",
                                   "-v",
                                   "--generate-line-info",
                                   "-o",
                                   request.cubin.string(),
                                   splitPtxPath(request).string()};
  return {front, back};
}

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
