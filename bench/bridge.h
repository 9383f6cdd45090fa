// What every group's ctypes bridge shares: the export macro, copying a status text into the
// caller's buffer, and the artifact's identity (tag, fingerprint) that each benchmark records.
// Include it in exactly one bridge per shared library (it defines the two identity exports).
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "kiln/kiln_all.h"

#define KILN_BENCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace kiln_bench {

inline void copyMessage(const std::string& text, char* message, std::size_t message_bytes) {
  if (message == nullptr || message_bytes == 0) return;
  std::snprintf(message, message_bytes, "%s", text.c_str());
}

// The dtype code the Python side uses: 0 fp16, 1 bf16.
inline int dtypeCode(const char* dtype) {
  return std::strcmp(dtype, "fp16") == 0 ? 0 : 1;
}

}  // namespace kiln_bench

KILN_BENCH_EXPORT const char* kiln_bench_artifact_tag(void) {
  return kiln_artifact_tag();
}

KILN_BENCH_EXPORT const char* kiln_bench_artifact_fingerprint(void) {
  return kiln_artifact_fingerprint();
}
