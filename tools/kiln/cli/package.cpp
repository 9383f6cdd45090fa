// `kiln package`, `kiln verify` and `kiln extract`: options -> core::packageArtifact /
// verifyTarball / verifyArtifactDir / extractTarball / runMatrix, and printing. The rules
// (what verify checks, the tarball's bytes, the coverage gate) live in core/ (package.h,
// verify.h, matrix.h) and docs/packaging.md.
#include <cstdio>

#include <fmt/format.h>

#include "cli/build_console.h"
#include "cli/commands.h"
#include "core/matrix.h"
#include "core/package.h"
#include "core/table.h"
#include "core/verify.h"
#include "io/process.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

// Prints the builder's progress (as `kiln build` does) and a header and report per entry.
class MatrixPrinter final : public ConsoleSink<core::MatrixSink> {
 public:
  using ConsoleSink::ConsoleSink;
  void compiled(const core::CompileProgress& p) override {
    fmt::print("[{}/{}] {} {} {:.1f}s\n", p.done, p.total, p.variant, p.target, p.seconds);
    std::fflush(stdout);
  }
  void entryStarted(const core::MatrixEntry& e, int index, int total) override {
    fmt::print("\n== [{}/{}] {} (kernels {}){}\n", index, total, e.id(), e.kernelsText(),
               e.description.empty() ? "" : ": " + e.description);
    std::fflush(stdout);
  }
  void entryFinished(const core::EntryOutcome& o) override {
    if (!o.ok) {
      fmt::print(stderr, "kiln: error: {}\n", o.error.message);
      std::fflush(stderr);
      return;
    }
    fmt::print("verified: {}\ntarball: {} ({} bytes)\nsha256: {}\n{}",
               core::summarize(o.tarball_report), o.package.tarball.string(), o.package.size,
               o.package.sha256, core::renderSizeReport(o.sizes));
    std::fflush(stdout);
  }
};

int packageOne(const std::string& artifact_dir, const fs::path& dist) {
  auto result = core::packageArtifact(artifact_dir, dist);
  if (!result) return reportError(result);
  fmt::print("verified: {}\ntarball: {}\nsize: {} ({} bytes)\nsha256: {}\n",
             core::summarize(result->report), result->tarball.string(),
             core::humanBytes(result->size), result->size, result->sha256);
  return kExitOk;
}

}  // namespace

