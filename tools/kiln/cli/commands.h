// The table of `kiln` subcommands. Each entry declares its options on a CLI11 subcommand and
// returns the handler main() runs when that subcommand was chosen; handlers print and return the
// exit code (docs/cli.md). All logic lives in kiln_core; these files only translate.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/exit.h"
#include "core/result.h"

namespace kiln::cli {

using Handler = std::function<int()>;

struct Command {
  const char* name;
  const char* help;
  std::function<Handler(CLI::App&)> setup;
};

const std::vector<Command>& commands();

// Prints "kiln: error: <message>" to stderr and returns the exit code for its kind.
int reportError(const std::string& message, core::ErrorKind kind);
template <typename T>
int reportError(const core::Result<T>& result) {
  return reportError(result.error(), result.errorKind());
}

// The repository root: --root, else the source tree kiln was built from.
std::string defaultRoot();

Handler setupBuild(CLI::App& app);
Handler setupList(CLI::App& app);
Handler setupInspect(CLI::App& app);
Handler setupDoctor(CLI::App& app);
Handler setupPackage(CLI::App& app);
Handler setupVerify(CLI::App& app);
Handler setupExtract(CLI::App& app);

}  // namespace kiln::cli
