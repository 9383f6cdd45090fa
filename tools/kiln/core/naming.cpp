// Name derivation; see naming.h for why it is centralised.
#include "core/naming.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include <fmt/format.h>

namespace kiln::core {

namespace {

bool lowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

}  // namespace

std::string checkGroupName(const std::string& name) {
  constexpr std::size_t kMaxLength = 64;
  if (name.size() > kMaxLength)
    return fmt::format("is {} characters long; the limit is {}", name.size(), kMaxLength);
  if (name.empty() || name.front() < 'a' || name.front() > 'z' ||
      !std::all_of(name.begin(), name.end(), lowerAlnum))
    return "must match [a-z][a-z0-9]*";
  return {};
}

std::string checkVariantName(const std::string& name, const std::string& group) {
  constexpr std::size_t kMaxLength = 64;
  if (name.size() > kMaxLength)
    return fmt::format("is {} characters long; the limit is {}", name.size(), kMaxLength);
  if (name.empty() ||
      !std::all_of(name.begin(), name.end(), [](char c) { return lowerAlnum(c) || c == '_'; }))
    return "may contain only lower-case letters, digits and '_'";
  if (name.rfind(group + "_", 0) != 0)
    return fmt::format("must start with the group name and '_' ('{}_')", group);
  if (name.size() == group.size() + 1)
    return "needs at least one distinguishing field after the group name";
  if (name.find("__") != std::string::npos)
    return "must not contain '__' (reserved for the per-SM suffix __arch<NN>)";
  if (name.back() == '_') return "must not end with '_'";
  return {};
}

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

int parseSm(const std::string& text) {
  std::string s = text;
  if (s.rfind("sm_", 0) == 0) s = s.substr(3);
  if (!s.empty() && s.back() == 'a') s.pop_back();
  if (s.empty() || s.size() > 3 || !std::all_of(s.begin(), s.end(), ::isdigit)) return 0;
  return std::stoi(s);
}

}  // namespace kiln::core
