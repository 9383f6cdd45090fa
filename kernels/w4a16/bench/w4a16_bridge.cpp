// A C bridge from Python (ctypes) to the w4a16 runner of a kiln artifact, for
// kernels/w4a16/bench/w4a16_vs_torch.py: the benchmark passes raw device pointers (torch's
// data_ptr()), sizes, a workspace and its CUDA stream, and gets a status code and message back;
// it repacks its GPTQ / AWQ checkpoints into kiln's layout through here (repack()) and reads its
// rows from here too (the bench cases of kernels/w4a16/tests/gpu/cases.h). The artifact's library
// is linked statically into this shared library with its symbols hidden, so only these functions
// show.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "kiln/groups/w4a16.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/w4a16.h"
#include "w4a16/tests/gpu/cases.h"

#if !defined(KILN_W4A16_ENABLED)
#error "the artifact has no w4a16 group: kiln build --gpu-arch sm_NN --kernels w4a16"
#endif

namespace {

// kInvalidArgument with `text` in the caller's buffer.
int refuse(const std::string& text, char* message, std::size_t message_bytes) {
  kiln_bench::copyMessage(text, message, message_bytes);
  return static_cast<int>(kiln::StatusCode::kInvalidArgument);
}

bool isDtypeCode(int code) {
  return code == 0 || code == 1;
}

std::string notDtype(const char* what, int code) {
  return std::string(what) + " code " + std::to_string(code) + " is not 0 (fp16) or 1 (bf16)";
}

// The problem of the shapes alone (the pointers are set by the caller).
kiln::w4a16::Problem problemOf(int dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                               int group_size, int splits) {
  kiln::w4a16::Problem p;
  p.dtype = kiln_bench::dtypeOfCode(dtype);
  p.m = m;
  p.n = n;
  p.k = k;
  p.group_size = group_size;
  p.splits = splits;
  return p;
}

}  // namespace

