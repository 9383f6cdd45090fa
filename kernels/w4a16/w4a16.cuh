// The w4a16 kernels (launch.h has the shapes, w4a16_layout.h the packed layout):
//
//   gemm           one block: tile_n output features x tile_m tokens over one split of K. Each
//                  64-wide K chunk of packed weights, x, scales and zero points is staged through a
//                  cp.async pipeline; each warp dequantizes its weight fragments in registers
//                  (one LDS.128 feeds four k-steps) and runs mma.sync with the weights as A.
//   reduce         the split-K partials summed in a fixed order (+ bias), rounded once
//   repack_*       a GPTQ or AWQ checkpoint -> kiln's packed weights, pair-ordered scales and zeros
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/sm80_mma.cuh"
#include "w4a16/launch.h"
#include "w4a16/params.h"
#include "w4a16/w4a16_layout.h"

namespace kiln::w4a16 {

// (a & b) | c in one instruction.
__device__ __forceinline__ unsigned andOr(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

template <typename T>
using Pair = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

template <typename T>
__device__ __forceinline__ Pair<T> asPair(unsigned word) {
  return *reinterpret_cast<const Pair<T>*>(&word);
}
template <typename T>
__device__ __forceinline__ unsigned asWord(Pair<T> pair) {
  return *reinterpret_cast<const unsigned*>(&pair);
}

// What dequantizing one lane's words needs for one 16-row tile and one group: the scales of rows
// g and g + 8, and the offsets that take the exponent trick's bias and the zero point off.
//   fp16: (w & 0x000F000F) | 0x64006400 is (1024 + q) per half, exact; the mask 0x00F000F0 gives
//         1024 + 16 q, which one fma scales to 64 + q. So off_lo = -(1024 + z), off_hi = -(64 + z).
//   bf16: (w & 0x000F000F) | 0x43004300 is (128 + q), exact; off = -(128 + z) for both rows.
// Every value before the multiply by the scale is a small integer, exact in both formats, so a
// weight is (q - z) * s rounded once to the dtype.
template <typename T>
struct RowPair {
  Pair<T> scale_g;    // (s_g, s_g)
  Pair<T> scale_g8;   // (s_g8, s_g8)
  Pair<T> offset_g;   // row g's offset
  Pair<T> offset_g8;  // row g + 8's offset
};

template <typename T>
__device__ __forceinline__ RowPair<T> rowPair(unsigned scale_word, unsigned zero_word,
                                              bool zero_point) {
  RowPair<T> rp;
  const Pair<T> s = asPair<T>(scale_word);
  rp.scale_g = Pair<T>{s.x, s.x};
  rp.scale_g8 = Pair<T>{s.y, s.y};
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 z = zero_point ? asPair<T>(zero_word) : __floats2half2_rn(8.0f, 8.0f);
    const __half2 lo = __hneg2(__hadd2(z, __floats2half2_rn(1024.0f, 1024.0f)));
    const __half2 hi = __hneg2(__hadd2(z, __floats2half2_rn(64.0f, 64.0f)));
    rp.offset_g = __half2{lo.x, lo.x};
    rp.offset_g8 = __half2{hi.y, hi.y};
  } else {
    const __nv_bfloat162 z =
        zero_point ? asPair<T>(zero_word) : __floats2bfloat162_rn(8.0f, 8.0f);
    const __nv_bfloat162 off = __hneg2(__hadd2(z, __floats2bfloat162_rn(128.0f, 128.0f)));
    rp.offset_g = __nv_bfloat162{off.x, off.x};
    rp.offset_g8 = __nv_bfloat162{off.y, off.y};
  }
  return rp;
}

// The A fragment of one k-step from one packed word: register i holds nibbles (i, i + 4), row
// g + 8 (i & 1) (w4a16_layout.h).
template <typename T>
__device__ __forceinline__ void dequantWord(unsigned w, const RowPair<T>& rp, unsigned (&a)[4]) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f);
    const unsigned w8 = w >> 8;
    const __half2 q0 = asPair<T>(andOr(w, 0x000F000Fu, 0x64006400u));
    const __half2 q1 = asPair<T>(andOr(w, 0x00F000F0u, 0x64006400u));
    const __half2 q2 = asPair<T>(andOr(w8, 0x000F000Fu, 0x64006400u));
    const __half2 q3 = asPair<T>(andOr(w8, 0x00F000F0u, 0x64006400u));
    a[0] = asWord<T>(__hmul2(__hadd2(q0, rp.offset_g), rp.scale_g));
    a[1] = asWord<T>(__hmul2(__hfma2(q1, sixteenth, rp.offset_g8), rp.scale_g8));
    a[2] = asWord<T>(__hmul2(__hadd2(q2, rp.offset_g), rp.scale_g));
    a[3] = asWord<T>(__hmul2(__hfma2(q3, sixteenth, rp.offset_g8), rp.scale_g8));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 q = asPair<T>(andOr(w >> (4 * i), 0x000F000Fu, 0x43004300u));
      const bool upper = (i & 1) != 0;
      a[i] = asWord<T>(__hmul2(__hadd2(q, upper ? rp.offset_g8 : rp.offset_g),
                               upper ? rp.scale_g8 : rp.scale_g));
    }
  }
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

