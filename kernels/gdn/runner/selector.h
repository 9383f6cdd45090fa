// The gdn selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant and launch run it?" (run). Pure logic over a table of
// variants, unit-tested on the host (kernels/gdn/tests/gdn_selector_test.cpp); runner.cpp feeds it
// the artifact's generated table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>

#include "gdn/launch.h"
#include "kiln/runner_support.h"
#include "kiln/runners/gdn.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::gdn {

inline constexpr const char kDecodeEntry[] = "kiln_gdn_decode";               // gdn_decode_*
inline constexpr const char kDecodeMtpEntry[] = "kiln_gdn_decode_mtp";        // gdn_decode_mtp_*
inline constexpr const char kMtpCommitEntry[] = "kiln_gdn_mtp_commit";        // gdn_mtp_commit_*
inline constexpr const char kPrefillChunkEntry[] = "kiln_gdn_prefill_chunk";  // gdn_prefill_*
inline constexpr const char kPrefillStateEntry[] = "kiln_gdn_prefill_state";  // gdn_prefill_*
inline constexpr unsigned kActivationAlignment = 16;  // q, k, v, out, state: 16-byte aligned rows
inline constexpr unsigned kGateAlignment = 2;  // gating.a, gating.b: one 16-bit element per read
// The prefill's token indices and offsets (cu_seqlens) are int32 in the kernels.
inline constexpr std::int64_t kMaxPrefillTokens = std::numeric_limits<std::int32_t>::max();
// The bytes of an activation element of the prefill variants (fp16, bf16): the state kernel's
// tiles and the workspace's w, u, qd, kd are in the activation dtype.
inline constexpr int kPrefillActivationBytes = 2;

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// The kernel's parameters, in the order of its entry (gdn_decode.py's `decode`). Both gate forms
// take every gate parameter; the one a variant does not read is null.
struct DecodeArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  const void* a;
  const void* b;
  const float* a_log;
  const float* dt_bias;
  void* out;
  float* state;
  const std::int32_t* slots;
  float scale;
  std::int32_t heads_qk;
  std::int32_t heads_v;
};

// The multi-token kernel's parameters, in the order of its entry (gdn_decode_mtp.py's
// `decode_mtp`).
struct DecodeMtpArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  const void* a;
  const void* b;
  const float* a_log;
  const float* dt_bias;
  void* out;
  const float* state;
  const std::int32_t* slots;
  float* cache;
  const std::int32_t* cache_slots;
  float scale;
  std::int32_t heads_qk;
  std::int32_t heads_v;
  std::int32_t tokens;
  std::int32_t slotted;  // 1: token t's state goes to cache[cache_slots[b, t]], 0: cache[b, t]
};

// The commit kernel's parameters, in the order of its entry (gdn_mtp_commit.py's `commit`).
struct CommitArgs {
  const float* cache;
  float* state;
  const std::int32_t* slots;
  const std::int32_t* accepted;
  std::int32_t tokens;
  std::int32_t heads_v;
};

// The prefill chunk kernel's parameters, in the order of its entry (gdn_prefill.py's
// `prefill_chunk`): the inputs, then the workspace arrays it writes (kernels/gdn/launch.h,
// PrefillWorkspace), then the scalars. As for decode, the gate parameters of the other form are
// null.
struct PrefillChunkArgs {
  const void* q;
  const void* k;
  const void* v;
  const float* g;
  const float* beta;
  const void* a;
  const void* b;
  const float* a_log;
  const float* dt_bias;
  const std::int32_t* slots;
  const std::int32_t* cu_seqlens;
  void* ws_w;
  void* ws_u;
  void* ws_qd;
  void* ws_kd;
  float* ws_attn;
  float* ws_gc;
  float scale;
  std::int32_t heads_qk;
  std::int32_t heads_v;
};

// The prefill state kernel's parameters, in the order of its entry (gdn_prefill.py's
// `prefill_state`): the workspace arrays the chunk kernel wrote, then the outputs and the
// sequences.
struct PrefillStateArgs {
  const void* ws_w;
  const void* ws_u;
  const void* ws_qd;
  const void* ws_kd;
  const float* ws_attn;
  const float* ws_gc;
  void* out;
  float* state;
  const std::int32_t* slots;
  const std::int32_t* cu_seqlens;
  const std::int32_t* has_initial_state;
  std::int32_t initial_given;  // 1: has_initial_state[b] says whether slots[b] is read, 0: always
  std::int32_t heads_v;
};

