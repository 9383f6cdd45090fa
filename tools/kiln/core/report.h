// The read-only commands as library calls: `kiln list` (the registry as a table), `kiln inspect`
// (an artifact's metadata as a table) and `kiln doctor` (the artifact's variants checked against
// a real device through the kiln runtime). They return text or data; the CLI prints.
#pragma once

#include <filesystem>
#include <string>

#include "core/metadata.h"
#include "core/registry.h"
#include "core/result.h"
#include "kiln/runtime.h"

namespace kiln::core {

std::string listTable(const Registry& registry);

// Reads <dir>/metadata.json (schema checked).
Result<ArtifactMetadata> loadArtifactMetadata(const std::filesystem::path& dir);
std::string inspectTable(const ArtifactMetadata& metadata);
// The build summary table: one row per (variant, SM): registers, smem, spills, size, time.
std::string resourceTable(const ArtifactMetadata& metadata);

// Loads every cubin of the artifact (sha256 checked against metadata.json), builds kiln_variant
// tables in memory and asks the runtime which variants device `ordinal` can run. No device or
// driver: an environment error carrying the runtime's message.
Result<DoctorReport> runDoctor(const std::filesystem::path& dir, int ordinal);

}  // namespace kiln::core
