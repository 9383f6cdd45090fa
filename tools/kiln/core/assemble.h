// Assemble: the artifact as data, a pure function of the plan, the compiled images, the images a
// merge keeps and the runtime's sources: the metadata with every compiled image's results; the
// files to write into the staging directory, each a path and its bytes (the generated headers of
// docs/artifact-format.md, the runtime's and the runners' headers, and the generated sources of
// the library: a shim per image that embeds its bytes, a shim per variant, the artifact table);
// and the library's members in archive order (the generated sources, the runtime's, each
// runner's). Variants come by name in every file and the members in a fixed order, so the same
// inputs give the same bytes in any checkout.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/artifact_plan.h"
#include "core/build_inputs.h"
#include "core/compile.h"
#include "core/metadata.h"
#include "core/publish.h"

namespace kiln::core {

struct AssembledArtifact {
  // The plan's, with the compiled images' sha256, size, compile time, command and ptxas report,
  // and the sha256 of every header written; the library, the doctor and the build date are
  // still to be filled in.
  ArtifactMetadata metadata;
  std::vector<ArtifactFile> files;  // in writing order: a later file replaces an earlier one
  std::vector<LibraryMember> members;
};

// `kept`: the bytes of the images a merge keeps from the old artifact, by their path (cubin).
AssembledArtifact assembleArtifact(const ArtifactPlan& plan,
                                   const std::vector<CompiledImage>& compiled,
                                   const std::map<std::string, std::string>& kept,
                                   const RuntimeSources& runtime);

}  // namespace kiln::core
