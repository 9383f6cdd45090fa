// ptxas -v parsing. The report is line-oriented:
//   ptxas info    : Compiling entry function 'kiln_x' for 'sm_90'
//   ptxas info    : Function properties for kiln_x
//       320 bytes stack frame, 364 bytes spill stores, 388 bytes spill loads
//   ptxas info    : Used 32 registers, used 0 barriers, 1024 bytes smem, ...
// A "Function properties" block may also describe a non-inlined device function; it belongs to
// the current entry only when it names that entry.
#include "core/ptxas.h"

#include <regex>
#include <sstream>

namespace kiln::core {

namespace {

long numberBefore(const std::string& line, const std::string& unit) {
  std::smatch match;
  std::regex pattern("(\\d+) " + unit);
  if (std::regex_search(line, match, pattern)) return std::stol(match[1]);
  return 0;
}

}  // namespace

std::map<std::string, KernelResources> parsePtxasReport(const std::string& text) {
  static const std::regex entry_re(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex props_re(R"(Function properties for (\S+))");
  static const std::regex used_re(R"(Used (\d+) registers)");
  std::map<std::string, KernelResources> kernels;
  std::string entry;            // the entry being reported, or empty
  bool in_entry_props = false;  // the last "Function properties" line named `entry`
  std::istringstream lines(text);
  std::string line;
  std::smatch match;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, match, entry_re)) {
      entry = match[1];
      kernels[entry];
      in_entry_props = false;
    } else if (std::regex_search(line, match, props_re)) {
      in_entry_props = !entry.empty() && match[1] == entry;
    } else if (line.find("bytes stack frame") != std::string::npos) {
      if (in_entry_props) {
        KernelResources& k = kernels[entry];
        k.stack_bytes = numberBefore(line, "bytes stack frame");
        k.spill_store_bytes = numberBefore(line, "bytes spill stores");
        k.spill_load_bytes = numberBefore(line, "bytes spill loads");
      }
    } else if (std::regex_search(line, match, used_re)) {
      if (!entry.empty()) {
        KernelResources& k = kernels[entry];
        k.registers = std::stoi(match[1]);
        k.shared_bytes = numberBefore(line, "bytes smem");
      }
      in_entry_props = false;
    }
  }
  return kernels;
}

}  // namespace kiln::core
