// The gemv kernel body (launch.h has the work decomposition): the m <= 8 rows of x are read, the
// rest of the mma's 8 token columns are zeros.
//
// The mma trick: k's order inside a dot product is free, so a lane's fragments need not come
// from ldmatrix. Lane (group g, tid4 t) of a warp loads 16 bytes, elements 8t .. 8t + 8 of a
// 32-wide step of k, from row g and from row g + 8 of the block's 16 rows of w, and the same 16
// bytes of token g of x. Words 0-1 of those vectors are the A / B fragments of one m16n8k16 and
// words 2-3 of a second (common/sm80_mma.cuh has the layouts): the fragment's k index 2t maps to
// element 8t of the step, 2t + 8 to 8t + 2, the same on both operands. So the weights go from
// global memory straight into mma registers: no shared memory, no shuffles, and the 8 tokens cost
// the same one mma as 1.
#pragma once

#include <cstdint>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/sm80_mma.cuh"
#include "common/vec16.cuh"
#include "gemv/launch.h"
#include "gemv/params.h"

namespace kiln::gemv {

using common::Vec16;

// Weights are read exactly once per launch: the non-coherent path, no L1 allocation (the L1 keeps
// the rows of x, which every block of the SM reads).
__device__ __forceinline__ Vec16 loadWeight(const Vec16* p) {
  Vec16 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// The 16-byte vector of `step` that lane `tid4` reads from each row: k elements
// 32 step + 8 tid4 .. + 8.
__device__ __forceinline__ std::int64_t vectorOf(int step, int tid4) {
  return static_cast<std::int64_t>(step) * kVectorsPerStep + tid4;
}

// wv[u][h] = the lane's vector of step s0 + u of row (h ? g + 8 : g), zeros past k.
__device__ __forceinline__ void loadWeights(const Vec16* const (&w)[2], int s0, int tid4,
                                            std::int64_t kv, Vec16 (&wv)[kUnroll][2]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::int64_t v = vectorOf(s0 + u, tid4);
#pragma unroll
    for (int h = 0; h < 2; ++h) wv[u][h] = v < kv ? loadWeight(w[h] + v) : Vec16{0, 0, 0, 0};
  }
}

// xv[u] = the lane's vector of step s0 + u of its token's row of x (null: a token past m), zeros
// past k. x stays in L1 for every block of the SM.
__device__ __forceinline__ void loadTokens(const Vec16* x, int s0, int tid4, std::int64_t kv,
                                           Vec16 (&xv)[kUnroll]) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const std::int64_t v = vectorOf(s0 + u, tid4);
    xv[u] = x != nullptr && v < kv ? common::loadReadOnly(x + v) : Vec16{0, 0, 0, 0};
  }
}

// acc += the 16 x 8 product of one step: rows g, g + 8 of w by tokens 0..7 of x, as two mma.
template <typename T>
__device__ __forceinline__ void multiplyStep(const Vec16 (&w)[2], const Vec16& x, float (&acc)[4]) {
  const unsigned lo[4] = {w[0].x, w[1].x, w[0].y, w[1].y};
  common::mma16816<T>(acc, lo, x.x, x.y);
  const unsigned hi[4] = {w[0].z, w[1].z, w[0].w, w[1].w};
  common::mma16816<T>(acc, hi, x.z, x.w);
}

template <typename T>
__device__ void gemvBlock(const GemvParams& p) {
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int group = lane / 4;  // rows group and group + 8 of the block's 16; token group
  const int tid4 = lane % 4;
  const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock;
  const std::int64_t kv = p.k_vectors;
  const int steps = static_cast<int>((kv + kVectorsPerStep - 1) / kVectorsPerStep);
  // Rows past n (the last block's) read row n - 1 and store nothing: no divergent loads.
  const Vec16* w[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t row = row0 + group + 8 * h;
    w[h] = static_cast<const Vec16*>(p.w) + (row < p.n ? row : p.n - 1) * kv;
  }

  // Warp `warp` takes batches warp, warp + 4, ... of kUnroll steps. Its first batch of weights
  // does not depend on the kernel before (under programmatic dependent launch it is read while
  // that kernel finishes); x does, so it waits.
  constexpr int kStride = kWarps * kUnroll;
  int s0 = warp * kUnroll;
  Vec16 wv[kUnroll][2];
  loadWeights(w, s0, tid4, kv, wv);
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();

  const Vec16* x =
      group < p.m ? static_cast<const Vec16*>(p.x) + group * (p.ldx / kElementsPerVector) : nullptr;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  for (; s0 < steps; s0 += kStride) {
    Vec16 xv[kUnroll];
    loadTokens(x, s0, tid4, kv, xv);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) multiplyStep<T>(wv[u], xv[u], acc);
    if (s0 + kStride < steps) loadWeights(w, s0 + kStride, tid4, kv, wv);
  }

  // The warps' tiles summed in warp order by warp 0. acc[e] is y[token 2 tid4 + (e & 1),
  // row0 + group + 8 (e >> 1)] (the C fragment).
  __shared__ float partial[kWarps - 1][4][kWarp];
  if (warp > 0) {
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp - 1][e][lane] = acc[e];
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll
  for (int from = 0; from < kWarps - 1; ++from) {
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += partial[from][e][lane];
  }
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int token = 2 * tid4 + (e & 1);
    const std::int64_t row = row0 + group + 8 * (e >> 1);
    if (token >= p.m || row >= p.n) continue;
    float value = acc[e];
    if (p.bias != nullptr) value += common::toFloat(static_cast<const T*>(p.bias)[row]);
    const std::int64_t at = token * p.ldy + row;
    if (p.y_fp32 != 0) {
      static_cast<float*>(p.y)[at] = value;
    } else {
      static_cast<T*>(p.y)[at] = common::fromFloat<T>(value);
    }
  }
}

}  // namespace kiln::gemv
