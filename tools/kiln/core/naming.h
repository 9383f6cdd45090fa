// Every name the builder derives from a variant name, in one place (contract 4, docs/naming.md):
// the C symbols, the define, the header and image paths, the constant macros and identifiers,
// the GPU targets and the tag. Nothing else in the builder formats these strings, so they cannot
// drift apart.
#pragma once

#include <compare>
#include <string>
#include <vector>

namespace kiln::core {

// One entry of --gpu-arch and of metadata.json's gpu_archs: `sm_NN` (a cubin: SASS for SM NN) or
// `compute_NN` (PTX for the virtual architecture NN, JIT-compiled by the driver at module load).
// An int converts to the sm_NN entry, the common case.
struct GpuArch {
  int sm = 0;
  bool ptx = false;
  constexpr GpuArch() = default;
  constexpr GpuArch(int sm_number, bool is_ptx = false)  // NOLINT(google-explicit-constructor)
      : sm(sm_number), ptx(is_ptx) {}
  auto operator<=>(const GpuArch&) const = default;
};

// The grammar of docs/naming.md, for the registry (kiln.toml) and for verify (metadata.json, whose
// names become paths, symbols and defines): an empty string when `name` is valid, else the rule
// it breaks. A group name matches [a-z][a-z0-9]*; a variant name is `<group>_<fields>`.
std::string checkGroupName(const std::string& name);
std::string checkVariantName(const std::string& name, const std::string& group);

std::string upperCase(const std::string& text);
// "head_dim" -> "HeadDim"
std::string camelCase(const std::string& text);

// kiln_<variant>__arch<NN>_image
std::string imageSymbol(const std::string& variant, int sm);
// kiln_<variant>_variant
std::string variantSymbol(const std::string& variant);
// KILN_<VARIANT>_ENABLED
std::string enabledDefine(const std::string& variant);
// KILN_CONST_<NAME>
std::string constantMacro(const std::string& constant);
// k<Name>
std::string constantIdentifier(const std::string& constant);

// "sm_90"
std::string smName(int sm);
// "compute_80": the virtual architecture a PTX image is compiled for
std::string ptxTarget(int sm);
// "sm_90" or "compute_80"
std::string gpuArchName(const GpuArch& arch);
// "sm_90", "sm_90a" (arch-specific SASS) or "compute_80" (PTX; never arch-specific here)
std::string nvccTarget(int sm, bool arch_specific, bool ptx = false);
// "sm_90" / "compute_80" -> the entry; sm 0 when malformed ("sm_90a" included: arch-specific
// targets come from kiln.toml, not from the tag).
GpuArch parseGpuArch(const std::string& text);
// "sm_90" -> 90, "90" -> 90 ("sm_90a" -> 90); 0 when malformed.
int parseSm(const std::string& text);
// The artifact tag: the entries ascending by SM, joined: "sm_87_sm_90", "compute_80",
// "sm_80_compute_90".
std::string artifactTag(const std::vector<GpuArch>& archs);

// Paths relative to the artifact directory.
// <variant>.sm_<NN> for a cubin, <variant>.compute_<NN> for PTX: the name of the image file
// (below), of its generated shim (.src/<stem>.cpp) and of that shim's object in libkiln.a.
std::string imageStem(const std::string& variant, int sm, bool ptx);
std::string cubinPath(const std::string& variant, int sm);  // cubins/<variant>.sm_<NN>.cubin
std::string ptxPath(const std::string& variant, int sm);    // cubins/<variant>.compute_<NN>.ptx
// The image file of (variant, SM): ptxPath for a PTX image, else cubinPath.
std::string imagePath(const std::string& variant, int sm, bool ptx);
std::string variantHeaderPath(const std::string& variant);  // include/kiln/variants/<variant>.h
std::string groupHeaderPath(const std::string& group);      // include/kiln/groups/<group>.h
inline constexpr const char kAllHeaderPath[] = "include/kiln/kiln_all.h";
inline constexpr const char kLibraryPath[] = "lib/libkiln.a";
inline constexpr const char kDoctorPath[] = "bin/kiln-doctor";
inline constexpr const char kMetadataFile[] = "metadata.json";

}  // namespace kiln::core
