// The decoderops launch shapes, computed by the same constexpr functions in the kernels (compile
// time: unrolling, __launch_bounds__) and in the runner (run time: grid and block), so the two
// never disagree.
//
// Work decomposition (README.md, "How it runs"):
//   kiln_embed, kiln_silu_mul   grid (tokens, min(chunks, 65535)); a block of 128 threads copies
//                               (or computes) one chunk of 512 16-byte vectors of one token's
//                               output row, 4 vectors a thread, every load issued before the first
//                               store; a row of more chunks than grid.y loops over them
//   kiln_argmax                 grid (rows); one block per row, 32..1024 threads (argmaxThreads),
//                               each scanning every threads-th vector, then one (value, index)
//                               reduction over the block
#pragma once

#include "common/host_device.h"

namespace kiln::decoderops {

inline constexpr int kVectorBytes = 16;
inline constexpr int kWarp = 32;

// Element-wise kernels. 128 threads x 4 vectors: 8 KiB of a 16-bit row per block (Qwen3's hidden
// 4096 in bf16 is one block per token), 64 bytes in flight per thread (silu_mul: 128, gate and
// up), 2048 threads per SM for embed (silu_mul: 1024, below). Design estimate for H100 / H200
// (NOTES.md); not measured yet.
inline constexpr int kElementwiseThreads = 128;
inline constexpr int kVectorsPerThread = 4;
inline constexpr int kChunkVectors = kElementwiseThreads * kVectorsPerThread;  // 512
// Blocks per SM that silu_mul's register bound keeps room for: 8 x 128 threads, so at most 64
// registers a thread (nvcc 13.0 took 66 for fp16 without the bound: 28 warps an SM instead of 32).
inline constexpr int kElementwiseMinBlocks = 8;

// Argmax: one block per row, up to 1024 threads so that a lone row (batch-1 decode) has as many
// loads in flight as one SM holds; narrower rows get fewer threads (4 vectors each, at least a
// warp). kArgmaxUnroll vectors are loaded before any is compared.
inline constexpr int kArgmaxMaxThreads = 1024;
inline constexpr int kArgmaxVectorsPerThread = 4;
inline constexpr int kArgmaxUnroll = 4;

// CUDA's grid limits.
inline constexpr long long kMaxGridX = 2147483647LL;
inline constexpr long long kMaxGridY = 65535LL;

// Chunks of kChunkVectors of a row of `row_vectors` vectors.
KILN_HOST_DEVICE constexpr long long chunksOf(long long row_vectors) {
  return (row_vectors + kChunkVectors - 1) / kChunkVectors;
}

// grid.y of an element-wise launch: one block per chunk, at most CUDA's grid.y limit (the kernel
// loops over the rest).
KILN_HOST_DEVICE constexpr long long gridChunks(long long row_vectors) {
  const long long chunks = chunksOf(row_vectors);
  return chunks < kMaxGridY ? chunks : kMaxGridY;
}

// Threads of an argmax block for rows of `width` elements of `element_bytes`: a warp per
// 4 x 32 vectors, rounded up to whole warps, 32..1024.
KILN_HOST_DEVICE constexpr int argmaxThreads(long long width, int element_bytes) {
  const long long vectors = (width * element_bytes + kVectorBytes - 1) / kVectorBytes;
  const long long per_warp = static_cast<long long>(kWarp) * kArgmaxVectorsPerThread;
  const long long warps = (vectors + per_warp - 1) / per_warp;
  const long long max_warps = kArgmaxMaxThreads / kWarp;
  return static_cast<int>((warps < 1 ? 1 : warps > max_warps ? max_warps : warps) * kWarp);
}

}  // namespace kiln::decoderops
