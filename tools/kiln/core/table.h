// A plain-text table with aligned columns, for `kiln build`, `kiln list` and `kiln inspect`.
// Builds a string; printing is the CLI's job.
#pragma once

#include <string>
#include <vector>

namespace kiln::core {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// 1536 -> "1.5 KiB"
std::string humanBytes(unsigned long long bytes);

}  // namespace kiln::core
