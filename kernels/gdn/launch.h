// The gdn launch shape (every family) from the baked constants: grid (d_v / (tile_v x
// tiles_per_block), Hv, batch), block (tile_v, row_split, tiles_per_block): lane j of warp w of
// tile z owns rows w * d_k / row_split .. of state column (x * tiles_per_block + z) * tile_v + j;
// no dynamic shared memory. gdn_decode.py, gdn_decode_mtp.py and gdn_mtp_commit.py (which copies
// each head's d_k x d_v floats in grid_x contiguous chunks, one per block) launch the same
// shape when they trace the kernels (the block size is baked into the cubin as .reqntid), from the
// same kiln.toml constants, so neither side types a number of its own.
#pragma once

#include <cstdint>

namespace kiln::gdn {

struct LaunchShape {
  bool valid = false;
  unsigned grid_x = 0;   // d_v / (tile_v * tiles_per_block) blocks of column tiles
  unsigned grid_y = 0;   // value heads
  unsigned grid_z = 0;   // sequences
  unsigned block_x = 0;  // tile_v: the lanes of a warp, one state column each
  unsigned block_y = 0;  // row_split: warps splitting the d_k rows of those columns
  unsigned block_z = 0;  // tiles_per_block: column tiles of one value head in the block
};

inline constexpr std::int64_t kMaxGridYZ = 65535;  // CUDA's limit for grid.y and grid.z
inline constexpr int kMaxBlockThreads = 1024;      // CUDA's limit for threads per block

constexpr LaunchShape launchShape(int head_dim_k, int head_dim_v, int tile_v, int row_split,
                                  int tiles_per_block, std::int64_t heads_v, std::int64_t batch) {
  LaunchShape s;
  if (tile_v <= 0 || row_split <= 0 || tiles_per_block <= 0 || head_dim_k % row_split != 0 ||
      head_dim_v % (tile_v * tiles_per_block) != 0 ||
      tile_v * row_split * tiles_per_block > kMaxBlockThreads || heads_v <= 0 || batch <= 0 ||
      heads_v > kMaxGridYZ || batch > kMaxGridYZ) {
    return s;
  }
  s.grid_x = static_cast<unsigned>(head_dim_v / (tile_v * tiles_per_block));
  s.grid_y = static_cast<unsigned>(heads_v);
  s.grid_z = static_cast<unsigned>(batch);
  s.block_x = static_cast<unsigned>(tile_v);
  s.block_y = static_cast<unsigned>(row_split);
  s.block_z = static_cast<unsigned>(tiles_per_block);
  s.valid = true;
  return s;
}

}  // namespace kiln::gdn
