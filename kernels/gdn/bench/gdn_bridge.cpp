// A C bridge from Python (ctypes) to the gdn runner of a kiln artifact (both problems: decode in
// place and the multi-token verify), for kernels/gdn/bench/gdn_vs_torch.py: the benchmark passes
// raw device pointers (torch's data_ptr()), sizes and its CUDA stream, and gets a status code and
// message back; it reads its rows from here too (the bench cases of
// kernels/gdn/tests/gpu/cases.h). The artifact's library is linked statically into this shared
// library with its symbols hidden, so only these functions show.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "gdn/tests/gpu/cases.h"
#include "kiln/groups/gdn.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/gdn.h"

#if !defined(KILN_GDN_ENABLED)
#error "the artifact has no gdn group: kiln build --gpu-arch sm_NN --kernels gdn"
#endif

namespace {

// Shapes as one array: {dtype (0 fp16, 1 bf16), batch, heads_qk, heads_v, head_dim_k,
// head_dim_v, num_slots}; the multi-token problem appends tokens (T).
constexpr int kShapeFields = 7;
constexpr int kMtpShapeFields = 8;

bool badDtype(int code, char* message, std::size_t message_bytes) {
  if (code == 0 || code == 1) return false;
  kiln_bench::copyMessage("dtype code " + std::to_string(code) + " is not 0 (fp16) or 1 (bf16)",
                          message, message_bytes);
  return true;
}

// The gate form of a call: g and beta (gating all null), or the gating inputs (g, beta null).
kiln::gdn::Gating gatingOf(const void* const* gating) {
  kiln::gdn::Gating g;
  if (gating == nullptr) return g;
  g.a = gating[0];
  g.b = gating[1];
  g.a_log = static_cast<const float*>(gating[2]);
  g.dt_bias = static_cast<const float*>(gating[3]);
  return g;
}

// The fields both problems share: shape[0..6] (dtype code, batch, H, Hv, d_k, d_v, num_slots)
// and the common inputs.
template <typename P, typename State>
void fillCommon(const int* shape, float scale, const void* q, const void* k, const void* v,
                const float* g, const float* beta, const void* const* gating, void* out,
                State* state, const std::int32_t* slots, P* p) {
  p->dtype = kiln_bench::dtypeOfCode(shape[0]);
  p->batch = shape[1];
  p->heads_qk = shape[2];
  p->heads_v = shape[3];
  p->head_dim_k = shape[4];
  p->head_dim_v = shape[5];
  p->num_slots = shape[6];
  p->scale = scale;
  p->q = q;
  p->k = k;
  p->v = v;
  p->g = g;
  p->beta = beta;
  p->gating = gatingOf(gating);
  p->out = out;
  p->state = state;
  p->slots = slots;
}

}  // namespace

KILN_BENCH_EXPORT int kiln_bench_gdn_shape_fields(void) {
  return kShapeFields;
}
KILN_BENCH_EXPORT int kiln_bench_gdn_mtp_shape_fields(void) {
  return kMtpShapeFields;
}

