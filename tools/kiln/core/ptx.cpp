// PTX text scanning; the observations behind it are in ptx.h.
#include "core/ptx.h"

#include <cctype>

namespace kiln::core {

namespace {

bool isIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '$' || c == '.';
}

// Each line of `ptx` without its `//` comment, split into whitespace/paren/comma separated words.
template <typename Visit>
void forEachLineWords(std::string_view ptx, Visit visit) {
  size_t start = 0;
  while (start <= ptx.size()) {
    size_t end = ptx.find('\n', start);
    if (end == std::string_view::npos) end = ptx.size();
    std::string_view line = ptx.substr(start, end - start);
    if (const size_t comment = line.find("//"); comment != std::string_view::npos)
      line = line.substr(0, comment);
    std::vector<std::string_view> words;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && !isIdentifierChar(line[i])) ++i;
      const size_t word = i;
      while (i < line.size() && isIdentifierChar(line[i])) ++i;
      if (i > word) words.push_back(line.substr(word, i - word));
    }
    if (!words.empty()) visit(words);
    if (end == ptx.size()) break;
    start = end + 1;
  }
}

}  // namespace

std::vector<std::string> ptxEntries(std::string_view ptx) {
  std::vector<std::string> entries;
  forEachLineWords(ptx, [&](const std::vector<std::string_view>& words) {
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == ".entry") entries.emplace_back(words[i + 1]);
    }
  });
  return entries;
}

int ptxTargetSm(std::string_view ptx) {
  int sm = 0;
  forEachLineWords(ptx, [&](const std::vector<std::string_view>& words) {
    if (sm != 0 || words.size() < 2 || words[0] != ".target") return;
    // ".target sm_80" or ".target sm_90a, texmode_independent": the first operand.
    std::string_view target = words[1];
    if (target.substr(0, 3) != "sm_") return;
    int value = 0;
    size_t digits = 0;
    for (size_t i = 3;
         i < target.size() && std::isdigit(static_cast<unsigned char>(target[i])) != 0; ++i) {
      value = value * 10 + (target[i] - '0');
      ++digits;
    }
    if (digits > 0 && digits <= 3) sm = value;
  });
  return sm;
}

}  // namespace kiln::core
