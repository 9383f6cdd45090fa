// Text table rendering: columns padded to their widest cell, a rule under the header.
#include "core/table.h"

#include <algorithm>

#include <fmt/format.h>

namespace kiln::core {

std::string TextTable::render() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (size_t r = 0; r < rows_.size(); ++r) {
    std::string line;
    for (size_t i = 0; i < rows_[r].size(); ++i) {
      line +=
          i + 1 == rows_[r].size() ? rows_[r][i] : fmt::format("{:<{}}  ", rows_[r][i], widths[i]);
    }
    out += line + "\n";
    if (r == 0) {
      size_t total = 0;
      for (size_t w : widths) total += w + 2;
      out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
    }
  }
  return out;
}

std::string humanBytes(unsigned long long bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  if (bytes < 1024ULL * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024.0);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
}

}  // namespace kiln::core
