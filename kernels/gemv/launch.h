// The gemv launch shape, computed by the same constexpr functions in the kernels (compile time:
// unrolling, __launch_bounds__) and in the runner (run time: grid, block, which entry), so the
// two never disagree.
//
// Work decomposition (README.md, "How it runs"): the product is one mma.sync m16n8k16 per 16 rows
// of w x 16 of k, w as the A operand (16 output features) and x as B (its up to 8 tokens as the
// 8 columns), so the tensor cores do the arithmetic of every token at no cost to the weight
// stream. A block of 4 warps owns 16 consecutive rows of w (outputs y[:, n0 .. n0 + 16)) and
// splits k between its warps in batches of kUnroll steps of 32; a step is one 16-byte vector of
// each of the 16 rows per group of 4 lanes (1 KiB a warp), fed to two mma. The warps' fp32 tiles
// are added through shared memory at the end. The weight stream is the whole cost at m <= 8:
// m x k x 2 bytes of x are tiny next to n x k x 2 of w.
#pragma once

#include "common/host_device.h"

namespace kiln::gemv {

inline constexpr int kWarp = 32;
inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / kWarp;
inline constexpr int kRowsPerBlock = 16;     // the mma's M: rows of w, output features
inline constexpr int kElementsPerVector = 8;  // fp16 / bf16 in 16 bytes
inline constexpr int kVectorsPerStep = 4;     // a step: 32 elements of k, 4 lanes x 16 bytes a row
// Steps of a warp's batch, all issued before the first is used: 8 x 1 KiB = 8 KiB in flight.
inline constexpr int kUnroll = 8;

// The token buckets, one entry kernel each (kiln_gemv_m1 ... kiln_gemv_m8): an m is served by the
// smallest bucket >= m (3 by m4, rows past m neither read nor written).
inline constexpr int kBuckets[] = {1, 2, 4, 8};
inline constexpr int kNumBuckets = 4;
inline constexpr int kLargestBucket = kBuckets[kNumBuckets - 1];  // the runner's kMaxM

// Index into kBuckets of the entry that serves m (1 <= m <= kLargestBucket).
KILN_HOST_DEVICE constexpr int bucketIndex(int m) {
  return m <= 1 ? 0 : m <= 2 ? 1 : m <= 4 ? 2 : 3;
}

// Blocks of a launch over n rows of w.
KILN_HOST_DEVICE constexpr long long blocksOf(long long n) {
  return (n + kRowsPerBlock - 1) / kRowsPerBlock;
}

}  // namespace kiln::gemv
