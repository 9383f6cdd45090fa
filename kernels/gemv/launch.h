// The gemv launch shape, computed by the same constexpr functions in the kernels (compile time:
// unrolling, __launch_bounds__) and in the runner (run time: grid, block, which entry), so the
// two never disagree.
//
// Work decomposition (README.md, "How it runs"): the product is one mma.sync m16n8k16 per 16 rows
// of w x 16 of k, w as the A operand (16 output features) and x as B (its up to 8 tokens as the
// 8 columns), so the tensor cores do the arithmetic of every token at no cost to the weight
// stream. A block of 8 warps owns 16 consecutive rows of w (outputs y[:, n0 .. n0 + 16)) and
// splits k between its warps in batches of kUnroll steps of 32; a step is one 16-byte vector of
// each of the 16 rows per group of 4 lanes (1 KiB a warp), fed to two mma. The warps' fp32 tiles
// are added through shared memory at the end. 8 warps rather than 4 put a small matrix's whole
// stream in flight at once (the Qwen3 o projection, 2048 x 2048: 128 blocks, one batch a warp),
// which measured 5-17% faster on the small projections and the same on the large (NOTES.md). The
// weight stream is the whole cost at m <= 8: m x k x 2 bytes of x are tiny next to n x k x 2 of w.
#pragma once

#include "common/host_device.h"

namespace kiln::gemv {

inline constexpr int kWarp = 32;
inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / kWarp;
inline constexpr int kRowsPerBlock = 16;      // the mma's M: rows of w, output features
inline constexpr int kElementsPerVector = 8;  // fp16 / bf16 in 16 bytes
inline constexpr int kVectorsPerStep = 4;     // a step: 32 elements of k, 4 lanes x 16 bytes a row
// Steps of a warp's batch, all issued before the first is used: 8 x 1 KiB = 8 KiB in flight.
inline constexpr int kUnroll = 8;

// Tokens of one launch, at most: the mma's N. Every m up to it runs the same code (tokens past m
// are zeros in the B operand and are not stored), so there is one entry kernel.
inline constexpr int kMaxTokens = 8;

// Blocks of a launch over n rows of w.
KILN_HOST_DEVICE constexpr long long blocksOf(long long n) {
  return (n + kRowsPerBlock - 1) / kRowsPerBlock;
}

}  // namespace kiln::gemv
