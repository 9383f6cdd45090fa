// Every name the builder derives from a variant name, in one place (contract 4, docs/naming.md):
// the C symbols, the define, the header and cubin paths, the constant macros and identifiers.
// Nothing else in the builder formats these strings, so they cannot drift apart.
#pragma once

#include <string>
#include <vector>

namespace kiln::core {

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
// "sm_90" or "sm_90a"
std::string nvccTarget(int sm, bool arch_specific);
// The artifact tag: the SMs ascending, joined: "sm_87_sm_90".
std::string artifactTag(const std::vector<int>& sms);

// Paths relative to the artifact directory.
std::string cubinPath(const std::string& variant, int sm);  // cubins/<variant>.sm_<NN>.cubin
std::string variantHeaderPath(const std::string& variant);  // include/kiln/variants/<variant>.h
std::string groupHeaderPath(const std::string& group);      // include/kiln/groups/<group>.h
inline constexpr const char kAllHeaderPath[] = "include/kiln/kiln_all.h";
inline constexpr const char kLibraryPath[] = "lib/libkiln.a";
inline constexpr const char kMetadataFile[] = "metadata.json";

}  // namespace kiln::core
