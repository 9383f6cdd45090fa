// A C bridge from Python (ctypes) to the rmsnorm runner of a kiln artifact, for
// kernels/rmsnorm/bench/rmsnorm_vs_torch.py: the benchmark passes raw device pointers (torch's
// data_ptr()), sizes and its CUDA stream, and gets a status code and message back; it reads its
// shapes from here too (the bench cases of kernels/rmsnorm/tests/gpu/cases.h). The artifact's
// library is linked statically into this shared library with its symbols hidden, so only these
// functions show.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "kiln/groups/rmsnorm.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/rmsnorm.h"
#include "rmsnorm/tests/gpu/cases.h"

#if !defined(KILN_RMSNORM_ENABLED)
#error "the artifact has no rmsnorm group: kiln build --gpu-arch sm_NN --kernels rmsnorm"
#endif

// dtype: 0 = fp16, 1 = bf16. residual == NULL: plain RMSNorm; else fused add + RMSNorm.
// stream: a cudaStream_t (torch.cuda.current_stream().cuda_stream), NULL for the legacy default.
// Returns 0 on success, else the kiln::StatusCode value, with the status text in `message`.
KILN_BENCH_EXPORT int kiln_bench_rmsnorm(int dtype, std::int64_t rows, std::int64_t hidden,
                                         float eps, void* out, const void* x, void* residual,
                                         const void* weight, void* stream, char* message,
                                         std::size_t message_bytes) {
  if (dtype != 0 && dtype != 1) {
    kiln_bench::copyMessage("dtype code " + std::to_string(dtype) + " is not 0 (fp16) or 1 (bf16)",
                            message, message_bytes);
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  kiln::rmsnorm::Problem p;
  p.dtype = kiln_bench::dtypeOfCode(dtype);
  p.rows = rows;
  p.hidden = hidden;
  p.eps = eps;
  p.out = out;
  p.x = x;
  p.residual = residual;
  p.weight = weight;
  const kiln::Status s = kiln::rmsnorm::run(p, nullptr, 0, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

KILN_BENCH_EXPORT int kiln_bench_variant_count(void) {
  return static_cast<int>(std::size(kiln::generated::rmsnorm::kVariants));
}

// The i-th rmsnorm variant: its name, hidden size and dtype code (0 fp16, 1 bf16). Returns 0, or
// -1 when i is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* hidden,
                                         int* dtype) {
  if (i < 0 || i >= kiln_bench_variant_count()) return -1;
  const auto& v = kiln::generated::rmsnorm::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (hidden != nullptr) *hidden = v.hidden;
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  return 0;
}

// The bench cases (kernels/rmsnorm/tests/gpu/cases.h, those marked kBench), each as the fields
// {rows, hidden}; kiln_bench_rmsnorm_case returns 0, or -1 when i is out of range or num_fields
// is not kiln_bench_rmsnorm_case_fields().
namespace {
namespace cases = kiln::rmsnorm::cases;
constexpr int kCaseFields = 2;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_rmsnorm_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_rmsnorm_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_rmsnorm_case(int i, char* name, std::size_t name_bytes,
                                              double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr) return -1;
  const double values[kCaseFields] = {static_cast<double>(c->rows), static_cast<double>(c->hidden)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
