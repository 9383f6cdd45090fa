// Plan: what the artifact will be, as a pure function of what the build read (build_inputs.h):
// no file, process or clock. The selection (core/plan.h) says which (variant, SM) jobs to
// compile; this fills in everything that follows from it before anything is compiled: the
// provenance, a record per variant (its inputs and fingerprint) and per image (its target,
// format, symbol and file), and, in a merge, the existing artifact's variants that are kept,
// the union of the compile targets and the groups. The generated headers and sources are
// functions of these records (assemble.h), so the plan fixes them too. It checks what can be
// checked without compiling: that the existing artifact may be merged into (checkMergeable) and
// that no two variants define one C symbol (contract 4).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/build_inputs.h"
#include "core/metadata.h"
#include "core/result.h"

namespace kiln::core {

struct ArtifactPlan {
  std::filesystem::path artifact_dir;
  // Everything but what compiling tells: the images' sha256, size, compile time, command and
  // ptxas report (for the images of this build's jobs), the library and the build date.
  ArtifactMetadata metadata;
  // The existing artifact's variants kept by a merge, by name; their images are copied over.
  std::vector<std::string> kept;
};

Result<ArtifactPlan> planArtifact(const BuildInputs& inputs);

}  // namespace kiln::core
