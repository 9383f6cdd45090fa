// A C bridge from Python (ctypes) to the qkrope runner of a kiln artifact, for
// kernels/qkrope/bench/qkrope_vs_torch.py: the benchmark passes raw device pointers (torch's
// data_ptr()), sizes and its CUDA stream, and gets a status code and message back; it reads its
// shapes from here too (the bench cases of kernels/qkrope/tests/gpu/cases.h). The artifact's
// library is linked statically into this shared library with its symbols hidden, so only these
// functions show.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "kiln/groups/qkrope.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/qkrope.h"
#include "qkrope/tests/gpu/cases.h"

#if !defined(KILN_QKROPE_ENABLED)
#error "the artifact has no qkrope group: kiln build --gpu-arch sm_NN --kernels qkrope"
#endif

// dtype: 0 = fp16, 1 = bf16. hnd: 0 = NHD, 1 = HND cache pages. qk_norm: 0 or 1 (the weights
// are read only with 1). k_out / v_out may be NULL. stream: a cudaStream_t
// (torch.cuda.current_stream().cuda_stream), NULL for the legacy default. Returns 0 on success,
// else the kiln::StatusCode value, with the status text in `message`.
KILN_BENCH_EXPORT int kiln_bench_qkrope(int dtype, std::int64_t tokens, int q_heads, int kv_heads,
                                        int head_dim, int rotary_dim, float rope_theta, int qk_norm,
                                        float eps, int page_size, int hnd, int num_pages,
                                        const void* qkv, const std::int64_t* positions,
                                        const std::int64_t* slot_mapping, const void* q_norm_weight,
                                        const void* k_norm_weight, void* q_out, void* k_cache,
                                        void* v_cache, void* k_out, void* v_out, void* stream,
                                        char* message, std::size_t message_bytes) {
  if (dtype != 0 && dtype != 1) {
    kiln_bench::copyMessage("dtype code " + std::to_string(dtype) + " is not 0 (fp16) or 1 (bf16)",
                            message, message_bytes);
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  }
  kiln::qkrope::Problem p;
  p.dtype = kiln_bench::dtypeOfCode(dtype);
  p.tokens = tokens;
  p.q_heads = q_heads;
  p.kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.rope_theta = rope_theta;
  p.qk_norm = qk_norm != 0;
  p.eps = eps;
  p.page_size = page_size;
  p.kv_layout = hnd != 0 ? kiln::qkrope::KvLayout::kHND : kiln::qkrope::KvLayout::kNHD;
  p.num_pages = num_pages;
  p.qkv = qkv;
  p.positions = positions;
  p.slot_mapping = slot_mapping;
  p.q_norm_weight = q_norm_weight;
  p.k_norm_weight = k_norm_weight;
  p.q_out = q_out;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.k_out = k_out;
  p.v_out = v_out;
  const kiln::Status s = kiln::qkrope::run(p, nullptr, 0, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

KILN_BENCH_EXPORT int kiln_bench_variant_count(void) {
  return static_cast<int>(std::size(kiln::generated::qkrope::kVariants));
}

// The i-th qkrope variant: its name, head dim and dtype code (0 fp16, 1 bf16). Returns 0, or -1
// when i is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* head_dim,
                                         int* dtype) {
  if (i < 0 || i >= kiln_bench_variant_count()) return -1;
  const auto& v = kiln::generated::qkrope::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (head_dim != nullptr) *head_dim = v.head_dim;
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  return 0;
}

// The bench cases (kernels/qkrope/tests/gpu/cases.h, those marked kBench), each as the fields
// {tokens, q_heads, kv_heads, head_dim, page_size, rotary_dim, qk_norm, theta};
// kiln_bench_qkrope_case returns 0, or -1 when i is out of range or num_fields is not
// kiln_bench_qkrope_case_fields().
namespace {
namespace cases = kiln::qkrope::cases;
constexpr int kCaseFields = 8;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_qkrope_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_qkrope_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_qkrope_case(int i, char* name, std::size_t name_bytes,
                                             double* fields, int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr) return -1;
  const double values[kCaseFields] = {static_cast<double>(c->tokens),
                                      static_cast<double>(c->q_heads),
                                      static_cast<double>(c->kv_heads),
                                      static_cast<double>(c->head_dim),
                                      static_cast<double>(c->page_size),
                                      static_cast<double>(c->rotary_dim),
                                      c->qk_norm ? 1.0 : 0.0,
                                      static_cast<double>(c->theta)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