template <typename T>
__device__ __forceinline__ float toFloat(T v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else {
    return __bfloat162float(v);
  }
}

template <typename T, int kTileM, int kGroup, bool kZeroPoint>
__device__ __forceinline__ void gemm(const GemmParams& p) {
  constexpr TileConfig kCfg = tileConfig(kTileM);
  constexpr int kRowTiles = kCfg.row_tiles_per_warp;
  constexpr int kTokenTiles = kCfg.token_tiles_per_warp;
  constexpr int kStages = kCfg.stages;
  static_assert(kCfg.valid, "w4a16: tile_m has no tile configuration (launch.h tileConfig)");
  static_assert(kGroup % kChunkK == 0, "w4a16: the group size must be a multiple of 64");

  extern __shared__ __align__(16) unsigned char smem[];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWarp;
  const int warp = tid / kWarp;
  const int warp_n = warp % kCfg.warps_n;
  const int warp_m = warp / kCfg.warps_n;
  const int g = lane / 4;
  const int t = lane % 4;

  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * kTileM;
  const int n0 = static_cast<int>(blockIdx.x) * kCfg.tile_n;
  const int chunks = p.k / kChunkK;
  const int c_begin = static_cast<int>(blockIdx.z) * p.chunks_per_split;
  const int c_end = min(chunks, c_begin + p.chunks_per_split);
  const int count = c_end - c_begin;

  // The reduction (a programmatic dependent) waits for this whole grid anyway.
  common::releaseDependentGrid();

  const auto* weight = static_cast<const unsigned char*>(p.weight);
  const auto* x = static_cast<const T*>(p.x);
  const auto* scales = static_cast<const T*>(p.scales);
  const auto* zeros = static_cast<const T*>(p.zeros);

  auto load = [&](int stage, int c) {
    const unsigned base = common::sharedAddress(smem + stage * kCfg.stage_bytes);
    const unsigned x_base = base + kCfg.weight_stage_bytes;
    const unsigned scale_base = x_base + kCfg.x_stage_bytes;
    constexpr int kWeightVectors = kCfg.weight_stage_bytes / 16;
    for (int v = tid; v < kWeightVectors; v += kCfg.threads) {
      const int tile = v / (kPackedTileBytes / 16);
      const int within = v % (kPackedTileBytes / 16);
      const std::int64_t src =
          (static_cast<std::int64_t>(n0 / kTileRows + tile) * chunks + c) * kPackedTileBytes +
          within * 16;
      common::cpAsync16(base + v * 16, weight + src, true);
    }
    for (int v = tid; v < kTileM * (kXRowBytes / 16); v += kCfg.threads) {
      const int row = v / (kXRowBytes / 16);
      const int part = v % (kXRowBytes / 16);
      const std::int64_t m = m0 + row;
      const bool valid = m < p.m;  // rows past M read nothing and stage zeros
      const T* src = x + (valid ? m : 0) * p.k + c * kChunkK + part * 8;
      common::cpAsync16(x_base + row * kXRowPitch + part * 16, src, valid);
    }
    const std::int64_t group_row = static_cast<std::int64_t>(c) * kChunkK / kGroup * p.n + n0;
    for (int v = tid; v < kCfg.tile_n / 8; v += kCfg.threads) {
      common::cpAsync16(scale_base + v * 16, scales + group_row + v * 8, true);
      if constexpr (kZeroPoint) {
        common::cpAsync16(scale_base + kCfg.tile_n * 2 + v * 16, zeros + group_row + v * 8, true);
      }
    }
  };

  float acc[kRowTiles][kTokenTiles][4];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[rt][tt][e] = 0.0f;
    }
  }

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < count) load(s, c_begin + s);
    common::cpAsyncCommit();
  }

  for (int it = 0; it < count; ++it) {
    common::cpAsyncWait<kStages - 2>();
    __syncthreads();
    // The stage refilled here was read in iteration it - 1, which every thread has left.
    const int next = it + kStages - 1;
    if (next < count) load(next % kStages, c_begin + next);
    common::cpAsyncCommit();

    const unsigned char* stage = smem + (it % kStages) * kCfg.stage_bytes;
    const unsigned char* x_stage = stage + kCfg.weight_stage_bytes;
    const unsigned char* scale_stage = x_stage + kCfg.x_stage_bytes;

    uint4 packed[kRowTiles];
    RowPair<T> pairs[kRowTiles];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      const int tile = warp_n * kRowTiles + rt;
      packed[rt] =
          *reinterpret_cast<const uint4*>(stage + tile * kPackedTileBytes + lane * 16);
      const int pos = (tile * kTileRows + 2 * g) * 2;
      const unsigned scale_word = *reinterpret_cast<const unsigned*>(scale_stage + pos);
      const unsigned zero_word =
          kZeroPoint ? *reinterpret_cast<const unsigned*>(scale_stage + kCfg.tile_n * 2 + pos)
                     : 0u;
      pairs[rt] = rowPair<T>(scale_word, zero_word, kZeroPoint);
    }
    unsigned xf[kTokenTiles][8];
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
      const int row = (warp_m * kTokenTiles + tt) * 8 + g;
      const uint4* src = reinterpret_cast<const uint4*>(x_stage + row * kXRowPitch + t * 32);
      const uint4 lo = src[0];
      const uint4 hi = src[1];
      xf[tt][0] = lo.x;
      xf[tt][1] = lo.y;
      xf[tt][2] = lo.z;
      xf[tt][3] = lo.w;
      xf[tt][4] = hi.x;
      xf[tt][5] = hi.y;
      xf[tt][6] = hi.z;
      xf[tt][7] = hi.w;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
        const unsigned word = j == 0   ? packed[rt].x
                              : j == 1 ? packed[rt].y
                              : j == 2 ? packed[rt].z
                                       : packed[rt].w;
        unsigned a[4];
        dequantWord<T>(word, pairs[rt], a);