Handler setupPackage(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto dist = std::make_shared<std::string>();
  auto matrix = std::make_shared<std::string>();
  auto options = std::make_shared<core::MatrixOptions>();
  auto root = std::make_shared<std::string>(defaultRoot());
  auto runtime = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto verbose = std::make_shared<bool>(false);
  app.add_option("artifact-dir", *dir,
                 "the artifact directory to package (artifacts/<arch>/<tag>)");
  CLI::Option* matrix_opt =
      app.add_option("--matrix", *matrix,
                     "build, gate, package and verify every entry of a release matrix "
                     "(default file: <root>/packaging/matrix.toml)")
          ->expected(0, 1);
  app.add_option("--dist", *dist, "where tarballs go (default: <root>/dist)");
  app.add_option("--entries", options->entries,
                 "with --matrix: only these entries, e.g. x86_64/sm_90,aarch64/sm_87");
  app.add_flag("--no-build", options->no_build,
               "with --matrix: gate and package the artifacts already in the output dir instead of "
               "building them");
  app.add_option("-j,--jobs", options->build.jobs,
                 "with --matrix: parallel compiles (default: every core)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--output-dir", *output,
                 "with --matrix: artifacts root (default: <root>/artifacts)");
  app.add_option("--root", *root, "the repository holding kernels/ and runtime/")
      ->capture_default_str();
  app.add_option("--runtime-dir", *runtime,
                 "with --matrix: the runtime sources (default: <root>/runtime)");
  app.add_flag("-v,--verbose", *verbose,
               "with --matrix: print every command and the tools' output");
  auto launcher = std::make_shared<LauncherOption>();
  launcher->add(app, "with --matrix: ");
  return [=]() -> int {
    const fs::path dist_dir = dist->empty() ? fs::path(*root) / "dist" : fs::path(*dist);
    const bool with_matrix = matrix_opt->count() > 0;
    if (with_matrix && !dir->empty())
      return reportError(
          fmt::format("kiln package takes an artifact directory ({}) or --matrix, not both", *dir),
          core::ErrorKind::kUsage);
    if (!with_matrix && dir->empty())
      return reportError(
          "kiln package needs an artifact directory (artifacts/<arch>/<tag>) or --matrix [FILE]",
          core::ErrorKind::kUsage);
    if (!with_matrix) {
      if (!options->entries.empty() || options->no_build || !output->empty() || !runtime->empty() ||
          launcher->given())
        return reportError(
            "--entries, --no-build, --output-dir, --runtime-dir and --compiler-launcher go with "
            "--matrix",
            core::ErrorKind::kUsage);
      return packageOne(*dir, dist_dir);
    }
    options->matrix_file = *matrix;
    options->dist_dir = dist_dir;
    options->build.root = *root;
    options->build.runtime_dir = *runtime;
    options->build.output_dir = *output;
    readBuildEnvironment(&options->build);
    launcher->apply(&options->build);
    io::PosixProcessRunner runner;
    MatrixPrinter printer(*verbose);
    auto outcomes = core::runMatrix(*options, runner, printer);
    if (!outcomes) return reportError(outcomes);
    fmt::print("\n{}", core::matrixSummaryTable(*outcomes));
    // The first failed entry picks the exit code; its message was printed when it failed.
    int failed = 0;
    int code = kExitOk;
    for (const auto& o : *outcomes) {
      if (o.ok) continue;
      if (failed++ == 0)
        code = o.error.kind == core::ErrorKind::kUsage         ? kExitUsage
               : o.error.kind == core::ErrorKind::kEnvironment ? kExitEnvironment
                                                               : kExitFailure;
    }
    if (failed > 0) {
      fmt::print(stderr, "kiln: error: {} of {} matrix entr{} failed\n", failed, outcomes->size(),
                 outcomes->size() == 1 ? "y" : "ies");
    } else {
      fmt::print("{} tarball{} {}gated, packaged and verified in {}\n", outcomes->size(),
                 outcomes->size() == 1 ? "" : "s", options->no_build ? "" : "built, ",
                 dist_dir.string());
    }
    return code;
  };
}

Handler setupVerify(CLI::App& app) {
  auto target = std::make_shared<std::string>();
  app.add_option("tarball-or-dir", *target,
                 "a dist/kiln_<arch>_<tag>_cuda<major>.tar.gz or artifacts/<arch>/<tag>")
      ->required();
  return [target]() -> int {
    auto report = core::verifyPath(*target);
    if (!report) return reportError(report);
    fmt::print("{}\n", core::verifiedLine(*target, *report));
    return kExitOk;
  };
}

Handler setupExtract(CLI::App& app) {
  auto tarball = std::make_shared<std::string>();
  auto into = std::make_shared<std::string>();
  auto root = std::make_shared<std::string>(defaultRoot());
  app.add_option("tarball", *tarball,
                 "a dist/kiln_<arch>_<tag>_cuda<major>.tar.gz (with its .sha256)")
      ->required();
  app.add_option("--into", *into,
                 "the artifacts root; the artifact lands in <into>/<arch>/<tag> "
                 "(default: <root>/artifacts)");
  app.add_option("--root", *root, "the repository")->capture_default_str();
  return [=]() -> int {
    const fs::path artifacts = into->empty() ? fs::path(*root) / "artifacts" : fs::path(*into);
    auto dest = core::extractInto(*tarball, artifacts);
    if (!dest) return reportError(dest);
    fmt::print("artifact: {}\n", dest->string());
    return kExitOk;
  };
}

}  // namespace kiln::cli
