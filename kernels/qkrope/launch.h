// The qkrope launch shape, from the baked head dim and the run-time head counts: threads per head,
// heads per block, blocks per token. The kernel evaluates the per-head part at compile time
// (unrolling, the lane groups of its reduction, __launch_bounds__) and the runner the rest at run
// time (grid and block), from the same functions, so the two never disagree.
//
// Work decomposition (kernels/qkrope/README.md has the picture):
//   block  = one token's heads [chunk * rows_per_block, ...) of its q_heads + 2 * kv_heads rows
//            of qkv (grid (tokens, chunks)); all of a token's heads in one block when they fit
//            kMaxBlockThreads, so that the token's cos / sin table is computed once for all of them
//   thread = two 16-byte vectors of one head: a rotation pair (vector j of the first rotary half
//            and vector j of the second) or two pass-through vectors; head_dim / 16 threads a head
#pragma once

#include "common/host_device.h"

namespace kiln::qkrope {

inline constexpr int kVectorBytes = 16;
inline constexpr int kElementsPerVector = 8;  // fp16 / bf16
inline constexpr int kVectorsPerThread = 2;
inline constexpr int kWarp = 32;
// Tuning (H100/H200 design estimate, NOTES.md): 512 threads hold the 48 heads of a Qwen3-8B/32B
// token (32 q + 8 k + 8 v) at head dim 128 (384 threads) in one block, and cap registers at 128.
inline constexpr int kMaxBlockThreads = 512;
// Page sizes a run may use, as decodeattn and fmha read the cache: powers of two in 16..256.
inline constexpr int kMinPageSize = 16;
inline constexpr int kMaxPageSize = 256;
// The rotary dim is a multiple of this: each thread of the rotary part holds one vector of each
// half, so a half is a whole number of vectors.
inline constexpr int kRotaryGranule = kVectorsPerThread * kElementsPerVector;  // 16

// Threads of one head: two vectors each. 4 / 8 / 16 for head dims 64 / 128 / 256; a power of two
// that divides the warp, so that a head's lanes reduce with shuffles inside their warp.
KILN_HOST_DEVICE constexpr int threadsPerHead(int head_dim) {
  return head_dim / (kVectorsPerThread * kElementsPerVector);
}

KILN_HOST_DEVICE constexpr bool validHeadDim(int head_dim) {
  const int t = threadsPerHead(head_dim);
  return head_dim > 0 && head_dim % kRotaryGranule == 0 && t >= 1 && t <= kWarp &&
         (t & (t - 1)) == 0;
}

struct LaunchShape {
  bool valid = false;
  int threads_per_head = 0;
  int rows_per_block = 0;     // heads of one token per block
  int chunks = 0;             // blocks per token (grid.y)
  int threads_per_block = 0;  // rows_per_block * threads_per_head rounded up to whole warps
};

// The shape for `heads` = q_heads + 2 * kv_heads rows of head_dim elements per token: as few blocks
// per token as fit kMaxBlockThreads, the heads spread evenly over them.
KILN_HOST_DEVICE constexpr LaunchShape launchShape(int head_dim, int heads) {
  LaunchShape s;
  if (!validHeadDim(head_dim) || heads < 1) return s;
  s.threads_per_head = threadsPerHead(head_dim);
  const int max_rows = kMaxBlockThreads / s.threads_per_head;
  s.chunks = (heads + max_rows - 1) / max_rows;
  s.rows_per_block = (heads + s.chunks - 1) / s.chunks;
  s.threads_per_block = (s.rows_per_block * s.threads_per_head + kWarp - 1) / kWarp * kWarp;
  s.valid = true;
  return s;
}

}  // namespace kiln::qkrope