#pragma unroll
        for (int tt = 0; tt < kTokenTiles; ++tt) {
          common::mma16816<T>(acc[rt][tt], a, xf[tt][2 * j], xf[tt][2 * j + 1]);
        }
      }
    }
  }
  common::cpAsyncWait<0>();

  // C fragment: c0, c1 = (row g, tokens 2t, 2t + 1); c2, c3 = (row g + 8, the same tokens).
  T* y = static_cast<T*>(p.y);
  const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n0 + (warp_n * kRowTiles + rt) * kTileRows + g + 8 * (e >> 1);
      const float b = (p.splits == 1 && bias != nullptr) ? toFloat<T>(bias[n]) : 0.0f;
#pragma unroll
      for (int tt = 0; tt < kTokenTiles; ++tt) {
        const std::int64_t m = m0 + (warp_m * kTokenTiles + tt) * 8 + 2 * t + (e & 1);
        if (m >= p.m) continue;
        if (p.splits == 1) {
          y[m * p.n + n] = fromFloat<T>(acc[rt][tt][e] + b);
        } else {
          p.partials[(static_cast<std::int64_t>(blockIdx.z) * p.m + m) * p.n + n] = acc[rt][tt][e];
        }
      }
    }
  }
}

// y[m, n .. n + 7] = sum over splits (in split order) + bias, rounded once.
template <typename T>
__device__ __forceinline__ void reduce(const GemmParams& p) {
  common::waitForPrimaryGrid();
  const std::int64_t vectors_per_row = p.n / kReduceVector;
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (v >= p.m * vectors_per_row) return;
  const std::int64_t m = v / vectors_per_row;
  const std::int64_t n = (v % vectors_per_row) * kReduceVector;
  float sum[kReduceVector] = {};
  for (int s = 0; s < p.splits; ++s) {
    const float4* src = reinterpret_cast<const float4*>(p.partials + (s * p.m + m) * p.n + n);
    const float4 a = src[0];
    const float4 b = src[1];
    sum[0] += a.x;
    sum[1] += a.y;
    sum[2] += a.z;
    sum[3] += a.w;
    sum[4] += b.x;
    sum[5] += b.y;
    sum[6] += b.z;
    sum[7] += b.w;
  }
  if (p.bias != nullptr) {
    const T* bias = static_cast<const T*>(p.bias) + n;
#pragma unroll
    for (int i = 0; i < kReduceVector; ++i) sum[i] += toFloat<T>(bias[i]);
  }
  uint4 out;
  out.x = common::pack2<T>(sum[0], sum[1]);
  out.y = common::pack2<T>(sum[2], sum[3]);
  out.z = common::pack2<T>(sum[4], sum[5]);
  out.w = common::pack2<T>(sum[6], sum[7]);
  *reinterpret_cast<uint4*>(static_cast<T*>(p.y) + m * p.n + n) = out;
}

