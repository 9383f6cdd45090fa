// `kiln build`: options -> core::runBuild, with a sink that prints progress lines and, with
// --verbose, every command and the tools' output.
#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "cli/build_console.h"
#include "cli/commands.h"
#include "core/builder.h"
#include "core/report.h"
#include "core/toolchain.h"
#include "io/process.h"

namespace kiln::cli {

namespace {

class PrintingSink final : public ConsoleSink<core::BuildSink> {
 public:
  using ConsoleSink::ConsoleSink;
  void compiled(const core::CompileProgress& p) override {
    fmt::print("[{}/{}] {} {} {:.1f}s (slowest so far: {} {:.1f}s)\n", p.done, p.total, p.variant,
               p.target, p.seconds, p.slowest_variant, p.slowest_seconds);
    std::fflush(stdout);
  }
};

}  // namespace

Handler setupBuild(CLI::App& app) {
  auto options = std::make_shared<core::BuildOptions>();
  auto verbose = std::make_shared<bool>(false);
  auto root = std::make_shared<std::string>(defaultRoot());
  auto output = std::make_shared<std::string>();
  auto runtime = std::make_shared<std::string>();
  app.add_option("--gpu-arch", options->gpu_arch,
                 "target SM: sm_90 (sm_87, sm_110, ...), or a comma list (sm_87,sm_90) for one "
                 "multi-SM artifact")
      ->required();
  app.add_option("--arch", options->arch,
                 "host arch of the library: x86_64 | aarch64 (default: this host)");
  app.add_option("--kernels", options->kernels, "ALL, or a comma list of groups")
      ->capture_default_str();
  app.add_flag("--clean", options->clean, "replace the artifact instead of merging into it");
  auto cuda_version = std::make_shared<std::string>(std::to_string(core::kDefaultCudaMajor));
  app.add_option("--cuda-version", *cuda_version,
                 "the CUDA major to build with: 13 (the system toolkit) or 12 (for CUDA 12 "
                 "drivers such as JetPack 6; scripts/setup.sh installs it)")
      ->capture_default_str();
  app.add_option("-j,--jobs", options->jobs, "parallel compiles (default: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--output-dir", *output, "artifacts root (default: <root>/artifacts)");
  app.add_option("--root", *root, "the repository holding kernels/ and runtime/")
      ->capture_default_str();
  app.add_option("--runtime-dir", *runtime, "the runtime sources (default: <root>/runtime)");
  app.add_flag("-v,--verbose", *verbose, "print every command and the tools' output");
  auto launcher = std::make_shared<LauncherOption>();
  launcher->add(app, "");
  return [options, verbose, root, output, runtime, launcher, cuda_version]() -> int {
    auto major = core::parseCudaMajor(*cuda_version);
    if (!major) return reportError(major);
    options->cuda_major = *major;
    options->root = *root;
    options->runtime_dir = *runtime;
    options->output_dir = *output;
    readBuildEnvironment(options.get());
    launcher->apply(options.get());
    io::PosixProcessRunner runner;
    PrintingSink sink(*verbose);
    auto result = core::runBuild(*options, runner, sink);
    if (!result) return reportError(result);
    fmt::print("\n{}", core::resourceTable(result->metadata));
    fmt::print("\nbuilt {} image(s){}; artifact: {}\n", result->built.size(),
               result->kept.empty() ? ""
                                    : fmt::format(", kept {} variant(s) from the previous build",
                                                  result->kept.size()),
               result->artifact_dir.string());
    return kExitOk;
  };
}

}  // namespace kiln::cli
