// The gdn selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant and launch run it?" (run). Pure logic over a table of
// variants, unit-tested on the host (kernels/gdn/tests/gdn_selector_test.cpp); runner.cpp feeds it
// the artifact's generated table.
#pragma once

#include <span>

#include "kiln/runner_support.h"
#include "kiln/runners/gdn.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::gdn {

inline constexpr const char kDecodeEntry[] = "kiln_gdn_decode";         // gdn_decode_*
inline constexpr const char kDecodeMtpEntry[] = "kiln_gdn_decode_mtp";  // gdn_decode_mtp_*
inline constexpr const char kMtpCommitEntry[] = "kiln_gdn_mtp_commit";  // gdn_mtp_commit_*
inline constexpr unsigned kActivationAlignment = 16;  // q, k, v, out, state: 16-byte aligned rows
inline constexpr unsigned kGateAlignment = 2;  // gating.a, gating.b: one 16-bit element per read

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;

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

}  // namespace kiln::gdn
