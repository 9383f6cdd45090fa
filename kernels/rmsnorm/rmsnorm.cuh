// Device code of the rmsnorm group: plain RMSNorm and fused residual add + RMSNorm over rows of
// a baked hidden size, 16-bit in and out, fp32 inside.
//
// Each row is held in registers from its load to its store: a thread loads kVectorsPerThread
// 16-byte vectors of x (and of residual), forms v (x, or x + residual rounded to the dtype and
// stored back), accumulates sum(v^2) in fp32, the row's threads reduce it (warp shuffles, then
// shared memory when the row spans warps), and each thread scales its own vectors by
// rsqrt(mean + eps) and the weight and stores them rounded once. Memory is touched once per byte:
// the minimum traffic, so the kernel is bound by HBM bandwidth (or by launch latency for few rows).
//
// Thread t of a row owns vectors t, t + threads_per_row, ...: a warp's access of one step is 512
// contiguous bytes, fully coalesced.
#pragma once

#include <cstdint>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/reduce.cuh"
#include "common/vec16.cuh"
#include "rmsnorm/launch.h"
#include "rmsnorm/params.h"

namespace kiln::rmsnorm {

// Eight elements of x + residual, each sum rounded once to T (the value the fused op stores).
template <typename T>
__device__ __forceinline__ common::Vec16 addRounded(const common::Vec16& a,
                                                    const common::Vec16& b) {
  float fa[8], fb[8];
  common::unpack8<T>(a, fa);
  common::unpack8<T>(b, fb);
#pragma unroll
  for (int i = 0; i < 8; ++i) fa[i] += fb[i];
  // fp32 holds the exact sum closely enough (24 >= 2 * 11 + 2 significand bits) that rounding it
  // to fp16/bf16 equals rounding the exact sum: the stored residual is the correctly rounded sum.
  return common::pack8<T>(fa);
}

template <typename T>
__device__ __forceinline__ float sumOfSquares(const common::Vec16& v) {
  float f[8];
  common::unpack8<T>(v, f);
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) s = fmaf(f[i], f[i], s);
  return s;
}

// (v * inv_rms) * w for eight elements, rounded once to T.
template <typename T>
__device__ __forceinline__ common::Vec16 scaled(const common::Vec16& v, const common::Vec16& w,
                                                float inv_rms) {
  float fv[8], fw[8];
  common::unpack8<T>(v, fv);
  common::unpack8<T>(w, fw);
#pragma unroll
  for (int i = 0; i < 8; ++i) fv[i] = (fv[i] * inv_rms) * fw[i];
  return common::pack8<T>(fv);
}

// One block's rows. kFused: residual += x (stored, rounded), then normalize the rounded sum.
// Requires 16-byte aligned pointers and rows >= 1 (the runner admits only such problems).
template <typename T, int kHidden, bool kFused>
__device__ __forceinline__ void rmsnormRows(const RmsnormParams& p) {
  // Launched as a programmatic dependent (overlap_launch), the kernel may be resident while the
  // kernel before it still runs: wait for it before any global memory access (a no-op otherwise
  // and below sm_90). Then a programmatic dependent of this kernel (gemv with overlap_launch) may
  // start: it waits for this whole grid before it reads what the grid writes, and meanwhile
  // streams its weights.
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();
  constexpr LaunchShape kShape = launchShape(kHidden, static_cast<int>(sizeof(T)));
  static_assert(kShape.valid, "hidden * sizeof(dtype) must split into whole warps of 16B vectors");
  constexpr int kVpt = kShape.vectors_per_thread;
  constexpr int kThreadsPerRow = kShape.threads_per_row;

  const int thread = static_cast<int>(threadIdx.x);
  const int row_in_block = thread / kThreadsPerRow;
  const int lane = thread % kThreadsPerRow;
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kShape.rows_per_block + row_in_block;
  // A partial last block has idle rows; their threads still take part in the reduction's barrier.
  const bool active = row < p.rows;
  const std::int64_t first = row * kShape.vectors_per_row + lane;  // this thread's first vector

  common::Vec16 v[kVpt];  // x, then (fused) x + residual rounded: the values being normalized
  common::Vec16 w[kVpt];
  float sum_sq = 0.0f;
  if (active) {
    const auto* x = static_cast<const common::Vec16*>(p.x) + first;
    const auto* weight = static_cast<const common::Vec16*>(p.weight) + lane;
#pragma unroll
    for (int k = 0; k < kVpt; ++k) v[k] = common::loadStreaming(x + k * kThreadsPerRow);
    if constexpr (kFused) {
      auto* residual = static_cast<common::Vec16*>(p.residual) + first;
      common::Vec16 r[kVpt];
#pragma unroll
      for (int k = 0; k < kVpt; ++k) r[k] = common::loadStreaming(residual + k * kThreadsPerRow);
#pragma unroll
      for (int k = 0; k < kVpt; ++k) w[k] = common::loadReadOnly(weight + k * kThreadsPerRow);
#pragma unroll
      for (int k = 0; k < kVpt; ++k) {
        v[k] = addRounded<T>(v[k], r[k]);
        common::store(residual + k * kThreadsPerRow, v[k]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < kVpt; ++k) w[k] = common::loadReadOnly(weight + k * kThreadsPerRow);
    }
#pragma unroll
    for (int k = 0; k < kVpt; ++k) sum_sq += sumOfSquares<T>(v[k]);
  }

  const float total = common::groupSum<kShape.warps_per_row, kShape.rows_per_block>(sum_sq);
  if (!active) return;
  const float inv_rms = rsqrtf(total * (1.0f / static_cast<float>(kHidden)) + p.eps);

  auto* out = static_cast<common::Vec16*>(p.out) + first;
#pragma unroll
  for (int k = 0; k < kVpt; ++k)
    common::store(out + k * kThreadsPerRow, scaled<T>(v[k], w[k], inv_rms));
}

}  // namespace kiln::rmsnorm