// One decode step. Returns 0 on success, else the kiln::StatusCode value, with the status text in
// `message`. stream: a cudaStream_t (torch.cuda.current_stream().cuda_stream). gating: null, or
// {a, b, a_log, dt_bias} for the fused-gating variants (then g and beta are null).
KILN_BENCH_EXPORT int kiln_bench_gdn(const int* shape, float scale, const void* q, const void* k,
                                     const void* v, const float* g, const float* beta,
                                     const void* const* gating, void* out, float* state,
                                     const std::int32_t* slots, void* stream, char* message,
                                     std::size_t message_bytes) {
  if (badDtype(shape[0], message, message_bytes))
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  kiln::gdn::Problem p;
  fillCommon(shape, scale, q, k, v, g, beta, gating, out, state, slots, &p);
  const kiln::Status s = kiln::gdn::run(p, nullptr, 0, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

// One multi-token verify step (T = shape[7] tokens per sequence): outputs, and the intermediate
// states into `cache`: cache[b, t] when cache_slots is null, else cache[cache_slots[b, t]] of a
// cache of cache_entries states (which may be the pool `state` itself). Returns as kiln_bench_gdn.
KILN_BENCH_EXPORT int kiln_bench_gdn_mtp(const int* shape, float scale, const void* q,
                                         const void* k, const void* v, const float* g,
                                         const float* beta, const void* const* gating, void* out,
                                         const float* state, const std::int32_t* slots,
                                         float* cache, const std::int32_t* cache_slots,
                                         long long cache_entries, void* stream, char* message,
                                         std::size_t message_bytes) {
  if (badDtype(shape[0], message, message_bytes))
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  kiln::gdn::MtpProblem p;
  fillCommon(shape, scale, q, k, v, g, beta, gating, out, state, slots, &p);
  p.tokens = shape[7];
  p.cache = cache;
  p.cache_slots = cache_slots;
  p.cache_entries = cache_entries;
  const kiln::Status s = kiln::gdn::run(p, nullptr, 0, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

// The i-th gdn variant: its name, head dims, dtype code (0 fp16, 1 bf16), max_tokens (1:
// gdn_decode, in place; more: gdn_decode_mtp) and fused_gating (0 / 1). Returns 0, or -1 when i
// is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* head_dim_k,
                                         int* head_dim_v, int* dtype, int* max_tokens,
                                         int* fused_gating) {
  if (i < 0 || i >= static_cast<int>(std::size(kiln::generated::gdn::kVariants))) return -1;
  const auto& v = kiln::generated::gdn::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (head_dim_k != nullptr) *head_dim_k = v.head_dim_k;
  if (head_dim_v != nullptr) *head_dim_v = v.head_dim_v;
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  if (max_tokens != nullptr) *max_tokens = v.max_tokens;
  if (fused_gating != nullptr) *fused_gating = v.fused_gating ? 1 : 0;
  return 0;
}

// The bench cases (kernels/gdn/tests/gpu/cases.h, those marked kBench), each as the fields
// {op (cases::BenchOp: 0 decode, 1 mtp, 2 final, 3 gating), batch, tokens, heads_qk, heads_v,
// head_dim_k, head_dim_v}. kiln_bench_gdn_case returns 0, or -1 when i is out of range, the case
// is of no bench table, or num_fields is not kiln_bench_gdn_case_fields().
namespace {
namespace cases = kiln::gdn::cases;
constexpr int kCaseFields = 7;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_gdn_case_fields(void) {
  return kCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_gdn_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_gdn_case(int i, char* name, std::size_t name_bytes, double* fields,
                                          int num_fields) {
  const cases::Case* c = kiln_bench::benchCase(cases::kCases, cases::kBench, i);
  if (c == nullptr || cases::benchOp(*c) == cases::BenchOp::kNone) return -1;
  const double values[kCaseFields] = {
      static_cast<double>(cases::benchOp(*c)), static_cast<double>(c->batch),
      static_cast<double>(c->tokens),          static_cast<double>(c->heads_qk),
      static_cast<double>(c->heads_v),         static_cast<double>(c->head_dim_k),
      static_cast<double>(c->head_dim_v)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}

// Prefill (kiln::gdn::PrefillProblem), for gdn_prefill_vs_fla.py. shape: {dtype code, batch
// (sequences), heads_qk, heads_v, head_dim_k, head_dim_v, num_slots, tokens (all sequences),
// max_seqlen}. kiln_bench_gdn_prefill_workspace returns the workspace bytes the call needs (-1 for
// a bad dtype code); kiln_bench_gdn_prefill runs it with that workspace (has_initial_state may be
// null) and returns as kiln_bench_gdn.
namespace {
constexpr int kPrefillShapeFields = 9;

kiln::gdn::PrefillProblem prefillProblem(const int* shape) {
  kiln::gdn::PrefillProblem p;
  p.dtype = kiln_bench::dtypeOfCode(shape[0]);
  p.batch = shape[1];
  p.heads_qk = shape[2];
  p.heads_v = shape[3];
  p.head_dim_k = shape[4];
  p.head_dim_v = shape[5];
  p.num_slots = shape[6];
  p.tokens = shape[7];
  p.max_seqlen = shape[8];
  return p;
}
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_gdn_prefill_shape_fields(void) {
  return kPrefillShapeFields;
}

KILN_BENCH_EXPORT long long kiln_bench_gdn_prefill_workspace(const int* shape) {
  if (shape[0] != 0 && shape[0] != 1) return -1;
  return static_cast<long long>(kiln::gdn::workspaceSize(prefillProblem(shape)));
}

KILN_BENCH_EXPORT int kiln_bench_gdn_prefill(const int* shape, float scale, const void* q,
                                             const void* k, const void* v, const float* g,
                                             const float* beta, const void* const* gating,
                                             void* out, float* state, const std::int32_t* slots,
                                             const std::int32_t* cu_seqlens,
                                             const std::int32_t* has_initial_state, void* workspace,
                                             long long workspace_bytes, void* stream, char* message,
                                             std::size_t message_bytes) {
  if (badDtype(shape[0], message, message_bytes))
    return static_cast<int>(kiln::StatusCode::kInvalidArgument);
  kiln::gdn::PrefillProblem p = prefillProblem(shape);
  p.scale = scale;
  p.q = q;
  p.k = k;
  p.v = v;
  p.g = g;
  p.beta = beta;
  p.gating = gatingOf(gating);
  p.out = out;
  p.state = state;
  p.slots = slots;
  p.cu_seqlens = cu_seqlens;
  p.has_initial_state = has_initial_state;
  const kiln::Status s = kiln::gdn::run(p, workspace, static_cast<std::size_t>(workspace_bytes),
                                        static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

// The prefill bench cases (cases.h's kPrefillCases marked kBench), each as the fields {sequences,
// length of each (the bench rows' sequences are equally long), heads_qk, heads_v}: the
// "gdn_prefill" cases of kiln_bench.Bridge.read_cases.
namespace {
constexpr int kPrefillCaseFields = 4;
}  // namespace

KILN_BENCH_EXPORT int kiln_bench_gdn_prefill_case_fields(void) {
  return kPrefillCaseFields;
}

KILN_BENCH_EXPORT int kiln_bench_gdn_prefill_case_count(void) {
  return kiln_bench::benchCaseCount(cases::kPrefillCases, cases::kBench);
}

KILN_BENCH_EXPORT int kiln_bench_gdn_prefill_case(int i, char* name, std::size_t name_bytes,
                                                  double* fields, int num_fields) {
  const cases::PrefillCase* c = kiln_bench::benchCase(cases::kPrefillCases, cases::kBench, i);
  if (c == nullptr) return -1;
  const double values[kPrefillCaseFields] = {
      static_cast<double>(c->count), static_cast<double>(cases::prefillLength(*c, 0)),
      static_cast<double>(c->heads_qk), static_cast<double>(c->heads_v)};
  return kiln_bench::exportCase(c->name, values, name, name_bytes, fields, num_fields);
}
