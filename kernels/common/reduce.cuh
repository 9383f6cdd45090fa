// Sum reductions across a warp and across groups of warps, the reduction step of every
// normalization kernel. Results are bit-identical on every thread of a group: the butterfly
// (xor) shuffle adds the same two operands on both partner lanes at each step, and every thread
// adds the per-warp partials in the same order.
#pragma once

#include <cuda_runtime.h>

namespace kiln::common {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// Sum of `v` over the 32 lanes of the warp; every lane gets the total. All lanes must call it.
__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullWarpMask, v, offset);
  }
  return v;
}

// Sum of `v` over each group of kWarpsPerGroup consecutive warps of the block (kGroups groups,
// so the block has kGroups * kWarpsPerGroup warps); every thread gets its own group's total.
// Every thread of the block must call it (it has a __syncthreads when a group spans warps).
// It owns a static shared array: call it at most once per kernel, or __syncthreads() between
// two calls, since a second call's writes would race with the first call's reads.
template <int kWarpsPerGroup, int kGroups>
__device__ __forceinline__ float groupSum(float v) {
  static_assert(kWarpsPerGroup >= 1 && kWarpsPerGroup <= 32, "groupSum: 1..32 warps per group");
  static_assert(kGroups >= 1 && kGroups * kWarpsPerGroup <= 32, "groupSum: at most 32 warps");
  v = warpSum(v);
  if constexpr (kWarpsPerGroup == 1) {
    return v;
  } else {
    __shared__ float partial[kGroups * kWarpsPerGroup];
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    if (static_cast<int>(threadIdx.x) % kWarpSize == 0) partial[warp] = v;
    __syncthreads();
    const int first = (warp / kWarpsPerGroup) * kWarpsPerGroup;
    float total = 0.0f;
#pragma unroll
    for (int i = 0; i < kWarpsPerGroup; ++i) total += partial[first + i];
    return total;
  }
}

}  // namespace kiln::common
