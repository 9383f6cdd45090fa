// The decodeattn selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant, split count and launches run it?" (run, workspaceSize), so
// they cannot disagree. Pure logic over a table of variants: no generated header, no driver call,
// so it is unit-tested on the host with a fake table and a fake image check. runner.cpp feeds it
// the artifact's table and the stream's device.
#pragma once

#include <cstddef>
#include <span>

#include "decodeattn/params.h"
#include "kiln/runner_support.h"
#include "kiln/runners/decodeattn.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::decodeattn {

inline constexpr const char kAttentionEntry[] = "kiln_decodeattn";               // 16-row chunks
inline constexpr const char kAttentionRows32Entry[] = "kiln_decodeattn_rows32";  // 32-row chunks
inline constexpr const char kMergeEntry[] = "kiln_decodeattn_merge";
inline constexpr unsigned kTensorAlignment = 16;  // the kernels' 16-byte vector accesses
inline constexpr unsigned kIndexAlignment = 4;    // int32 page table and lengths
inline constexpr std::size_t kWorkspaceAlignment = 256;
inline constexpr int kMaxGridYZ = 65535;            // CUDA's limit for grid.y and grid.z
inline constexpr long long kMaxGridX = 2147483647;  // CUDA's limit for grid.x (merge: rows)
inline constexpr long long kMaxKeysPerSequence = 1LL << 30;  // max_pages_per_seq * page_size

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;        // batch == 0
  int attention_entry = -1;  // kAttentionEntry, or kAttentionRows32Entry (> 16 rows)
  int row_tiles = 0;         // 16-row mma tiles per block: 1, or 2 for the rows32 entry
  int merge_entry = -1;
  int num_splits = 0;
  LaunchConfig attention;           // programmatic: overlap_launch
  LaunchConfig merge;               // launched only when num_splits > 1; always programmatic
  std::size_t workspace_bytes = 0;  // the partials; 0 when num_splits == 1
  std::size_t lse_offset = 0;       // byte offset of partial_lse in the workspace
  DecodeAttentionParams params{};   // partial_out / partial_lse still null: run() places them
};

// The split count for `pairs` = batch * kv_heads * head_chunks blocks of at most `max_keys` keys
// on `multiprocessors` SMs: 1 when the pairs fill one split wave (splitWaveBlocksPerSm(head_dim)
// blocks per SM: one at d128, two at d64), else as many splits as fit in it, at most one per
// kMinKeysPerSplit keys and kMaxSplits. Non-decreasing in `multiprocessors` (so a workspace sized
// for more SMs is always enough).
int chooseSplits(long long pairs, long long max_keys, int multiprocessors, int head_dim);

// Admits `problem` against `table` and plans its launches for `multiprocessors` SMs (> 0). The
// checks, in order (the first failure is returned, its message naming the value and the limit):
//   dtype is a known value and built; head_dim is built for it     (kInvalidArgument/kNotSupported)
//   batch >= 0; batch == 0: plan.no_op and nothing else is checked but the device
//   q_heads, kv_heads >= 1, q_heads % kv_heads == 0; kv_layout a KvLayout value; page_size a
//   power of two in 16..256;
//   num_pages, max_pages_per_seq >= 1, their capacity <= 2^30 keys; max_seq_len,
//   multiprocessors >= 0; scale finite                              (kInvalidArgument)
//   unless `pointers` is kSkip (workspaceSize and numSplits, which depend on shapes only):
//   out, q, k_cache, v_cache non-null and 16-byte aligned; page_table, seq_lens non-null and
//   4-byte aligned                                                  (kInvalidArgument)
//   batch, kv_heads * head chunks <= 65535, batch * q_heads <= 2^31 - 1 (grid), the caches'
//   element count < 2^62
//   the variant has all three entries                               (kInternal)
// A KV head's rows (group_size x query_tokens) go in chunks of 16 (kAttentionEntry) when they
// fit one mma tile, else in chunks of 32 (kAttentionRows32Entry: two row tiles per warp share
// each K and V load, so the cache is read once per 32 rows, not once per 16).
//   last, `device` (when given) has an image of the variant         (the check's status)
Status select(std::span<const VariantInfo> table, const Problem& problem, int multiprocessors,
              const DeviceQuery* device, Plan* plan,
              PointerChecks pointers = PointerChecks::kCheck);

// The device step of select() alone.
Status checkDevice(const Plan& plan, const DeviceQuery& device);

// The workspace check of run(): `workspace` holds plan.workspace_bytes bytes, 16-byte aligned.
Status checkWorkspace(const Plan& plan, const void* workspace, std::size_t workspace_bytes);

}  // namespace kiln::decodeattn