// A planned launch: the variant, its entry, the grid and the kernel's arguments (DecodeArgs for
// Problem, DecodeMtpArgs for MtpProblem, CommitArgs for CommitProblem).
template <typename Args>
struct LaunchPlan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // batch == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;
  LaunchConfig config;
  Args args{};
};
using Plan = LaunchPlan<DecodeArgs>;
using MtpPlan = LaunchPlan<DecodeMtpArgs>;
using CommitPlan = LaunchPlan<CommitArgs>;

// The prefill's two launches, in order: the chunk kernel (skipped when tokens == 0: no chunk),
// then the state kernel (every sequence, even of length 0: it writes the starting state back).
// The workspace pointers of the arguments are the caller's, set by bindWorkspace at run time.
struct PrefillPlan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // batch == 0
  bool chunk_pass = false;          // tokens > 0: the chunk kernel runs
  PrefillWorkspace layout;          // the arrays' offsets in the workspace (launch.h)
  std::size_t workspace_bytes = 0;  // layout.bytes; 0 for batch 0 or tokens 0
  int chunk_entry = -1;
  int state_entry = -1;
  LaunchConfig chunk_config;  // (ceil(max_seqlen / chunk), Hv, batch) blocks of d_k + d_v threads
  LaunchConfig state_config;  // the decode launch shape
  PrefillChunkArgs chunk_args{};
  PrefillStateArgs state_args{};
};

// Admits `problem` against the variants of `table` that have its entry (kDecodeEntry) and its
// gate form (fused_gating when problem.gating is given) and plans its launch; checks in order:
// one gate form, dtype known, head dims built for it and the gate form, heads (H >= 1, Hv a
// multiple of H), batch >= 0, scale finite, grid limits, then (batch > 0) num_slots >= 1 and
// pointers non-null and aligned; then `device` when given.
Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan);
// The same for the multi-token problem, against the variants with kDecodeMtpEntry; after the head
// dims it checks 1 <= tokens <= the variant's max_tokens, and after the pointers the cache: without
// cache_slots, cache_entries 0 and the cache [batch, T, Hv, d_k, d_v] not overlapping the pool
// [num_slots, Hv, d_k, d_v]; with them, cache_slots aligned, cache_entries >= 1 and the cache
// [cache_entries, Hv, d_k, d_v] either the pool itself (cache_entries == num_slots) or apart.
Status select(std::span<const VariantInfo> table, const MtpProblem& problem,
              const DeviceQuery* device, MtpPlan* plan);
// The commit, against the variants with kMtpCommitEntry (matched by head dims alone: the commit
// has no activation dtype or gate form); checks in order: head dims built, 1 <= tokens <= the
// variant's max_tokens, Hv >= 1, batch >= 0, grid limits, then (batch > 0) num_slots >= 1,
// pointers non-null and aligned, the cache [batch, tokens, Hv, d_k, d_v] not overlapping the pool
// [num_slots, Hv, d_k, d_v]; then `device` when given.
Status select(std::span<const VariantInfo> table, const CommitProblem& problem,
              const DeviceQuery* device, CommitPlan* plan);
// The prefill, against the variants with kPrefillChunkEntry (which must also have
// kPrefillStateEntry); checks in order: one gate form, dtype known, head dims built for it and the
// gate form, heads, batch >= 0, scale finite, grid limits (as Problem, in the same words), then
// 0 <= tokens <= kMaxPrefillTokens, 0 <= max_seqlen <= tokens and max_seqlen >= 1 when tokens >= 1,
// tokens + max_seqlen <= kMaxPrefillTokens (the kernels' int32 token indices), then (batch > 0,
// unless `pointers` is kSkip) num_slots >= 1, the inputs as Problem's, cu_seqlens non-null and
// aligned, has_initial_state aligned when given; then `device` when given. The plan's workspace
// pointers stay null until bindWorkspace.
Status select(std::span<const VariantInfo> table, const PrefillProblem& problem,
              const DeviceQuery* device, PrefillPlan* plan,
              PointerChecks pointers = PointerChecks::kCheck);
// kInvalidArgument when the plan needs a workspace and `workspace` is null, smaller than
// plan.workspace_bytes (naming both sizes) or not kPrefillWorkspaceAlignment-byte aligned; else
// points both kernels' workspace arguments at the plan's arrays in it. A plan that needs none
// (tokens 0: the state kernel reads no chunk) takes any workspace, null included, and leaves them
// null.
Status bindWorkspace(PrefillPlan* plan, void* workspace, std::size_t workspace_bytes);

}  // namespace kiln::gdn
