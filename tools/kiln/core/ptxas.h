// Reads the resource report that `ptxas -v` (nvcc -Xptxas -v) prints per entry kernel, so the
// build table and metadata.json can show registers, shared memory and spills per variant and SM.
#pragma once

#include <map>
#include <string>

namespace kiln::core {

struct KernelResources {
  int registers = 0;
  long shared_bytes = 0;  // static shared memory
  long stack_bytes = 0;   // stack frame
  long spill_store_bytes = 0;
  long spill_load_bytes = 0;
};

// Entry name as ptxas prints it (the extern "C" name, or the mangled name) -> resources.
// Lines for non-entry functions ("Function properties for <device fn>") are ignored.
std::map<std::string, KernelResources> parsePtxasReport(const std::string& text);

}  // namespace kiln::core
