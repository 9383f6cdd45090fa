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

inline constexpr int kChunkK = 64;              // K of one pipeline stage and of one packed chunk
inline constexpr int kTileRows = 16;            // weight rows of one packed tile (mma M)
inline constexpr int kPackedTileBytes = 512;    // 16 rows x 64 K x 4 bits: 32 lanes x 16 bytes
inline constexpr int kXRowBytes = kChunkK * 2;  // one token's 64 K of fp16 / bf16
inline constexpr int kXRowPitch = kXRowBytes + 16;  // shared row pitch: LDS.128 conflict-free
inline constexpr int kWarp = 32;
inline constexpr int kMaxSplits = 32;         // split-K partials kept in the caller's workspace
inline constexpr int kMinChunksPerSplit = 4;  // each split streams >= 256 K (128 KiB per 1k rows)
inline constexpr int kMaxMultiprocessors = 256;  // the most SMs any device has, for host planning

struct TileConfig {
  bool valid = false;
  bool gemv = false;  // the GEMV kernel (a ring per warp), else the tiled one (a block pipeline)
  int tile_m = 0;     // tokens per block
  int tile_n = 0;     // output features (weight rows) per block
  int warps_n = 0;    // warps along the features
  int warps_m = 0;    // warps along the tokens
  int stages = 0;     // cp.async pipeline depth (tiled); chunks each warp loads ahead (GEMV)
  int blocks_per_sm = 0;  // the occupancy the split planning assumes
  int threads = 0;
  int row_tiles_per_warp = 0;    // 16-row mma tiles of one warp
  int token_tiles_per_warp = 0;  // 8-token mma tiles of one warp
  int weight_stage_bytes = 0;    // tile_n / 16 packed tiles
  int x_stage_bytes = 0;         // tile_m rows of kXRowPitch
  int scale_stage_bytes = 0;     // tile_n scales, then tile_n zero points
  int stage_bytes = 0;
  int warp_slot_bytes = 0;  // GEMV: one chunk of one warp's ring (weights, scale, zero words)
  int shared_bytes = 0;     // dynamic shared memory of kiln_w4a16_gemm
};

KILN_HOST_DEVICE constexpr TileConfig makeTile(bool gemv, int tile_m, int tile_n, int warps_n,
                                               int warps_m, int stages, int blocks_per_sm) {
  TileConfig c;
  c.gemv = gemv;
  c.tile_m = tile_m;
  c.tile_n = tile_n;
  c.warps_n = warps_n;
  c.warps_m = warps_m;
  c.stages = stages;
  c.blocks_per_sm = blocks_per_sm;
  c.threads = warps_n * warps_m * kWarp;
  c.row_tiles_per_warp = tile_n / warps_n / kTileRows;
  c.token_tiles_per_warp = tile_m / warps_m / 8;
  if (gemv) {
    c.warp_slot_bytes = c.row_tiles_per_warp * kWarp * (16 + 4 + 4);
    c.shared_bytes = warps_n * warps_m * stages * c.warp_slot_bytes;
  } else {
    c.weight_stage_bytes = tile_n / kTileRows * kPackedTileBytes;
    c.x_stage_bytes = tile_m * kXRowPitch;
    c.scale_stage_bytes = 2 * tile_n * 2;
    c.stage_bytes = c.weight_stage_bytes + c.x_stage_bytes + c.scale_stage_bytes;
    c.shared_bytes = stages * c.stage_bytes;
  }
  c.valid = c.row_tiles_per_warp >= 1 && c.token_tiles_per_warp >= 1 &&
            tile_n % (warps_n * kTileRows) == 0 && tile_m % (warps_m * 8) == 0;
  return c;
}

// The tiles kiln.toml may bake (tile_m). Every warp owns 2 row tiles (32 features), so each
// dequantized weight fragment feeds all of the warp's token tiles; every block 128 features.
//    8, 16: the GEMV kernel (M <= 16): 4 warps, 1 or 2 token tiles each, each warp streaming its
//           rows through a ring in shared memory, with their scales and zero points: tile 8 4
//           chunks deep (24 KiB per block, 6 blocks per SM: 24 warps), tile 16 8 deep (48 KiB, 4
//           blocks: its registers allow no more); 96-128 KiB of weights in flight per SM on sm_90
//           (SMs with 100 KiB of shared memory, sm_86 / 87 / 89 / 120, hold fewer blocks)
//   64: the tiled kernel, 4 warps along the features, each 32 features x 64 tokens (8 token tiles
//       per dequantized fragment); 4 stages of 13.5 KiB
//  128: the same, 8 warps, 4 x 2; 4 stages of 22.5 KiB (90 KiB: under the 99 KiB a block may take
//       on sm_86 / 87 / 89 / 120, so one source serves every SM)
KILN_HOST_DEVICE constexpr TileConfig tileConfig(int tile_m) {
  switch (tile_m) {
    case 8:
      return makeTile(true, 8, 128, 4, 1, 4, 6);
    case 16:
      return makeTile(true, 16, 128, 4, 1, 8, 4);
    case 64:
      return makeTile(false, 64, 128, 4, 1, 4, 2);
    case 128:
      return makeTile(false, 128, 128, 4, 2, 4, 1);
    default:
      return TileConfig{};
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

// How many splits of K a problem runs on `multiprocessors` SMs: as many as fit the blocks of every
// split into one wave of tile.blocks_per_sm blocks per SM (a second, partial wave would cost a
// whole block's time for a fraction of the work), at least 1, at most kMaxSplits and no fewer than
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
  const long long slots = static_cast<long long>(multiprocessors) * tile.blocks_per_sm;
  // No tile (m == 0: nothing to launch) plans one split.
  long long splits = tiles < 1 ? 1 : slots / tiles;
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
