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

// gdn_prefill (gdn_prefill.py) runs two kernels from the same constants:
//   - the chunk kernel: grid (ceil(max_seqlen / chunk), Hv, batch), block d_k + d_v threads (one
//   per
//     column of w and of u in the chunk's triangular solve), prefillChunkSmem bytes of dynamic
//     shared memory;
//   - the state kernel: the decode shape above (tiles_per_block 1), prefillStateSmem bytes.
// The script computes the same numbers when it traces the kernels (chunk_smem_bytes,
// state_smem_bytes, from the same constants and the same formulas): dynamic shared memory is
// recorded nowhere in the cubin, so a mismatch would show only as a kernel reading past what the
// runner gave it (the GPU numerics and compute-sanitizer runs).
constexpr unsigned prefillChunkThreads(int head_dim_k, int head_dim_v) {
  return static_cast<unsigned>(head_dim_k + head_dim_v);
}

// Normalised q and k as float32 rows padded by one float, the raw and cumulative gates and beta.
constexpr unsigned prefillChunkSmem(int chunk, int head_dim_k) {
  return static_cast<unsigned>((2 * chunk * (head_dim_k + 1) + 3 * chunk) * 4);
}

// Two [chunk, d_k] tiles of activations, the cross-warp sums of half a chunk (2 x row_split x
// chunk / 2 x tile_v float32), the chunk's U (chunk x tile_v float32) and its gc (chunk float32).
constexpr unsigned prefillStateSmem(int chunk, int head_dim_k, int tile_v, int row_split,
                                    int activation_bytes) {
  return static_cast<unsigned>(2 * chunk * head_dim_k * activation_bytes +
                               2 * row_split * (chunk / 2) * tile_v * 4 + chunk * tile_v * 4 +
                               chunk * 4);
}

// The workspace of gdn_prefill: the chunk kernel's output, token-major, each array 256-byte
// aligned: w, qd, kd [T, Hv, d_k] and u [T, Hv, d_v] in the activation dtype; attn [T, Hv, chunk]
// and gc [T, Hv] float32. Offsets in bytes from the workspace's start; `bytes` is the total.
struct PrefillWorkspace {
  std::uint64_t w = 0, u = 0, qd = 0, kd = 0, attn = 0, gc = 0, bytes = 0;
};

inline constexpr std::uint64_t kPrefillWorkspaceAlignment = 256;

constexpr PrefillWorkspace prefillWorkspace(int head_dim_k, int head_dim_v, int chunk,
                                            int activation_bytes, std::int64_t tokens,
                                            std::int64_t heads_v) {
  const auto rows = static_cast<std::uint64_t>(tokens) * static_cast<std::uint64_t>(heads_v);
  const auto align = [](std::uint64_t x) {
    return (x + kPrefillWorkspaceAlignment - 1) / kPrefillWorkspaceAlignment *
           kPrefillWorkspaceAlignment;
  };
  const std::uint64_t k_bytes = align(rows * head_dim_k * activation_bytes);
  const std::uint64_t v_bytes = align(rows * head_dim_v * activation_bytes);
  PrefillWorkspace ws;
  ws.w = 0;
  ws.u = ws.w + k_bytes;
  ws.qd = ws.u + v_bytes;
  ws.kd = ws.qd + k_bytes;
  ws.attn = ws.kd + k_bytes;
  ws.gc = ws.attn + align(rows * static_cast<std::uint64_t>(chunk) * 4);
  ws.bytes = ws.gc + align(rows * 4);
  return ws;
}

}  // namespace kiln::gdn
