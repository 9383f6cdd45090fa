// kiln-verify: `kiln verify` and `kiln extract` alone, for kiln_import_artifacts() to run at the
// consumer's configure time (docs/cmake.md). It calls the same functions as those commands
// (core/verify.h verifyPath, core/package.h extractInto) and prints the same lines, so the
// import holds an artifact to exactly the rules of docs/packaging.md; only the command line is
// its own, kept to what CMake needs and free of CLI11:
//
//   kiln-verify <tarball|artifact-dir>             verify; prints the line `kiln verify` prints
//   kiln-verify --extract <tarball> --into <root>  verify, then extract to <root>/<arch>/<tag>
//   kiln-verify --version
//
// Exit codes are kiln's (docs/cli.md): 0 ok, 1 refused, 2 usage, 3 out of memory.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/exit.h"
#include "core/package.h"
#include "core/verify.h"

namespace {

constexpr char kProgram[] = "kiln-verify";
constexpr char kUsage[] =
    "usage: kiln-verify <tarball|artifact-dir> | --extract <tarball> --into <artifacts-root> | "
    "--version";

int run(const std::vector<std::string>& args) {
  using namespace kiln;
  if (args.size() == 1 && args[0] == "--version") {
    fmt::print("kiln-verify {}\n", KILN_VERSION);
    return cli::kExitOk;
  }
  if (args.size() == 1 && !args[0].starts_with("-")) {
    auto report = core::verifyPath(args[0]);
    if (!report) return cli::printError(kProgram, report.error(), report.errorKind());
    fmt::print("{}\n", core::verifiedLine(args[0], *report));
    return cli::kExitOk;
  }
  if (args.size() == 4 && args[0] == "--extract" && args[2] == "--into") {
    auto dest = core::extractInto(args[1], args[3]);
    if (!dest) return cli::printError(kProgram, dest.error(), dest.errorKind());
    fmt::print("artifact: {}\n", dest->string());
    return cli::kExitOk;
  }
  return cli::printError(kProgram, kUsage, core::ErrorKind::kUsage);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  return kiln::cli::runGuarded(kProgram, [&] { return run(args); });
}
