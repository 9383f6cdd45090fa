// The gdn decode launch shape from the baked constants: grid (d_v / tile_v, Hv, batch), block
// tile_v threads, no dynamic shared memory. gdn_decode.py launches the same shape when it traces
// the kernel (the block size is baked into the cubin as .reqntid), from the same kiln.toml
// constants, so neither side types a number of its own.
#pragma once

#include <cstdint>

namespace kiln::gdn {

struct LaunchShape {
  bool valid = false;
  unsigned grid_x = 0;  // d_v / tile_v column tiles
  unsigned grid_y = 0;  // value heads
  unsigned grid_z = 0;  // sequences
  unsigned block_x = 0;  // tile_v: one thread per state column
};

inline constexpr std::int64_t kMaxGridYZ = 65535;  // CUDA's limit for grid.y and grid.z

constexpr LaunchShape launchShape(int head_dim_v, int tile_v, std::int64_t heads_v, std::int64_t batch) {
  LaunchShape s;
  if (tile_v <= 0 || head_dim_v % tile_v != 0 || heads_v <= 0 || batch <= 0 || heads_v > kMaxGridYZ ||
      batch > kMaxGridYZ) {
    return s;
  }
  s.grid_x = static_cast<unsigned>(head_dim_v / tile_v);
  s.grid_y = static_cast<unsigned>(heads_v);
  s.grid_z = static_cast<unsigned>(batch);
  s.block_x = static_cast<unsigned>(tile_v);
  s.valid = true;
  return s;
}

}  // namespace kiln::gdn
