// Device code of the decoderops group: three memory-bound kernels a decoder runs between its GEMMs
// and attention. T is the variant's element type (__half, __nv_bfloat16 or float); a "vector" is
// 16 bytes (8 or 4 elements), the widest access one thread issues (kernels/common/vec16.cuh).
//
//   embedBlock    copies one chunk of table[ids[t]] to out[t] (a zero row for an id outside
//                 [0, rows)): read-only loads of the table (rows repeat across tokens), plain
//                 stores
//   siluMulBlock  out[t, i] = silu(gate[t, i]) * up[t, i] in fp32, rounded once; streaming loads
//   argmaxBlock   out[r] = the first index of the maximum of x[r, :] (a NaN is the maximum, the
//                 first NaN wins): each thread scans its vectors in increasing index order,
//                 comparing one NaN-propagating maximum per vector with its best so far and
//                 looking inside a vector only when that maximum is a NaN or beats it; then one
//                 (value, index) reduction over the block
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/vec16.cuh"
#include "decoderops/launch.h"
#include "decoderops/params.h"

namespace kiln::decoderops {

template <typename T>
inline constexpr bool kIsElement =
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, float>;

// Elements of T per 16-byte vector.
template <typename T>
inline constexpr int kElems = kVectorBytes / static_cast<int>(sizeof(T));

// "No index yet": larger than any index of a row (width <= 2^31 - 1), paired with -inf.
inline constexpr int kNoIndex = 2147483647;

// ---- embed ---------------------------------------------------------------------------------

// One block: token blockIdx.x, chunks blockIdx.y, blockIdx.y + gridDim.y, ... of its row. Needs
// 16-byte aligned table and out and a block of kElementwiseThreads threads (the runner's launch).
__device__ __forceinline__ void embedBlock(const EmbedParams& p) {
  // Launched as a programmatic dependent (overlap_launch), the kernel may be resident while the
  // kernel before it still runs: wait for it before any global memory access (a no-op otherwise
  // and below sm_90). Then let a programmatic dependent of this kernel start: it waits for this
  // whole grid before it touches what the grid writes.
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();
  const std::int64_t token = blockIdx.x;
  const std::int32_t id = __ldg(p.ids + token);
  const bool valid = id >= 0 && static_cast<std::int64_t>(id) < p.rows;
  const auto* src = static_cast<const common::Vec16*>(p.table) +
                    (valid ? static_cast<std::int64_t>(id) : 0) * p.row_vectors;
  auto* dst = static_cast<common::Vec16*>(p.out) + token * p.row_vectors;
  for (int chunk = static_cast<int>(blockIdx.y); chunk < p.chunks;
       chunk += static_cast<int>(gridDim.y)) {
    const int first = chunk * kChunkVectors + static_cast<int>(threadIdx.x);
    common::Vec16 v[kVectorsPerThread];
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int j = first + k * kElementwiseThreads;
      v[k] = make_uint4(0u, 0u, 0u, 0u);
      if (valid && j < p.row_vectors) v[k] = common::loadReadOnly(src + j);
    }
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int j = first + k * kElementwiseThreads;
      if (j < p.row_vectors) common::store(dst + j, v[k]);
    }
  }
}

// ---- silu_mul ------------------------------------------------------------------------------

// silu(g) * u as torch's F.silu writes silu in fp32 (g / (1 + exp(-g)), precise expf and IEEE
// division: no fast-math), then the product; one rounding to T after this.
__device__ __forceinline__ float siluMul(float g, float u) {
  return (g / (1.0f + expf(-g))) * u;
}

template <typename T>
__device__ __forceinline__ common::Vec16 siluMulVector(const common::Vec16& g,
                                                       const common::Vec16& u) {
  if constexpr (std::is_same_v<T, float>) {
    return make_uint4(__float_as_uint(siluMul(__uint_as_float(g.x), __uint_as_float(u.x))),
                      __float_as_uint(siluMul(__uint_as_float(g.y), __uint_as_float(u.y))),
                      __float_as_uint(siluMul(__uint_as_float(g.z), __uint_as_float(u.z))),
                      __float_as_uint(siluMul(__uint_as_float(g.w), __uint_as_float(u.w))));
  } else {
    float fg[8], fu[8], y[8];
    common::unpack8<T>(g, fg);
    common::unpack8<T>(u, fu);
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] = siluMul(fg[e], fu[e]);
    return common::pack8<T>(y);
  }
}

