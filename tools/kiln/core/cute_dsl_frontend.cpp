// The CuTe DSL front end (see cute_dsl_frontend.h). The Python half is the driver,
// cute_dsl_driver.py, embedded at build time: it imports the kernel script, calls its
// kiln_export(kiln) with the variant's constants and target, takes the cubin the DSL compiled,
// renames the entry kernels and prints their resources in ptxas -v's shape, so that the C++ half
// reuses parsePtxasReport and hands the builder the same CompileOutput the CUDA front end does.
#include "core/cute_dsl_frontend.h"

#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/naming.h"
#include "io/fs.h"
#include "kiln_embedded/cute_dsl_driver.h"

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

// The driver's bytes, exactly tools/kiln/core/cute_dsl_driver.py: the build generates this header
// from the file (tools/kiln/embed_file.cmake), so kiln's binary pins the driver it runs.
std::string_view driverBytes() {
  return {reinterpret_cast<const char*>(kiln::embedded::kCuteDslDriver),
          kiln::embedded::kCuteDslDriverSize};
}

// The constants as one JSON object in kiln.toml order, typed as declared.
std::string constantsJson(const Variant& variant) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& c : variant.constants) {
    if (c.type == ConstantType::kInt) {
      j[c.name] = std::get<std::int64_t>(c.value);
    } else if (c.type == ConstantType::kBool) {
      j[c.name] = std::get<bool>(c.value);
    } else {
      j[c.name] = std::get<std::string>(c.value);
    }
  }
  return j.dump();
}

class CuteDslFrontEnd final : public FrontEnd {
 public:
  std::vector<std::vector<std::string>> commands(const CompileRequest& request) const override {
    return {cuteDslCommand(request, cuteDslDriverPath(request))};
  }

  Result<CompileOutput> compile(const CompileRequest& request,
                                io::ProcessRunner& runner) const override {
    const Variant& variant = *request.variant;
    if (request.cute_dsl == nullptr) {
      return makeError(fmt::format("{}: the CuTe DSL toolchain was not detected", variant.name));
    }
    if (request
            .ptx) {  // planBuild refuses this first; kept so the front end never mislabels a cubin
      return makeError(
          fmt::format("{}: the CuTe DSL front end emits cubins only; {} (PTX) cannot be built",
                      variant.name, ptxTarget(request.sm)),
          ErrorKind::kUsage);
    }
    if (!variant.nvcc_flags.empty() || !variant.uses.empty()) {
      return makeError(fmt::format("{}: nvcc_flags [{}] and uses [{}] apply to cuda variants only; "
                                   "a cute_dsl variant takes "
                                   "its options from its script",
                                   variant.name, fmt::join(variant.nvcc_flags, " "),
                                   fmt::join(variant.uses, ", ")),
                       ErrorKind::kUsage);
    }
    CompileOutput output;
    output.target = nvccTarget(request.sm, variant.arch_specific);
    const fs::path driver = cuteDslDriverPath(request);
    if (auto written = io::writeFile(driver, std::string(driverBytes())); !written)
      return written.failure();
    output.commands = commands(request);
    auto result = runCompileCommand(runner, &output);
    if (!result) return result.failure();
    if (result->exit_code != 0) {
      return makeError(fmt::format(
          "{} for {}: the CuTe DSL script {} failed with exit code {}:\n{}", variant.name,
          output.target, variant.source.string(), result->exit_code, output.log));
    }
    output.kernels = parsePtxasReport(result->stdout_text);
    for (const auto& entry : variant.entries) {
      if (output.kernels.count(entry) == 0) {
        std::vector<std::string> found;
        for (const auto& [name, resources] : output.kernels) found.push_back(name);
        return makeError(fmt::format(
            "{} for {}: entry '{}' (declared in kiln.toml) is not an entry kernel of the cubin the "
            "DSL produced; it has [{}]",
            variant.name, output.target, entry, fmt::join(found, ", ")));
      }
    }
    return output;
  }
};

}  // namespace

int cudaMajorOf(const std::string& cuda_version) {
  static const std::regex major(R"(^([0-9]+)\.)");
  std::smatch match;
  if (!std::regex_search(cuda_version, match, major)) return 0;
  return std::stoi(match[1]);
}

