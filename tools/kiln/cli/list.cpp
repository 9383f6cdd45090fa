// `kiln list`: the registry as a table. nvcc is not needed to list, so the SM check against
// nvcc's targets is skipped here.
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/registry.h"
#include "core/report.h"

namespace kiln::cli {

Handler setupList(CLI::App& app) {
  auto root = std::make_shared<std::string>(defaultRoot());
  app.add_option("--root", *root, "the repository holding kernels/")->capture_default_str();
  return [root]() -> int {
    auto registry = core::loadRegistry(*root, {});
    if (!registry) return reportError(registry.error(), core::ErrorKind::kUsage);
    fmt::print("{}", core::listTable(*registry));
    return kExitOk;
  };
}

}  // namespace kiln::cli
