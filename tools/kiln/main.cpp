// kiln: the command-line shell over kiln_core. It only parses the command line, dispatches to
// the subcommand table (cli/commands.cpp) and returns the handler's exit code (docs/cli.md).
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
  return kiln::cli::runGuarded("kiln", [&] {
    for (auto& [sub, handler] : handlers) {
      if (sub->parsed()) return handler();
    }
    return kiln::cli::kExitUsage;
  });
}
