// The read-only commands as library calls: `kiln list` (the registry as a table) and `kiln inspect`
// (an artifact's metadata as a table). They return text; the CLI prints. `kiln doctor`, which
// loads an artifact's images through the kiln runtime, is the CLI's (cli/run_doctor.h): kiln_core
// does not depend on the runtime.
#pragma once

#include <filesystem>
#include <string>

#include "core/metadata.h"
#include "core/registry.h"
#include "core/result.h"

namespace kiln::core {

std::string listTable(const Registry& registry);

// Reads <dir>/metadata.json (schema checked).
Result<ArtifactMetadata> loadArtifactMetadata(const std::filesystem::path& dir);
std::string inspectTable(const ArtifactMetadata& metadata);
// The build summary table: one row per (variant, SM): registers, smem, spills, size, time.
std::string resourceTable(const ArtifactMetadata& metadata);

}  // namespace kiln::core
