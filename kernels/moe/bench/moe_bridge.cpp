// A C bridge from Python (ctypes) to the moe runner of a kiln artifact, for
// kernels/moe/bench/moe_vs_torch.py: the benchmark passes raw device pointers (torch's
// data_ptr()), sizes, the Step bits to run, a workspace and its CUDA stream, and gets a status
// code and message back; it sizes the workspace and reads where the routing lies in it (the
// runner's workspaceLayout) through here too. The artifact's library is linked statically into
// this shared library with its symbols hidden, so only these functions show.
//
// The script's rows (two models x token counts) are its own for now: the group has no
// kernels/moe/tests/gpu/cases.h to export bench cases from (bench/README.md, "The cases").
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>

#include "bridge.h"
#include "kiln/groups/moe.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/moe.h"

#if !defined(KILN_MOE_ENABLED)
#error "the artifact has no moe group: kiln build --gpu-arch sm_NN --kernels moe"
#endif

// The step bits the script passes (moe_vs_torch.py's STEP_*), pinned to the runner's.
static_assert(kiln::moe::kRoute == 1u && kiln::moe::kAlign == 2u && kiln::moe::kFc1 == 4u &&
                  kiln::moe::kFc2 == 8u && kiln::moe::kFinalize == 16u &&
                  kiln::moe::kAllSteps == 31u,
              "moe_vs_torch.py's STEP_* values are the runner's Step bits");

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

// The problem of the shapes alone (the pointers and steps are set by the caller).
kiln::moe::Problem problemOf(int dtype, std::int64_t tokens, int experts, int top_k,
                             std::int64_t hidden, std::int64_t intermediate) {
  kiln::moe::Problem p;
  p.dtype = kiln_bench::dtypeOfCode(dtype);
  p.tokens = tokens;
  p.experts = experts;
  p.top_k = top_k;
  p.hidden = hidden;
  p.intermediate = intermediate;
  return p;
}

// The fields of kiln_bench_moe_layout, in its order.
constexpr int kLayoutFields = 8;

}  // namespace

// workspaceSize() of the problem (pointers and steps play no part in it): the bytes run() needs
// for any steps of the block. 0 when the problem is refused.
KILN_BENCH_EXPORT std::size_t kiln_bench_moe_workspace(int dtype, std::int64_t tokens, int experts,
                                                       int top_k, std::int64_t hidden,
                                                       std::int64_t intermediate) {
  if (!isDtypeCode(dtype)) return 0;
  return kiln::moe::workspaceSize(problemOf(dtype, tokens, experts, top_k, hidden, intermediate));
}

KILN_BENCH_EXPORT int kiln_bench_moe_layout_fields(void) {
  return kLayoutFields;
}

// workspaceLayout() of the problem into offsets[0 .. num_offsets): the byte offsets from the
// workspace's start of {topk_ids (int32 [T, k]), topk_weights (fp32 [T, k]), expert_offsets
// (int32 [E + 1]), tile_offsets (int32 [E + 1]), sorted_slots (int32 [T * k]), act (dtype
// [T * k, I]), down (dtype [T * k, H])}, then the total bytes. Returns 0, or -1 when the problem
// is refused or num_offsets is not kiln_bench_moe_layout_fields().
KILN_BENCH_EXPORT int kiln_bench_moe_layout(int dtype, std::int64_t tokens, int experts, int top_k,
                                            std::int64_t hidden, std::int64_t intermediate,
                                            std::size_t* offsets, int num_offsets) {
  if (!isDtypeCode(dtype) || offsets == nullptr || num_offsets != kLayoutFields) return -1;
  const kiln::moe::WorkspaceLayout w =
      kiln::moe::workspaceLayout(problemOf(dtype, tokens, experts, top_k, hidden, intermediate));
  if (w.bytes == 0) return -1;
  const std::size_t values[kLayoutFields] = {w.topk_ids,     w.topk_weights, w.expert_offsets,
                                             w.tile_offsets, w.sorted_slots, w.act,
                                             w.down,         w.bytes};
  for (int i = 0; i < kLayoutFields; ++i) offsets[i] = values[i];
  return 0;
}

// The moe block's `steps` (Step bits: 1 route, 2 align, 4 fc1, 8 fc2, 16 finalize; 31 all; a
// contiguous run of them) on `stream` (kiln::moe::run): x [T, H], logits [T, E] (fp32 when
// logits_fp32, else of dtype), w1 [E, 2I, H] (per expert I gate rows, then I up rows), w2
// [E, H, I], residual [T, H] (NULL: none) and y [T, H], all of dtype (0 fp16, 1 bf16) but logits;
// renormalize 1 divides each token's k weights by their sum. The workspace (workspace_bytes from
// kiln_bench_moe_workspace) carries the intermediates from one call to the next, so steps 4 | 8
// after a call of 1 | 2 runs the two GEMMs alone on that routing. stream: a cudaStream_t
// (torch.cuda.current_stream().cuda_stream). Returns 0 on success, else the kiln::StatusCode
// value, with the status text in `message`.
KILN_BENCH_EXPORT int kiln_bench_moe(int dtype, std::int64_t tokens, int experts, int top_k,
                                     std::int64_t hidden, std::int64_t intermediate,
                                     int renormalize, int logits_fp32, unsigned steps,
                                     const void* x, const void* logits, const void* w1,
                                     const void* w2, const void* residual, void* y, void* workspace,
                                     std::size_t workspace_bytes, void* stream, char* message,
                                     std::size_t message_bytes) {
  if (!isDtypeCode(dtype)) return refuse(notDtype("dtype", dtype), message, message_bytes);
  kiln::moe::Problem p = problemOf(dtype, tokens, experts, top_k, hidden, intermediate);
  p.renormalize = renormalize != 0;
  p.logits_fp32 = logits_fp32 != 0;
  p.steps = steps;
  p.x = x;
  p.logits = logits;
  p.w1 = w1;
  p.w2 = w2;
  p.residual = residual;
  p.y = y;
  const kiln::Status s =
      kiln::moe::run(p, workspace, workspace_bytes, static_cast<kiln::Stream>(stream));
  kiln_bench::copyMessage(s.toString(), message, message_bytes);
  return static_cast<int>(s.code());
}

KILN_BENCH_EXPORT int kiln_bench_variant_count(void) {
  return static_cast<int>(std::size(kiln::generated::moe::kVariants));
}

// The i-th moe variant: its name and dtype code (0 fp16, 1 bf16); NULL outputs are skipped.
// Returns 0, or -1 when i is out of range.
KILN_BENCH_EXPORT int kiln_bench_variant(int i, char* name, std::size_t name_bytes, int* dtype) {
  if (i < 0 || i >= kiln_bench_variant_count()) return -1;
  const auto& v = kiln::generated::moe::kVariants[i];
  kiln_bench::copyMessage(v.name, name, name_bytes);
  if (dtype != nullptr) *dtype = kiln_bench::dtypeCode(v.dtype);
  return 0;
}
