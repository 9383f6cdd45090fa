// The gemv kernel body (launch.h has the work decomposition). One instantiation per token bucket
// M (1, 2, 4, 8); the runtime m <= M rows of x are read, the rest count as absent.
#pragma once

#include <cstdint>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/vec16.cuh"
#include "gemv/launch.h"
#include "gemv/params.h"

namespace kiln::gemv {

// Weights are read exactly once per launch: the non-coherent path, no L1 allocation (the L1 keeps
// the rows of x, which every warp of the SM reads).
__device__ __forceinline__ common::Vec16 loadWeight(const common::Vec16* p) {
  common::Vec16 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// wv[u][r] = vector v0 + 32 u of row r (those below kv): one lane's batch of the weight stream.
__device__ __forceinline__ void loadBatch(const common::Vec16* const (&w)[kRowsPerWarp],
                                          std::int64_t v0, std::int64_t kv,
                                          common::Vec16 (&wv)[kUnroll][kRowsPerWarp]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::int64_t v = v0 + static_cast<std::int64_t>(u) * kWarp;
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      if (v < kv) wv[u][r] = loadWeight(w[r] + v);
  }
}

// acc[m][r] += dot(x[m, 8 v .. 8 v + 8), w_r[8 v .. 8 v + 8)) over the M rows of x (rows >= m
// skipped: the branch is uniform over the grid).
template <typename T, int M>
__device__ __forceinline__ void accumulate(const GemvParams& p,
                                           const common::Vec16 (&w)[kRowsPerWarp], std::int64_t v,
                                           float (&acc)[M][kRowsPerWarp]) {
  float wf[kRowsPerWarp][8];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) common::unpack8<T>(w[r], wf[r]);
  const auto* x = static_cast<const common::Vec16*>(p.x);
  const std::int64_t ldx_vectors = p.ldx / kElementsPerVector;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    if (M > 1 && m >= p.m) break;
    float xf[8];
    common::unpack8<T>(common::loadReadOnly(x + m * ldx_vectors + v), xf);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(xf[e], wf[r][e], acc[m][r]);
    }
  }
}

template <typename T, int M>
__device__ void gemvBlock(const GemvParams& p) {
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const std::int64_t row0 = (static_cast<std::int64_t>(blockIdx.x) * kWarps + warp) * kRowsPerWarp;
  const std::int64_t kv = p.k_vectors;
  // Rows past n (the last block's) read row n - 1 and store nothing: no divergent loads.
  const common::Vec16* w[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t row = row0 + r < p.n ? row0 + r : p.n - 1;
    w[r] = static_cast<const common::Vec16*>(p.w) + row * kv;
  }

  float acc[M][kRowsPerWarp];
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) acc[m][r] = 0.f;
  }

  // The first batch of weights does not depend on the kernel before (under programmatic
  // dependent launch it is read while that kernel finishes); x does, so it waits.
  common::Vec16 wv[kUnroll][kRowsPerWarp];
  std::int64_t v0 = lane;
  loadBatch(w, v0, kv, wv);
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();

  for (;;) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t v = v0 + static_cast<std::int64_t>(u) * kWarp;
      if (v < kv) accumulate<T, M>(p, wv[u], v, acc);
    }
    v0 += static_cast<std::int64_t>(kUnroll) * kWarp;
    if (v0 >= kv) break;
    loadBatch(w, v0, kv, wv);
  }

  // Butterfly over the warp: every lane ends with every sum; lane m * kRowsPerWarp + r stores
  // y[m, row0 + r].
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
      for (int offset = kWarp / 2; offset > 0; offset /= 2)
        acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], offset);
    }
  }
  static_assert(kLargestBucket * kRowsPerWarp <= kWarp, "one lane per output of the warp");
#pragma unroll
  for (int m = 0; m < M; ++m) {
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const std::int64_t row = row0 + r;
      if (lane != m * kRowsPerWarp + r || m >= p.m || row >= p.n) continue;
      float value = acc[m][r];
      if (p.bias != nullptr) value += common::toFloat(static_cast<const T*>(p.bias)[row]);
      const std::int64_t at = m * p.ldy + row;
      if (p.y_fp32 != 0) {
        static_cast<float*>(p.y)[at] = value;
      } else {
        static_cast<T*>(p.y)[at] = common::fromFloat<T>(value);
      }
    }
  }
}

}  // namespace kiln::gemv
