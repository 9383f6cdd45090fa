// kiln: the command-line shell over kiln_core. It only parses the command line, dispatches to
// the subcommand table (cli/commands.cpp) and returns the handler's exit code (docs/cli.md).
#include <cstdio>
#include <exception>
#include <new>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: ahead-of-time GPU kernels, built without a GPU, dispatched by a C++ runtime"};
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION);
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, kiln::cli::Handler>> handlers;
  for (const auto& command : kiln::cli::commands()) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    handlers.emplace_back(sub, command.setup(*sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kiln::cli::kExitUsage;
  }
  // The library reports errors as Results; an exception reaching here is a bound that was not
  // enforced or the machine running out of memory. Either way: one error line and an exit code
  // of docs/cli.md, never an abort.
  try {
    for (auto& [sub, handler] : handlers) {
      if (sub->parsed()) return handler();
    }
  } catch (const std::bad_alloc&) {
    std::fputs("kiln: error: out of memory\n", stderr);
    return kiln::cli::kExitEnvironment;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
    return kiln::cli::kExitFailure;
  }
  return kiln::cli::kExitUsage;
}
