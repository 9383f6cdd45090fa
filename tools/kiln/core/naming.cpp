// Name derivation; see naming.h for why it is centralised.
#include "core/naming.h"

#include <algorithm>
#include <cctype>

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
std::string variantSymbol(const std::string& variant) { return fmt::format("kiln_{}_variant", variant); }
std::string enabledDefine(const std::string& variant) {
  return fmt::format("KILN_{}_ENABLED", upperCase(variant));
}
std::string constantMacro(const std::string& constant) {
  return "KILN_CONST_" + upperCase(constant);
}
std::string constantIdentifier(const std::string& constant) { return "k" + camelCase(constant); }

std::string smName(int sm) { return fmt::format("sm_{}", sm); }
std::string nvccTarget(int sm, bool arch_specific) {
  return arch_specific ? fmt::format("sm_{}a", sm) : smName(sm);
}
std::string artifactTag(const std::vector<int>& sms) {
  std::vector<int> sorted = sms;
  std::sort(sorted.begin(), sorted.end());
  std::string tag;
  for (int sm : sorted) {
    if (!tag.empty()) tag += '_';
    tag += smName(sm);
  }
  return tag;
}

std::string cubinPath(const std::string& variant, int sm) {
  return fmt::format("cubins/{}.sm_{}.cubin", variant, sm);
}
std::string variantHeaderPath(const std::string& variant) {
  return fmt::format("include/kiln/variants/{}.h", variant);
}
std::string groupHeaderPath(const std::string& group) {
  return fmt::format("include/kiln/groups/{}.h", group);
}

}  // namespace kiln::core
