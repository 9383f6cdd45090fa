// `kiln list`: the registry as a table. nvcc is not needed to list, so the SM check against
// nvcc's targets is skipped here.
#include <fmt/format.h>

#include <filesystem>

#include "cli/commands.h"
#include "core/registry.h"
#include "core/report.h"

namespace kiln::cli {

Handler setupList(CLI::App& app) {
  auto root = std::make_shared<std::string>(defaultRoot());
  app.add_option("--root", *root, "the repository holding kernels/")->capture_default_str();
  return [root]() -> int {
    // loadRegistry reports unreadable directories and files as errors (exit 2); the catch is a
    // backstop so that no filesystem exception can end `kiln list` with an abort.
    try {
      auto registry = core::loadRegistry(*root, {});
      if (!registry) return reportError(registry.error(), core::ErrorKind::kUsage);
      fmt::print("{}", core::listTable(*registry));
    } catch (const std::filesystem::filesystem_error& e) {
      return reportError(core::escapeControl(e.what()), core::ErrorKind::kUsage);
    }
    return kExitOk;
  };
}

}  // namespace kiln::cli
