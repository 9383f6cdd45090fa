// Name derivation; see naming.h for why it is centralised.
#include "core/naming.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

namespace kiln::core {

std::string upperCase(const std::string& text) {
  std::string out = text;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return out;
}

std::string camelCase(const std::string& text) {
  std::string out;
  bool upper = true;
  for (char c : text) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return out;
}

std::string imageSymbol(const std::string& variant, int sm) {
  return fmt::format("kiln_{}__arch{}_image", variant, sm);
}
std::string variantSymbol(const std::string& variant) {
  return fmt::format("kiln_{}_variant", variant);
}
std::string enabledDefine(const std::string& variant) {
  return fmt::format("KILN_{}_ENABLED", upperCase(variant));
}
std::string constantMacro(const std::string& constant) {
  return "KILN_CONST_" + upperCase(constant);
}
std::string constantIdentifier(const std::string& constant) {
  return "k" + camelCase(constant);
}

std::string smName(int sm) {
  return fmt::format("sm_{}", sm);
}
std::string ptxTarget(int sm) {
  return fmt::format("compute_{}", sm);
}
std::string gpuArchName(const GpuArch& arch) {
  return arch.ptx ? ptxTarget(arch.sm) : smName(arch.sm);
}
std::string nvccTarget(int sm, bool arch_specific, bool ptx) {
  if (ptx) return ptxTarget(sm);
  return arch_specific ? fmt::format("sm_{}a", sm) : smName(sm);
}

GpuArch parseGpuArch(const std::string& text) {
  for (const auto& [prefix, ptx] :
       {std::pair<std::string, bool>{"sm_", false}, {"compute_", true}}) {
    if (text.rfind(prefix, 0) != 0) continue;
    const std::string digits = text.substr(prefix.size());
    if (digits.empty() || digits.size() > 3 ||
        !std::all_of(digits.begin(), digits.end(),
                     [](unsigned char c) { return std::isdigit(c) != 0; }))
      return {};
    return GpuArch(std::stoi(digits), ptx);
  }
  return {};
}

std::string artifactTag(const std::vector<GpuArch>& archs) {
  std::vector<GpuArch> sorted = archs;
  std::sort(sorted.begin(), sorted.end());
  std::string tag;
  for (const GpuArch& arch : sorted) {
    if (!tag.empty()) tag += '_';
    tag += gpuArchName(arch);
  }
  return tag;
}

std::string imageStem(const std::string& variant, int sm, bool ptx) {
  return variant + "." + gpuArchName(GpuArch(sm, ptx));
}
std::string cubinPath(const std::string& variant, int sm) {
  return "cubins/" + imageStem(variant, sm, false) + ".cubin";
}
std::string ptxPath(const std::string& variant, int sm) {
  return "cubins/" + imageStem(variant, sm, true) + ".ptx";
}
std::string imagePath(const std::string& variant, int sm, bool ptx) {
  return ptx ? ptxPath(variant, sm) : cubinPath(variant, sm);
}
std::string variantHeaderPath(const std::string& variant) {
  return fmt::format("include/kiln/variants/{}.h", variant);
}
std::string groupHeaderPath(const std::string& group) {
  return fmt::format("include/kiln/groups/{}.h", group);
}

}  // namespace kiln::core