// Repacks a GPTQ (format 0) or AWQ (format 1) checkpoint into kiln's layout on `stream`
// (kiln::w4a16::repack): qweight, qzeros (NULL: symmetric, no zero points written) and src_scales
// ([k / group, n] of scales_dtype) are the checkpoint's device tensors; weight (n * k / 2 bytes),
// scales and zeros ([k / group, n] of dtype; zeros only with qzeros) are kiln's. dtype and
// scales_dtype: 0 fp16, 1 bf16. stream: a cudaStream_t (torch.cuda.current_stream().cuda_stream).
// Returns 0 on success, else the kiln::StatusCode value, with the status text in `message`.
KILN_BENCH_EXPORT int kiln_bench_w4a16_repack(int format, int dtype, int scales_dtype,
                                              std::int64_t n, std::int64_t k, int group_size,
                                              const void* qweight, const void* qzeros,
                                              const void* src_scales, void* weight, void* scales,
                                              void* zeros, void* stream, char* message,
                                              std::size_t message_bytes) {
  if (format != 0 && format != 1) {
    return refuse("format code " + std::to_string(format) + " is not 0 (GPTQ) or 1 (AWQ)", message,
                  message_bytes);
  }
  if (!isDtypeCode(dtype)) return refuse(notDtype("dtype", dtype), message, message_bytes);
  if (!isDtypeCode(scales_dtype)) {
    return refuse(notDtype("scales dtype", scales_dtype), message, message_bytes);
  }
  kiln::w4a16::RepackProblem p;
  p.format = format == 0 ? kiln::w4a16::SourceFormat::kGptq : kiln::w4a16::SourceFormat::kAwq;
  p.dtype = kiln_bench::dtypeOfCode(dtype);
  p.scales_dtype = kiln_bench::dtypeOfCode(scales_dtype);
  p.n = n;
  p.k = k;
  p.group_size = group_size;
  p.qweight = qweight;
  p.qzeros = qzeros;
  p.src_scales = src_scales;
  p.weight = weight;
  p.scales = scales;
  p.zeros = zeros;
  const kiln::Status s = kiln::w4a16::repack(p, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

// workspaceSize() of the problem (pointers play no part in it): zero_point 1 sizes the zero-point
// variant's plan, 0 the symmetric one's; splits 0 lets the selector plan K's split, else fixes
// it; multiprocessors 0 plans for the largest device (a workspace that fits every device), else
// for that many SMs (the split count a device of that many SMs runs: workspace / (m * n * 4)).
// 0 when the problem is refused or K is not split.
KILN_BENCH_EXPORT std::size_t kiln_bench_w4a16_workspace(int dtype, std::int64_t m, std::int64_t n,
                                                         std::int64_t k, int group_size,
                                                         int zero_point, int splits,
                                                         int multiprocessors) {
  if (!isDtypeCode(dtype)) return 0;
  kiln::w4a16::Problem p = problemOf(dtype, m, n, k, group_size, splits);
  p.multiprocessors = multiprocessors;
  // The zero-point form is chosen by zeros != null; an aligned placeholder stands in for it.
  if (zero_point != 0) p.zeros = reinterpret_cast<const void*>(0x100);
  return kiln::w4a16::workspaceSize(p);
}

// y[m, n] = x[m, k] . dequant(weight)^T (+ bias) on `stream` (kiln::w4a16::run): weight, scales and
// zeros (NULL: symmetric, z = 8) in kiln's layout (kiln_bench_w4a16_repack writes them), x, y,
// bias (NULL: none) of dtype (0 fp16, 1 bf16); splits 0: planned for the stream's device, else
// exactly that many; workspace of workspace_bytes (kiln_bench_w4a16_workspace; NULL when 0).
// Returns 0 on success, else the kiln::StatusCode value, with the status text in `message`.
KILN_BENCH_EXPORT int kiln_bench_w4a16(int dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                                       int group_size, int splits, const void* x,
                                       const void* weight, const void* scales, const void* zeros,
                                       const void* bias, void* y, void* workspace,
                                       std::size_t workspace_bytes, void* stream, char* message,
                                       std::size_t message_bytes) {
  if (!isDtypeCode(dtype)) return refuse(notDtype("dtype", dtype), message, message_bytes);
  kiln::w4a16::Problem p = problemOf(dtype, m, n, k, group_size, splits);
  p.x = x;
  p.weight = weight;
  p.scales = scales;
  p.zeros = zeros;
  p.bias = bias;
  p.y = y;
  const kiln::Status s =
      kiln::w4a16::run(p, workspace, workspace_bytes, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

KILN_BENCH_EXPORT int kiln_bench_variant_count(void) {
  return static_cast<int>(std::size(kiln::generated::w4a16::kVariants));
}

// The i-th w4a16 variant: its name, tile_m, group size, zero-point form (0 symmetric, 1 zero
// points) and dtype code (0 fp16, 1 bf16); NULL outputs are skipped. Returns 0, or -1 when i is
// out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* tile_m,
                                         int* group_size, int* zero_point, int* dtype) {
  if (i < 0 || i >= kiln_bench_variant_count()) return -1;
  const auto& v = kiln::generated::w4a16::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (tile_m != nullptr) *tile_m = v.tile_m;
  if (group_size != nullptr) *group_size = v.group_size;
  if (zero_point != nullptr) *zero_point = v.zero_point ? 1 : 0;
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  return 0;
}

// The bench cases (kernels/w4a16/tests/gpu/cases.h, those marked kBench), each as the fields
// {m, n, k, bias (0 / 1), splits (0: planned by the selector)}; kiln_bench_w4a16_case returns 0,
// or -1 when i is out of range or num_fields is not kiln_bench_w4a16_case_fields().
namespace {
namespace cases = kiln::w4a16::cases;
constexpr int kCaseFields = 5;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_w4a16_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_w4a16_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_w4a16_case(int i, char* name, std::size_t name_bytes,
                                            double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr) return -1;
  const double values[kCaseFields] = {static_cast<double>(c->m), static_cast<double>(c->n),
                                      static_cast<double>(c->k), c->bias ? 1.0 : 0.0,
                                      static_cast<double>(c->splits)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
