// A C bridge from Python (ctypes) to the gemv runner of a kiln artifact, for
// kernels/gemv/bench/gemv_vs_torch.py: the benchmark passes raw device pointers (torch's
// data_ptr()), sizes and its CUDA stream, and gets a status code and message back; it reads its
// shapes from here too (the bench cases of kernels/gemv/tests/gpu/cases.h). The artifact's library
// is linked statically into this shared library with its symbols hidden, so only these functions
// show.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "bridge.h"
#include "gemv/tests/gpu/cases.h"
#include "kiln/groups/gemv.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/gemv.h"

#if !defined(KILN_GEMV_ENABLED)
#error "the artifact has no gemv group: kiln build --gpu-arch sm_NN --kernels gemv"
#endif

namespace {

int finish(const kiln::Status& s, char* message, std::size_t message_bytes) {
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

}  // namespace

// y[m, n] (row stride ldy; 0: n) = x[m, k] (row stride ldx; 0: k) . w[n, k]^T (+ bias[n]).
// dtype: 0 fp16, 1 bf16 (x, w, bias); out_fp32: y in float32, else in the dtype; overlap: the
// problem's overlap_launch (a programmatic dependent launch on sm_90+). Returns 0 on success, else
// the kiln::StatusCode value, with the status text in `message`. stream: a cudaStream_t
// (torch.cuda.current_stream().cuda_stream), NULL for the legacy default.
KILN_BENCH_EXPORT int kiln_bench_gemv_run(int dtype, int out_fp32, std::int64_t m, std::int64_t n,
                                          std::int64_t k, std::int64_t ldx, std::int64_t ldy,
                                          const void* x, const void* w, const void* bias, void* y,
                                          int overlap, void* stream, char* message,
                                          std::size_t message_bytes) {
  if (dtype != 0 && dtype != 1) {
    kiln_bench::copyMessage("dtype code " + std::to_string(dtype) + " is not 0 (fp16) or 1 (bf16)",
                            message, message_bytes);
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  kiln::gemv::GemvProblem p;
  p.dtype = kiln_bench::dtypeOfCode(dtype);
  p.out_dtype = out_fp32 != 0 ? kiln::DType::kFloat32 : p.dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.ldx = ldx;
  p.ldy = ldy;
  p.x = x;
  p.w = w;
  p.bias = bias;
  p.y = y;
  p.overlap_launch = overlap != 0;
  return finish(kiln::gemv::run(p, nullptr, 0, static_cast<kiln::Stream>(stream)), message,
                message_bytes);
}

KILN_BENCH_EXPORT int kiln_bench_variant_count(void) {
  return static_cast<int>(std::size(kiln::generated::gemv::kVariants));
}

// The i-th gemv variant: its name and dtype code (0 fp16, 1 bf16). Returns 0, or -1 when i is out
// of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* dtype) {
  if (i < 0 || i >= kiln_bench_variant_count()) return -1;
  const auto& v = kiln::generated::gemv::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  return 0;
}

// The bench cases (kernels/gemv/tests/gpu/cases.h, those marked kBench), each as the fields
// {m, n, k, bias (0 / 1), out_fp32 (0 / 1)}; kiln_bench_gemv_case returns 0, or -1 when i is out of
// range or num_fields is not kiln_bench_gemv_case_fields().
namespace {
namespace cases = kiln::gemv::cases;
constexpr int kCaseFields = 5;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_gemv_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_gemv_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_gemv_case(int i, char* name, std::size_t name_bytes,
                                           double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr) return -1;
  const double values[kCaseFields] = {static_cast<double>(c->m), static_cast<double>(c->n),
                                      static_cast<double>(c->k), c->bias ? 1.0 : 0.0,
                                      c->out_fp32 ? 1.0 : 0.0};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