// One block: token blockIdx.x, chunks blockIdx.y, ... of its output row. Needs 16-byte aligned in
// and out and a block of kElementwiseThreads threads.
template <typename T>
__device__ __forceinline__ void siluMulBlock(const SiluMulParams& p) {
  static_assert(kIsElement<T>, "silu_mul: fp16, bf16 or fp32");
  // Launched as a programmatic dependent (overlap_launch), the kernel may be resident while the
  // kernel before it still runs: wait for it before any global memory access (a no-op otherwise
  // and below sm_90). Then a programmatic dependent of this kernel (gemv with overlap_launch) may
  // start: it waits for this whole grid before it reads what the grid writes, and meanwhile
  // streams its weights.
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();
  const std::int64_t token = blockIdx.x;
  const auto* gate = static_cast<const common::Vec16*>(p.in) + token * 2 * p.row_vectors;
  const common::Vec16* up = gate + p.row_vectors;
  auto* dst = static_cast<common::Vec16*>(p.out) + token * p.row_vectors;
  for (int chunk = static_cast<int>(blockIdx.y); chunk < p.chunks;
       chunk += static_cast<int>(gridDim.y)) {
    const int first = chunk * kChunkVectors + static_cast<int>(threadIdx.x);
    common::Vec16 g[kVectorsPerThread], u[kVectorsPerThread];
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int j = first + k * kElementwiseThreads;
      if (j < p.row_vectors) {
        g[k] = common::loadStreaming(gate + j);
        u[k] = common::loadStreaming(up + j);
      }
    }
#pragma unroll
    for (int k = 0; k < kVectorsPerThread; ++k) {
      const int j = first + k * kElementwiseThreads;
      if (j < p.row_vectors) common::store(dst + j, siluMulVector<T>(g[k], u[k]));
    }
  }
}

// ---- argmax --------------------------------------------------------------------------------

// Whether (a, ia) comes before (b, ib) in argmax's order: a NaN before every number, two NaNs by
// index; numbers by value (larger first; -0 == +0), equal values by index. The first element of
// this order is torch.argmax's answer. (-inf, kNoIndex), a thread that saw nothing, comes after
// every element.
__device__ __forceinline__ bool better(float a, int ia, float b, int ib) {
  const bool a_nan = isnan(a), b_nan = isnan(b);
  if (a_nan || b_nan) return a_nan && (!b_nan || ia < ib);
  return a > b || (a == b && ia < ib);
}

