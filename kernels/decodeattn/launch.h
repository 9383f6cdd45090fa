// The decodeattn launch shape, from the baked head dim alone: block size, keys per pipeline stage,
// stages and dynamic shared memory. The kernel evaluates it at compile time (smem carve-up, unroll
// counts, __launch_bounds__) and the runner at run time (grid, block, shared bytes, the split
// heuristic's blocks per SM), so the two never disagree and no number is typed twice.
//
// Work decomposition (kernels/decodeattn/README.md has the picture):
//   block  = (split, kv head x row chunk, sequence); 4 warps. A row is one (query token, query
//            head) of the KV head's group: group_size x query_tokens rows per KV head, in chunks
//            of one 16-row mma tile (kiln_decodeattn) or two (kiln_decodeattn_rows32, for more
//            than 16 rows: each K and V byte then feeds 32 rows instead of being read twice).
//   warp   = every 4th 16-key subtile of the block's key range, with its own cp.async pipeline
//            of kStages subtiles of K and V in shared memory, its own running (max, sum, out);
//            the 4 warps' partial results are combined once, at the end.
#pragma once

#include "common/host_device.h"

namespace kiln::decodeattn {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * 32;
// One mma.sync m16n8k16 tile: 16 rows ((query token, query head) pairs) and 16 keys (the k of
// the P.V product) per warp and stage. A block's chunk is 1 or kMaxRowTiles such row tiles.
inline constexpr int kTileRows = 16;
inline constexpr int kMaxRowTiles = 2;
inline constexpr int kSubtileKeys = 16;
inline constexpr int kBlockKeys = kWarps * kSubtileKeys;  // split ranges are multiples of this
// Tuning (H200 design estimate, see NOTES.md): 3 stages per warp keep 2 subtiles of K and V
// (16 KiB at d128) in flight per warp while the third is computed: 128 KiB per SM at 2 blocks,
// far above the ~30 KiB per SM that Little's law asks of HBM3e (4.8 TB/s x ~800 ns / 132 SMs).
inline constexpr int kStages = 3;
// Page sizes a run may use: powers of two, so that a 16-key subtile (16-aligned) never straddles
// a page (one page-table lookup per subtile) and page / row come from a shift and a mask.
inline constexpr int kMinPageSize = 16;
inline constexpr int kMaxPageSize = 256;
inline constexpr int kElementBytes = 2;  // fp16 / bf16

// Shared memory of one warp's stage: a 16-key subtile of K and one of V.
KILN_HOST_DEVICE constexpr int stageBytes(int head_dim) {
  return 2 * kSubtileKeys * head_dim * kElementBytes;
}
// Dynamic shared memory of the attention kernel: every warp's pipeline. The end-of-loop combine
// reuses each warp's own region (rows x head_dim floats + 2 x rows floats fits in kStages stages
// for up to 32 rows).
KILN_HOST_DEVICE constexpr int sharedBytes(int head_dim) {
  return kWarps * kStages * stageBytes(head_dim);
}
KILN_HOST_DEVICE constexpr int combineBytesPerWarp(int head_dim, int row_tiles) {
  return (row_tiles * kTileRows * head_dim + 2 * row_tiles * kTileRows) * 4;
}

// Blocks of the attention kernel resident per SM on a 228 KiB-shared-memory SM (sm_90, sm_100;
// 1 KiB per block is reserved by the hardware), capped by registers: 4 blocks (<= 128 per
// thread) with one row tile, 3 (<= 168) with two, whose fragments and accumulators double. The
// kernels' __launch_bounds__; on SMs with less shared memory the same grid is simply more waves.
inline constexpr int kSharedBytesPerSmHopper = 228 * 1024;
KILN_HOST_DEVICE constexpr int blocksPerSm(int head_dim, int row_tiles) {
  const int by_smem = kSharedBytesPerSmHopper / (sharedBytes(head_dim) + 1024);
  const int by_registers = row_tiles > 1 ? 3 : 4;
  return by_smem < 1 ? 1 : (by_smem > by_registers ? by_registers : by_smem);
}

// Blocks per SM that a split problem's wave is sized for: half of what fits, i.e. one block per
// SM at d128 (64 KiB of K and V in flight per SM) and two at d64 (the same bytes). Fewer, longer
// splits beat a full two-per-SM wave on every split row measured (NOTES.md v7b: H100, d128,
// 1 x 32768 and 8 x 8192, one and 8 query tokens): each block's ramp, combine and partials are
// paid for twice the keys, and the merge reads half the partials.
KILN_HOST_DEVICE constexpr int splitWaveBlocksPerSm(int head_dim) {
  const int half = blocksPerSm(head_dim, 1) / 2;
  return half < 1 ? 1 : half;
}

// The merge kernel: one block of 4 warps per (sequence, query head) row; the warps share out the
// row's splits (at most kMaxSplits, one lse per thread).
inline constexpr int kMergeWarps = 4;
inline constexpr int kMergeThreads = kMergeWarps * 32;

// Split-KV bounds. A split shorter than 4 subtiles per warp would spend more on its pipeline
// ramp and its partial write than on its keys; 128 splits cover 32k keys at 256 keys per split.
inline constexpr int kMinKeysPerSplit = 4 * kBlockKeys;  // 256
inline constexpr int kMaxSplits = 128;

}  // namespace kiln::decodeattn