Result<CuteDslToolchain> detectCuteDsl(io::ProcessRunner& runner, const fs::path& root,
                                       const std::string& python, int cuda_major) {
  CuteDslToolchain dsl;
  dsl.python = python.empty() ? (root / ".venv" / "bin" / "python").string() : python;
  dsl.cuda_major = cuda_major;
  const std::string setup = "run scripts/setup.sh (or set KILN_PYTHON to a venv that has it)";
  if (!runner.available(dsl.python)) {
    return makeError(fmt::format("CuTe DSL variants need Python with nvidia-cutlass-dsl {}: {} not "
                                 "found; {}",
                                 kCuteDslVersion, dsl.python, setup),
                     ErrorKind::kEnvironment);
  }
  // One line per distribution, "absent" when missing: the DSL and its CUDA-major libraries.
  const std::string libs = fmt::format("nvidia-cutlass-dsl-libs-cu{}", cuda_major);
  const std::string query = fmt::format(
      "import importlib.metadata as m\n"
      "for d in ('nvidia-cutlass-dsl', '{}'):\n"
      "    try: print(m.version(d))\n"
      "    except m.PackageNotFoundError: print('absent')\n",
      libs);
  auto result = runner.run({dsl.python, "-c", query});
  if (!result) return result.failure();
  if (result->exit_code != 0) {
    return makeError(
        fmt::format("{} failed (exit code {}) reading the installed nvidia-cutlass-dsl:\n{}",
                    dsl.python, result->exit_code, result->stderr_text),
        ErrorKind::kEnvironment);
  }
  std::istringstream lines(result->stdout_text);
  std::string version;
  std::string libs_version;
  std::getline(lines, version);
  std::getline(lines, libs_version);
  if (version != kCuteDslVersion) {
    return makeError(
        fmt::format("nvidia-cutlass-dsl is {} in {}; kiln pins {}; {}",
                    version.empty() ? "unreadable" : version, dsl.python, kCuteDslVersion, setup),
        ErrorKind::kEnvironment);
  }
  if (libs_version != kCuteDslVersion) {
    return makeError(
        fmt::format("{} is {} in {}: the DSL's CUDA {} libraries must match the toolkit "
                    "(CUDA {}) and the DSL ({}); {}",
                    libs, libs_version.empty() ? "unreadable" : libs_version, dsl.python,
                    cuda_major, cuda_major, kCuteDslVersion, setup),
        ErrorKind::kEnvironment);
  }
  dsl.version = version;
  return dsl;
}

fs::path cuteDslDriverPath(const CompileRequest& request) {
  return request.scratch /
         fmt::format("kiln_cute_dsl.{}.sm_{}.py", request.variant->name, request.sm);
}

std::vector<std::string> cuteDslCommand(const CompileRequest& request, const fs::path& driver) {
  const Variant& variant = *request.variant;
  const CuteDslToolchain* dsl = request.cute_dsl;
  // -P: the driver's directory (scratch) is not put on sys.path; the script's own directory is,
  // by the driver, so a script may import its group's helper modules.
  return {dsl != nullptr ? dsl->python : "python",
          "-P",
          driver.string(),
          "--variant",
          variant.name,
          "--script",
          variant.source.string(),
          "--target",
          nvccTarget(request.sm, variant.arch_specific),
          "--sm",
          std::to_string(request.sm),
          "--constants",
          constantsJson(variant),
          "--entries",
          fmt::format("{}", fmt::join(variant.entries, ",")),
          "--dsl-version",
          kCuteDslVersion,
          "--cuda-major",
          std::to_string(dsl != nullptr ? dsl->cuda_major : 0),
          "--out",
          request.cubin.string()};
}

std::string_view cuteDslDriverSource() {
  return driverBytes();
}

std::string cuteDslFingerprint(const std::string& base_fingerprint, const CuteDslToolchain& dsl) {
  return cuteDslFingerprint(base_fingerprint, dsl, cuteDslDriverSource());
}

std::string cuteDslFingerprint(const std::string& base_fingerprint, const CuteDslToolchain& dsl,
                               std::string_view driver_source) {
  return io::sha256Hex(fmt::format("{}\ncute_dsl {}\ncute_dsl_cuda_major {}\ncute_dsl_driver {}\n",
                                   base_fingerprint, dsl.version, dsl.cuda_major,
                                   io::sha256Hex(std::string(driver_source))));
}

const FrontEnd& cuteDslFrontEnd() {
  static const CuteDslFrontEnd front_end;
  return front_end;
}

}  // namespace kiln::core
