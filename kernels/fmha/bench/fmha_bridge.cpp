// A C bridge from Python (ctypes) to the fmha runner of a kiln artifact, for
// kernels/fmha/bench/fmha_vs_torch.py: the benchmark passes raw device pointers (torch's
// data_ptr()), the shape as one int array, the softmax scale and its CUDA stream, and gets a status
// code and message back; it reads its rows from here too (the bench cases of
// kernels/fmha/tests/gpu/cases.h). The artifact's library is linked statically into this shared
// library with its symbols hidden, so only these functions show.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>

#include "bridge.h"
#include "fmha/tests/gpu/cases.h"
#include "kiln/groups/fmha.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/fmha.h"

#if !defined(KILN_FMHA_ENABLED)
#error "the artifact has no fmha group: kiln build --gpu-arch sm_90 --kernels fmha"
#endif

namespace {

// Shapes as one array, so that the entry points below cannot take them in different orders:
// {dtype (0 fp16, 1 bf16), mask (0 full, 1 causal), head_dim, batch, q_heads, kv_heads, total_q,
//  total_k, max_seqlen_q, kernel (-1 the runner's choice, 0 wgmma, 1 mma), window_left,
//  page_size (0: contiguous K / V), max_pages_per_seq, num_pages} (paged: NHD).
constexpr int kShapeFields = 14;

kiln::fmha::Problem problemOf(const int* shape, float scale) {
  kiln::fmha::Problem p;
  p.dtype = kiln_bench::dtypeOfCode(shape[0]);
  p.mask = shape[1] == 0 ? kiln::fmha::Mask::kFull : kiln::fmha::Mask::kCausal;
  p.head_dim = shape[2];
  p.batch = shape[3];
  p.q_heads = shape[4];
  p.kv_heads = shape[5];
  p.total_q = shape[6];
  p.total_k = shape[7];
  p.max_seqlen_q = shape[8];
  if (shape[9] >= 0)
    p.kernel = shape[9] == 0 ? kiln::fmha::Kernel::kWgmma : kiln::fmha::Kernel::kMma;
  p.window_left = shape[10];
  p.page_size = shape[11];
  p.max_pages_per_seq = shape[12];
  p.num_pages = shape[13];
  p.scale = scale;
  return p;
}

// The codes must be 0 or 1: anything else is refused rather than read as bf16 / causal.
bool checkCodes(const int* shape, char* message, std::size_t message_bytes) {
  if ((shape[0] != 0 && shape[0] != 1) || (shape[1] != 0 && shape[1] != 1)) {
    kiln_bench::copyMessage("dtype code " + std::to_string(shape[0]) + " / mask code " +
                                std::to_string(shape[1]) + ": each must be 0 or 1",
                            message, message_bytes);
    return false;
  }
  if (shape[9] < -1 || shape[9] > 1) {
    kiln_bench::copyMessage("kernel code " + std::to_string(shape[9]) + " must be -1, 0 or 1",
                            message, message_bytes);
    return false;
  }
  return true;
}

}  // namespace

KILN_BENCH_EXPORT int kiln_bench_fmha_shape_fields(void) {
  return kShapeFields;
}

// Runs prefill attention. lse may be null (not written); page_table and seq_lens_k are null for
// contiguous K / V (then k, v are [total_k, kv_heads, d] and cu_seqlens_k set), else k, v are
// the caches and cu_seqlens_k is null. Returns 0 on success, else the kiln::StatusCode value,
// with the status text in `message`. stream: a cudaStream_t
// (torch.cuda.current_stream().cuda_stream).
KILN_BENCH_EXPORT int kiln_bench_fmha(
    const int* shape, float scale, void* out, float* lse, const void* q, const void* k,
    const void* v, const std::int32_t* cu_seqlens_q, const std::int32_t* cu_seqlens_k,
    const std::int32_t* page_table, const std::int32_t* seq_lens_k, void* workspace,
    std::size_t workspace_bytes, void* stream, char* message, std::size_t message_bytes) {
  if (!checkCodes(shape, message, message_bytes)) {
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  kiln::fmha::Problem p = problemOf(shape, scale);
  p.out = out;
  p.lse = lse;
  p.q = q;
  p.k = k;
  p.v = v;
  p.cu_seqlens_q = cu_seqlens_q;
  p.cu_seqlens_k = cu_seqlens_k;
  p.page_table = page_table;
  p.seq_lens_k = seq_lens_k;
  const kiln::Status s =
      kiln::fmha::run(p, workspace, workspace_bytes, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

// workspaceSize() of the problem (pointers play no part in it).
KILN_BENCH_EXPORT std::size_t kiln_bench_fmha_workspace(const int* shape, float scale) {
  return kiln::fmha::workspaceSize(problemOf(shape, scale));
}

// The i-th fmha variant: its name, head dim, dtype code (0 fp16, 1 bf16), mask code (0 full,
// 1 causal) and kernel code (0 wgmma, 1 mma). Returns 0, or -1 when i is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* head_dim,
                                         int* dtype, int* mask, int* kernel) {
  if (i < 0 || i >= static_cast<int>(std::size(kiln::generated::fmha::kVariants))) return -1;
  const auto& v = kiln::generated::fmha::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (head_dim != nullptr) *head_dim = v.head_dim;
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  if (mask != nullptr) *mask = v.mask == kiln::fmha::Mask::kCausal ? 1 : 0;
  if (kernel != nullptr) *kernel = v.kernel == kiln::fmha::Kernel::kWgmma ? 0 : 1;
  return 0;
}

// The bench cases (kernels/fmha/tests/gpu/cases.h, those marked kBench), each as the fields
// {batch, seq, q_heads, kv_heads, head_dim, dtype (-1 any, 0 fp16, 1 bf16), mask (-1 any, 0 full,
// 1 causal), scale_factor, quick (0 / 1), seq_q, mma_only (0 / 1), page_size, window_left}:
// `batch` sequences of `seq_q` queries over `seq` keys each (a bench case repeats one sequence).
// kiln_bench_fmha_case returns 0, or -1 when i is out of range, the case is not such a batch, or
// num_fields is not kiln_bench_fmha_case_fields().
namespace {
namespace cases = kiln::fmha::cases;
constexpr int kCaseFields = 13;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_fmha_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_fmha_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_fmha_case(int i, char* name, std::size_t name_bytes,
                                           double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr || c->seqs.count != 1) return -1;
  const int dtype = c->dtypes == cases::Dtypes::kBoth   ? -1
                    : c->dtypes == cases::Dtypes::kFp16 ? 0
                                                        : 1;
  const int mask = c->masks == cases::Masks::kBoth ? -1 : c->masks == cases::Masks::kFull ? 0 : 1;
  const double values[kCaseFields] = {static_cast<double>(c->repeat),
                                      static_cast<double>(c->seqs.values[0].k),
                                      static_cast<double>(c->q_heads),
                                      static_cast<double>(c->kv_heads),
                                      static_cast<double>(c->head_dim),
                                      static_cast<double>(dtype),
                                      static_cast<double>(mask),
                                      c->scale_factor,
                                      (c->readers & cases::kQuick) != 0 ? 1.0 : 0.0,
                                      static_cast<double>(c->seqs.values[0].q),
                                      c->mma_only || c->page_size > 0 ? 1.0 : 0.0,
                                      static_cast<double>(c->page_size),
                                      static_cast<double>(c->window_left)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