// The 4-bit value of W[row][col] in the checkpoint's qweight.
__device__ __forceinline__ unsigned sourceNibble(const RepackParams& p, std::int64_t row,
                                                 std::int64_t col) {
  if (p.format == kFormatGptq) {
    const unsigned word = static_cast<unsigned>(p.qweight[(col / 8) * p.n + row]);
    return (word >> (4 * (col % 8))) & 0xFu;
  }
  const unsigned word = static_cast<unsigned>(p.qweight[col * (p.n / 8) + row / 8]);
  return (word >> (4 * layout::awqNibble(static_cast<int>(row % 8)))) & 0xFu;
}

// One packed word per thread.
__device__ __forceinline__ void repackWeights(const RepackParams& p) {
  const std::int64_t word = static_cast<std::int64_t>(blockIdx.x) * kRepackThreads + threadIdx.x;
  if (word >= static_cast<std::int64_t>(p.n) * p.k / 8) return;
  unsigned out = 0;
#pragma unroll
  for (int nibble = 0; nibble < 8; ++nibble) {
    const layout::WeightIndex w = layout::weightOf(word, nibble, p.k);
    out |= sourceNibble(p, w.row, w.col) << (4 * nibble);
  }
  p.weight[word] = out;
}

// One scale (and zero point) per thread: position `i` of [k / group][n] in pair order.
template <typename T>
__device__ __forceinline__ void repackScales(const RepackParams& p) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kRepackThreads + threadIdx.x;
  const std::int64_t groups = p.k / p.group_size;
  if (i >= groups * p.n) return;
  const std::int64_t group = i / p.n;
  const std::int64_t row = layout::scaleRowOf(i % p.n);
  const std::int64_t src = group * p.n + row;
  const float scale =
      p.src_scales_bf16 != 0
          ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.src_scales)[src])
          : __half2float(static_cast<const __half*>(p.src_scales)[src]);
  static_cast<T*>(p.scales)[i] = fromFloat<T>(scale);
  if (p.qzeros == nullptr) return;
  const unsigned word = static_cast<unsigned>(p.qzeros[group * (p.n / 8) + row / 8]);
  const int column = static_cast<int>(row % 8);
  // GPTQ (AutoGPTQ's v1 format) stores z - 1 in sequential nibbles; AWQ stores z in AWQ's order.
  const unsigned z = p.format == kFormatGptq
                         ? ((word >> (4 * column)) & 0xFu) + 1u
                         : (word >> (4 * layout::awqNibble(column))) & 0xFu;
  static_cast<T*>(p.zeros)[i] = fromFloat<T>(static_cast<float>(z));
}

}  // namespace kiln::w4a16
