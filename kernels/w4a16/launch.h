// The w4a16 launch shapes, derived from the baked tile alone, and the packed layout's geometry.
// The kernel evaluates them at compile time (block size, shared memory carve-up, unroll counts,
// __launch_bounds__) and the runner at run time (grid, block, shared bytes, split count): one
// function, so the two can never disagree and no number is typed twice.
//
// Swap AB: the weight tile is mma.sync's A operand (16 weight rows = output features per mma) and
// the tokens are its 8-wide N side, so a GEMV of 1..16 tokens wastes at most one n8 tile instead of
// 15 of 16 rows. A block owns tile_n output features x tile_m tokens; its warps split them
// warps_n x warps_m; each stage of the cp.async pipeline holds one 64-wide K chunk of the packed
// weights, of x, and of the chunk's scales and zero points.
#pragma once

#include "common/host_device.h"

namespace kiln::w4a16 {

inline constexpr int kChunkK = 64;            // K of one pipeline stage and of one packed chunk
inline constexpr int kTileRows = 16;          // weight rows of one packed tile (mma M)
inline constexpr int kPackedTileBytes = 512;  // 16 rows x 64 K x 4 bits: 32 lanes x 16 bytes
inline constexpr int kXRowBytes = kChunkK * 2;      // one token's 64 K of fp16 / bf16
inline constexpr int kXRowPitch = kXRowBytes + 16;  // shared row pitch: LDS.128 conflict-free
inline constexpr int kWarp = 32;
inline constexpr int kMaxSplits = 32;            // split-K partials kept in the caller's workspace
inline constexpr int kMinChunksPerSplit = 4;     // each split streams >= 256 K (128 KiB per 1k rows)
inline constexpr int kMaxMultiprocessors = 256;  // the most SMs any device has, for host planning

struct TileConfig {
  bool valid = false;
  int tile_m = 0;   // tokens per block
  int tile_n = 0;   // output features (weight rows) per block
  int warps_n = 0;  // warps along the features
  int warps_m = 0;  // warps along the tokens
  int stages = 0;   // cp.async pipeline depth
  int blocks_per_sm = 0;  // the occupancy the split planning assumes
  int threads = 0;
  int row_tiles_per_warp = 0;    // 16-row mma tiles of one warp
  int token_tiles_per_warp = 0;  // 8-token mma tiles of one warp
  int weight_stage_bytes = 0;    // tile_n / 16 packed tiles
  int x_stage_bytes = 0;         // tile_m rows of kXRowPitch
  int scale_stage_bytes = 0;     // tile_n scales, then tile_n zero points
  int stage_bytes = 0;
  int shared_bytes = 0;  // dynamic shared memory of the GEMM kernel
};

KILN_HOST_DEVICE constexpr TileConfig makeTile(int tile_m, int tile_n, int warps_n, int warps_m,
                                               int stages, int blocks_per_sm) {
  TileConfig c;
  c.tile_m = tile_m;
  c.tile_n = tile_n;
  c.warps_n = warps_n;
  c.warps_m = warps_m;
  c.stages = stages;
  c.blocks_per_sm = blocks_per_sm;
  c.threads = warps_n * warps_m * kWarp;
  c.row_tiles_per_warp = tile_n / warps_n / kTileRows;
  c.token_tiles_per_warp = tile_m / warps_m / 8;
  c.weight_stage_bytes = tile_n / kTileRows * kPackedTileBytes;
  c.x_stage_bytes = tile_m * kXRowPitch;
  c.scale_stage_bytes = 2 * tile_n * 2;
  c.stage_bytes = c.weight_stage_bytes + c.x_stage_bytes + c.scale_stage_bytes;
  c.shared_bytes = stages * c.stage_bytes;
  c.valid = c.row_tiles_per_warp >= 1 && c.token_tiles_per_warp >= 1 &&
            tile_n % (warps_n * kTileRows) == 0 && tile_m % (warps_m * 8) == 0;
  return c;
}

// The tiles kiln.toml may bake (tile_m). Shared memory stays under the 99 KiB a block may take on
// sm_86 / 87 / 89 / 120, so one source serves every SM.
//   16: the GEMV path (M <= 16): 4 warps of 16 features x 16 tokens each, 6 stages of 4.6 KiB, so
//       that >= 4 resident blocks keep ~60 KiB of weights in flight per SM
//   64: 4 warps, 2 x 2, each 64 features x 32 tokens; 4 stages of 13.7 KiB
//  128: 8 warps, 2 x 4, each 64 features x 32 tokens; 4 stages of 22.9 KiB (91.5 KiB)
KILN_HOST_DEVICE constexpr TileConfig tileConfig(int tile_m) {
  switch (tile_m) {
    case 16: return makeTile(16, 64, 4, 1, 6, 4);
    case 64: return makeTile(64, 128, 2, 2, 4, 2);
    case 128: return makeTile(128, 128, 2, 4, 4, 1);
    default: return TileConfig{};
  }
}

// The split-K reduction: one thread sums 8 consecutive outputs of one token over the splits.
inline constexpr int kReduceThreads = 256;
inline constexpr int kReduceVector = 8;
// The repack kernels: one thread per packed word, or per scale / zero point.
inline constexpr int kRepackThreads = 256;

// Bytes of kiln's packed weights for an n x k matrix (n % 16 == 0, k % 64 == 0).
KILN_HOST_DEVICE constexpr long long packedWeightBytes(long long n, long long k) {
  return n * k / 2;
}

// How many splits of K a problem runs on `multiprocessors` SMs: enough blocks for
// tile.blocks_per_sm waves' worth of every SM, at most kMaxSplits and no fewer than
// kMinChunksPerSplit chunks per split, then trimmed so that no split is empty. Non-decreasing in
// `multiprocessors`, so a workspace sized for the most SMs fits every device.
struct SplitPlan {
  int splits = 1;
  int chunks_per_split = 0;
};

KILN_HOST_DEVICE constexpr SplitPlan planSplits(long long m, long long n, long long k,
                                                const TileConfig& tile, int multiprocessors) {
  SplitPlan p;
  const long long chunks = k / kChunkK;
  const long long tiles = (n / tile.tile_n) * ((m + tile.tile_m - 1) / tile.tile_m);
  const long long target = static_cast<long long>(multiprocessors) * tile.blocks_per_sm;
  // No tile (m == 0: nothing to launch) plans one split rather than dividing by zero.
  long long splits = tiles < 1 || tiles >= target ? 1 : (target + tiles - 1) / tiles;
  const long long most = chunks / kMinChunksPerSplit;
  if (splits > most) splits = most;
  if (splits > kMaxSplits) splits = kMaxSplits;
  if (splits < 1) splits = 1;
  const long long per = (chunks + splits - 1) / splits;
  p.chunks_per_split = static_cast<int>(per);
  p.splits = static_cast<int>((chunks + per - 1) / per);
  return p;
}

}  // namespace kiln::w4a16
