// The fingerprints of metadata.json (docs/artifact-format.md): what a variant and an artifact are
// made from, as one sha256 each. Apart from metadata.h because they fold in the registry's variant
// and this kiln's library recipe (library_recipe.h, over the code generator), which the verifier
// (tools/kiln-verify), reading a fingerprint but never computing one, does not link.
#pragma once

#include <string>

#include "core/metadata.h"
#include "core/registry.h"

namespace kiln::core {

// sha256 over the variant's inputs, constants, entries, targets, flags and tool versions.
std::string variantFingerprint(const VariantRecord& record, const Variant& variant,
                               const Provenance& provenance);
// sha256 over the provenance fields, the runtime inputs, every variant's fingerprint (by name)
// and this kiln's library recipe (library_recipe.h: host compile and archive flags, the code
// generator): every input of lib/libkiln.a.
std::string artifactFingerprint(const ArtifactMetadata& metadata);

}  // namespace kiln::core
