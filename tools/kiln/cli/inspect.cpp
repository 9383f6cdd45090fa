// `kiln inspect <artifact-dir> [--json]`: the metadata as a table, or verbatim JSON (after the
// schema check, so a script never consumes a metadata.json kiln would reject).
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/naming.h"
#include "core/report.h"
#include "io/fs.h"

namespace kiln::cli {

Handler setupInspect(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  app.add_option("artifact-dir", *dir, "an artifact directory (artifacts/<arch>/<tag>)")
      ->required();
  app.add_flag("--json", *json, "print metadata.json");
  return [dir, json]() -> int {
    auto metadata = core::loadArtifactMetadata(*dir);
    if (!metadata) return reportError(metadata);
    if (*json) {
      auto text = io::readRegularFile(std::filesystem::path(*dir) / core::kMetadataFile,
                                      core::kMaxMetadataBytes, io::Links::kRefuse);
      if (!text) return reportError(text);
      fmt::print("{}", *text);
    } else {
      fmt::print("{}", core::inspectTable(*metadata));
    }
    return kExitOk;
  };
}

}  // namespace kiln::cli
