// The gemv launch shape, computed by the same constexpr functions in the kernels (compile time:
// unrolling, __launch_bounds__) and in the runner (run time: grid, block, which entry), so the
// two never disagree.
//
// Work decomposition (README.md, "How it runs"): a block of 4 warps owns 8 consecutive rows of w
// (outputs y[:, n0 .. n0 + 8)), 2 rows a warp. A lane reads every 32nd 16-byte vector of its
// warp's two rows, kUnroll vectors of each row issued before the first is used, and multiplies
// each with the same vector of every row of x (read through L1, where the m rows of x stay);
// fp32 sums, one butterfly reduction over the warp at the end. The weight stream is the whole
// cost at m <= 8: m x k x 2 bytes of x are tiny next to n x k x 2 of w.
#pragma once

#include "common/host_device.h"

namespace kiln::gemv {

inline constexpr int kWarp = 32;
inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / kWarp;
inline constexpr int kRowsPerWarp = 2;
inline constexpr int kRowsPerBlock = kWarps * kRowsPerWarp;  // 8
inline constexpr int kElementsPerVector = 8;                 // fp16 / bf16 in 16 bytes
// 16-byte vectors of each row a lane has in flight: 2 rows x 8 x 16 B x 32 lanes = 8 KiB a warp.
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
