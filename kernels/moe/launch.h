// The moe launch shapes, evaluated by the kernels at compile time (block sizes, shared memory
// carve-up, __launch_bounds__) and by the runner at run time (grids, shared bytes): one function
// each, so the two can never disagree.
//
// The block runs as five kernels on the caller's stream, none of which waits on the host:
//   route      one warp per token: softmax over E in fp32, the top k (ties to the lower expert),
//              their weights (renormalised when asked)
//   align      one block: per-expert row counts, their prefix sums (expert_offsets, and the
//              row tiles of each expert, tile_offsets), the slot of every expert row
//   fc1        grouped GEMM, one block per (row tile, 64 intermediate columns): the block reads the
//              tile's expert from tile_offsets on the device, gathers its token rows of x and
//              writes SiLU(x . gate^T) * (x . up^T) for its 64 columns
//   fc2        grouped GEMM, one block per (row tile, 128 hidden columns): act . w2^T, each row
//              written to its slot
//   finalize   one block per token: y = sum_j weight_j * down[t * k + j] (+ residual), in j order
// The GEMM grids are sized for the most row tiles any routing can make (maxRowTiles); blocks past
// the routing's actual count return at once, so no count ever travels to the host.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace kiln::moe {

inline constexpr int kWarp = 32;
inline constexpr int kMaxExperts = 512;  // the route kernel keeps E / 32 logits per lane
inline constexpr int kMaxTopK = 16;
inline constexpr int kRouteWarps = 8;  // tokens per route block
inline constexpr int kAlignThreads = 1024;
inline constexpr int kFinalizeThreads = 256;

// The grouped GEMM tile (fc1 and fc2 share the kernel): kBlockM expert rows x kBlockN output
// columns, where an fc1 block computes kBlockN gate and kBlockN up columns (its B tile is
// 2 * kBlockN weight rows) and an fc2 block 2 * kBlockN hidden columns: the same B tile of
// kBlockBRows rows either way. 4 warps as 2 x 2, each 32 rows x 64 weight rows (eight n8 tiles);
// K in steps of kBlockK through a kStages-deep cp.async ring.
inline constexpr int kBlockM = 64;
inline constexpr int kBlockN = 64;
inline constexpr int kBlockBRows = 2 * kBlockN;
inline constexpr int kBlockK = 32;
inline constexpr int kStages = 4;
inline constexpr int kGemmWarps = 4;
inline constexpr int kGemmThreads = kGemmWarps * kWarp;
inline constexpr int kRowBytes = kBlockK * 2;  // one row of a stage: 64 bytes, 4 chunks of 16
inline constexpr int kStageABytes = kBlockM * kRowBytes;
inline constexpr int kStageBBytes = kBlockBRows * kRowBytes;
inline constexpr int kStageBytes = kStageABytes + kStageBBytes;
inline constexpr int kGemmSharedBytes = kStages * kStageBytes;  // 48 KiB: no opt-in needed

static_assert(kGemmSharedBytes <= 48 * 1024, "the GEMM's shared memory must fit without opt-in");
static_assert(kMaxExperts % kWarp == 0 && kMaxExperts <= kAlignThreads);

KILN_HOST_DEVICE constexpr std::int64_t ceilDiv(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The most row tiles a routing of `rows` = T * k expert rows over E experts can make: each expert
// with rows adds at most one partial tile, and at most min(E, rows) experts have rows.
KILN_HOST_DEVICE constexpr std::int64_t maxRowTiles(std::int64_t rows, std::int64_t experts) {
  return rows / kBlockM + (experts < rows ? experts : rows);
}

KILN_HOST_DEVICE constexpr std::int64_t fc1ColumnBlocks(std::int64_t intermediate) {
  return intermediate / kBlockN;
}
KILN_HOST_DEVICE constexpr std::int64_t fc2ColumnBlocks(std::int64_t hidden) {
  return ceilDiv(hidden, kBlockBRows);
}

}  // namespace kiln::moe
