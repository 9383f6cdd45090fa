// Generators for everything `kiln build` writes as source text: the per-(variant, SM) image
// shim that embeds a cubin, the per-variant shim, the artifact table, and the headers of
// docs/artifact-format.md. Pure functions of the metadata model, so they are tested as strings.
#pragma once

#include <string>
#include <vector>

#include "core/metadata.h"

namespace kiln::core {

// Defines kiln_<name>__arch<NN>_image(): the cubin as a static byte array; for a PTX image, the
// text followed by one NUL (cuModuleLoadData reads PTX as a C string), with kiln_image.size and
// .sha256 covering the text only, as metadata.json records them, and kiln_image.ptx = 1.
std::string imageShimSource(const VariantRecord& variant, const ImageRecord& image,
                            const std::string& cubin_bytes);
// Defines kiln_<name>_variant(): the name, group, entries and every SM image (the runtime's
// selectImage dispatches on it by the SM of the caller's device). Declares the image symbols.
// `cuda_version` is the artifact's (Provenance::cuda_version): the table records it as
// cudaVersionNumber() for the runtime's driver check.
std::string variantShimSource(const VariantRecord& variant, const std::string& cuda_version = "");
// "12.6.85" -> 12060, as cuDriverGetVersion reports a driver's CUDA version; 0 when malformed.
int cudaVersionNumber(const std::string& cuda_version);
// Defines kiln_artifact_variants / kiln_artifact_fingerprint / kiln_artifact_tag.
std::string artifactTableSource(const ArtifactMetadata& metadata);

// The canonical header: kiln_<name>_variant() and the baked constants. It does not depend on
// which SM images the variant has, so it is identical in every artifact that carries it.
std::string variantHeader(const VariantRecord& variant);
// The group header, kiln/groups/<group>.h: `variants` (the group's, sorted by name) as a table
// kVariants, its size and the group's supported SMs (kSupportedSms). With `runner_types` (the group
// has a runner, kernels/<group>/runner/), the table's rows are the runner's own
// ::kiln::<group>::VariantInfo (from kiln/runners/<group>.h), initialized by field name with the
// constants in the runner's types (DType, the group's enums), so that a disagreement between
// kiln.toml and the runner fails to compile; without, a struct VariantEntry of the constants as
// plain values (int, bool, const char*) after name and variant. The constants are in kiln.toml's
// declaration order (every variant of a group sets the same ones); the runner's row declares
// name, the constants, then variant.
std::string groupHeader(const std::string& group, const GroupRecord& record,
                        const std::vector<const VariantRecord*>& variants, bool runner_types);
std::string allHeader(const ArtifactMetadata& metadata);

}  // namespace kiln::core
