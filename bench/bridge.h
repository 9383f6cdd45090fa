// What every group's ctypes bridge shares: the export macro, copying a status text into the
// caller's buffer, the dtype code, exporting the group's bench cases (its tests/gpu/cases.h), and
// the artifact's identity (tag, fingerprint) that each benchmark records. Include it in exactly
// one bridge per shared library (it defines the two identity exports).
#pragma once

#include <cstddef>
#include <cstdio>
#include <span>
#include <string>

#include "kiln/dtype.h"
#include "kiln/kiln_all.h"

#define KILN_BENCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace kiln_bench {

inline void copyMessage(const std::string& text, char* message, std::size_t message_bytes) {
  if (message == nullptr || message_bytes == 0) return;
  std::snprintf(message, message_bytes, "%s", text.c_str());
}

// The dtype code the Python side uses: 0 fp16, 1 bf16.
inline int dtypeCode(kiln::DType dtype) {
  return dtype == kiln::DType::kFloat16 ? 0 : 1;
}

// The dtype of a code the caller checked is 0 or 1.
inline kiln::DType dtypeOfCode(int code) {
  return code == 0 ? kiln::DType::kFloat16 : kiln::DType::kBFloat16;
}

// ---- the bench cases of a group's tests/gpu/cases.h -----------------------------------------
// A bridge exports the cases whose readers include the group's kBench bit, in table order, as
//   int kiln_bench_<group>_case_fields(void)   the number of fields of a case
//   int kiln_bench_<group>_case_count(void)    the number of bench cases
//   int kiln_bench_<group>_case(int i, char* name, size_t name_bytes, double* fields, int n)
// (each field a double: ints are exact), which kiln_bench.Bridge.read_cases() reads.

template <typename Case, std::size_t N>
int benchCaseCount(const Case (&cases)[N], unsigned bench) {
  int n = 0;
  for (const Case& c : cases) n += (c.readers & bench) != 0 ? 1 : 0;
  return n;
}

// The i-th bench case, or nullptr when i is out of range.
template <typename Case, std::size_t N>
const Case* benchCase(const Case (&cases)[N], unsigned bench, int i) {
  for (const Case& c : cases) {
    if ((c.readers & bench) == 0) continue;
    if (i-- == 0) return &c;
  }
  return nullptr;
}

// Copies a case's name and `values` to the caller: 0, or -1 when there is no case or the caller
// asks for another number of fields than the bridge has (a script and a bridge out of step).
inline int exportCase(const char* case_name, std::span<const double> values, char* name,
                      std::size_t name_bytes, double* fields, int num_fields) {
  if (case_name == nullptr || fields == nullptr || num_fields != static_cast<int>(values.size())) {
    return -1;
  }
  copyMessage(case_name, name, name_bytes);
  for (std::size_t i = 0; i < values.size(); ++i) fields[i] = values[i];
  return 0;
}

}  // namespace kiln_bench

KILN_BENCH_EXPORT const char* kiln_bench_artifact_tag(void) {
  return kiln_artifact_tag();
}

KILN_BENCH_EXPORT const char* kiln_bench_artifact_fingerprint(void) {
  return kiln_artifact_fingerprint();
}