// max.NaN: the larger of a and b, or NaN when either is NaN (PTX ISA 7.0, sm_80).
__device__ __forceinline__ float maxNaN(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// The largest element of a vector, NaN when any element is NaN.
template <typename T>
__device__ __forceinline__ float vectorMax(const common::Vec16& v) {
  if constexpr (std::is_same_v<T, float>) {
    return maxNaN(maxNaN(__uint_as_float(v.x), __uint_as_float(v.y)),
                  maxNaN(__uint_as_float(v.z), __uint_as_float(v.w)));
  } else {
    using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
    const T2 a = __hmax2_nan(reinterpret_cast<const T2&>(v.x), reinterpret_cast<const T2&>(v.y));
    const T2 b = __hmax2_nan(reinterpret_cast<const T2&>(v.z), reinterpret_cast<const T2&>(v.w));
    const T2 m = __hmax2_nan(a, b);
    const T m1 = __hmax_nan(m.x, m.y);
    if constexpr (std::is_same_v<T, __half>) {
      return __half2float(m1);
    } else {
      return __bfloat162float(m1);
    }
  }
}

// Element i of a row of T, as a float (exact).
template <typename T>
__device__ __forceinline__ float loadElement(const T* row, std::int64_t i) {
  if constexpr (std::is_same_v<T, float>) {
    return __ldcs(row + i);
  } else {
    const unsigned short bits = __ldcs(reinterpret_cast<const unsigned short*>(row) + i);
    if constexpr (std::is_same_v<T, __half>) {
      return __half2float(__ushort_as_half(bits));
    } else {
      return __uint_as_float(static_cast<unsigned>(bits) << 16);
    }
  }
}

// A thread's best (value, index) so far.
struct Best {
  float value = -__int_as_float(0x7f800000);  // -inf
  int index = kNoIndex;

  __device__ __forceinline__ void consider(float v, int i) {
    if (better(v, i, value, index)) {
      value = v;
      index = i;
    }
  }
};

// Elements first .. first + kElems - 1 of a vector, in index order. The scan looks inside only
// when the vector's NaN-propagating maximum is NaN, beats the best, or the thread has no best yet;
// otherwise no element of it can come first (each is <= the best and has a larger index).
template <typename T>
__device__ __forceinline__ void considerVector(const common::Vec16& v, int first, Best& best) {
  const float m = vectorMax<T>(v);
  if (!(isnan(m) || m > best.value || best.index == kNoIndex)) return;
  if constexpr (std::is_same_v<T, float>) {
    best.consider(__uint_as_float(v.x), first);
    best.consider(__uint_as_float(v.y), first + 1);
    best.consider(__uint_as_float(v.z), first + 2);
    best.consider(__uint_as_float(v.w), first + 3);
  } else {
    float f[8];
    common::unpack8<T>(v, f);
#pragma unroll
    for (int e = 0; e < 8; ++e) best.consider(f[e], first + e);
  }
}

// One block: row blockIdx.x of x, any block size that is a multiple of 32 up to
// kArgmaxMaxThreads. The row's first elements up to a 16-byte boundary (head), its 16-byte vectors
// and the elements after the last whole vector (tail) are taken in that order, so each thread sees
// its indices in increasing order.
template <typename T>
__device__ __forceinline__ void argmaxBlock(const ArgmaxParams& p) {
  static_assert(kIsElement<T>, "argmax: fp16, bf16 or fp32");
  constexpr int kE = kElems<T>;
  // As embedBlock: wait for the kernel before (overlap_launch), then release this one's dependents.
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();
  const int thread = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int width = p.width;
  const T* row = static_cast<const T*>(p.x) + static_cast<std::int64_t>(blockIdx.x) * width;

  const int misaligned = static_cast<int>(reinterpret_cast<std::uintptr_t>(row) % kVectorBytes);
  int head = misaligned == 0 ? 0 : (kVectorBytes - misaligned) / static_cast<int>(sizeof(T));
  head = head < width ? head : width;
  const int vectors = (width - head) / kE;
  const int tail = head + vectors * kE;
  const auto* body = reinterpret_cast<const common::Vec16*>(row + head);

  Best best;
  if (thread < head) best.consider(loadElement(row, thread), thread);
  for (int v0 = thread; v0 < vectors; v0 += threads * kArgmaxUnroll) {
    common::Vec16 buf[kArgmaxUnroll];
#pragma unroll
    for (int k = 0; k < kArgmaxUnroll; ++k) {
      const int v = v0 + k * threads;
      if (v < vectors) buf[k] = common::loadStreaming(body + v);
    }
#pragma unroll
    for (int k = 0; k < kArgmaxUnroll; ++k) {
      const int v = v0 + k * threads;
      if (v < vectors) considerVector<T>(buf[k], head + v * kE, best);
    }
  }
  if (tail + thread < width) best.consider(loadElement(row, tail + thread), tail + thread);

    // The block's first element: a butterfly over each warp (every lane ends with its warp's),
    // then over the warps' results.
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, best.value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, best.index, offset);
    best.consider(v, i);
  }
  __shared__ float warp_value[kArgmaxMaxThreads / kWarp];
  __shared__ int warp_index[kArgmaxMaxThreads / kWarp];
  const int warp = thread / kWarp, lane = thread % kWarp;
  if (lane == 0) {
    warp_value[warp] = best.value;
    warp_index[warp] = best.index;
  }
  __syncthreads();
  if (warp != 0) return;
  const int warps = threads / kWarp;
  Best block;
  if (lane < warps) {
    block.value = warp_value[lane];
    block.index = warp_index[lane];
  }
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(0xffffffffu, block.value, offset);
    const int i = __shfl_xor_sync(0xffffffffu, block.index, offset);
    block.consider(v, i);
  }
  if (lane == 0) p.out[blockIdx.x] = block.index;
}

}  // namespace kiln::decoderops
