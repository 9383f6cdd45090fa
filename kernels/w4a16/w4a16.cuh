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

using common::fromFloat;
using common::toFloat;

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

// The offsets that take the exponent trick's bias and the zero point off one lane's two rows
// (g and g + 8) of a 16-row tile, for one group:
//   fp16: (w & 0x000F000F) | 0x64006400 is (1024 + q) per half, exact; the mask 0x00F000F0 gives
//         1024 + 16 q, which one fma by 1/16 makes 64 + q. So row g's offset is -(1024 + z)
//         (registers 0 and 2 come from the low nibbles) and row g + 8's is -(64 + z).
//   bf16: (w >> 4 i & 0x000F000F) | 0x43004300 is (128 + q), exact; the offset is -(128 + z).
// The A fragment is then q - z, a small integer, exact in both formats: the mma's products are
// exact and the scale is applied to the fp32 partial sum of each group (applyScales), so no weight
// is ever rounded to the dtype.
template <typename T>
struct RowOffsets {
  Pair<T> g;   // row g's offset, both halves
  Pair<T> g8;  // row g + 8's offset
};

template <typename T, bool kZeroPoint>
__device__ __forceinline__ RowOffsets<T> rowOffsets(unsigned zero_word) {
  RowOffsets<T> off;
  if constexpr (std::is_same_v<T, __half>) {
    if constexpr (kZeroPoint) {
      const __half2 z = asPair<T>(zero_word);
      const __half2 lo = __hneg2(__hadd2(z, __floats2half2_rn(1024.0f, 1024.0f)));
      const __half2 hi = __hneg2(__hadd2(z, __floats2half2_rn(64.0f, 64.0f)));
      off.g = __half2{lo.x, lo.x};
      off.g8 = __half2{hi.y, hi.y};
    } else {
      off.g = __floats2half2_rn(-1032.0f, -1032.0f);
      off.g8 = __floats2half2_rn(-72.0f, -72.0f);
    }
  } else {
    if constexpr (kZeroPoint) {
      const __nv_bfloat162 z = asPair<T>(zero_word);
      const __nv_bfloat162 o = __hneg2(__hadd2(z, __floats2bfloat162_rn(128.0f, 128.0f)));
      off.g = __nv_bfloat162{o.x, o.x};
      off.g8 = __nv_bfloat162{o.y, o.y};
    } else {
      off.g = __floats2bfloat162_rn(-136.0f, -136.0f);
      off.g8 = off.g;
    }
  }
  return off;
}

// The A fragment of one k-step from one packed word: register i holds nibbles (i, i + 4) of row
// g + 8 (i & 1), as q - z (w4a16_layout.h).
template <typename T>
__device__ __forceinline__ void dequantWord(unsigned w, const RowOffsets<T>& off,
                                            unsigned (&a)[4]) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 sixteenth = __floats2half2_rn(0.0625f, 0.0625f);
    const unsigned w8 = w >> 8;
    a[0] = asWord<T>(__hadd2(asPair<T>(andOr(w, 0x000F000Fu, 0x64006400u)), off.g));
    a[1] = asWord<T>(__hfma2(asPair<T>(andOr(w, 0x00F000F0u, 0x64006400u)), sixteenth, off.g8));
    a[2] = asWord<T>(__hadd2(asPair<T>(andOr(w8, 0x000F000Fu, 0x64006400u)), off.g));
    a[3] = asWord<T>(__hfma2(asPair<T>(andOr(w8, 0x00F000F0u, 0x64006400u)), sixteenth, off.g8));
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_bfloat162 q = asPair<T>(andOr(w >> (4 * i), 0x000F000Fu, 0x43004300u));
      a[i] = asWord<T>(__hadd2(q, (i & 1) != 0 ? off.g8 : off.g));
    }
  }
}

// One 64-wide K chunk of one warp: kRowTiles packed 16-byte lane fragments (one per row tile),
// their offsets, and kTokenTiles x fragments (8 words: the lane's token, 16 consecutive K), into
// the group's partial sums.
template <typename T, int kRowTiles, int kTokenTiles>
__device__ __forceinline__ void mmaChunk(const uint4 (&packed)[kRowTiles],
                                         const RowOffsets<T> (&off)[kRowTiles],
                                         const unsigned (&xf)[kTokenTiles][8],
                                         float (&part)[kRowTiles][kTokenTiles][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      const unsigned word = j == 0   ? packed[rt].x
                            : j == 1 ? packed[rt].y
                            : j == 2 ? packed[rt].z
                                     : packed[rt].w;
      unsigned a[4];
      dequantWord<T>(word, off[rt], a);
#pragma unroll
      for (int tt = 0; tt < kTokenTiles; ++tt) {
        common::mma16816<T>(part[rt][tt], a, xf[tt][2 * j], xf[tt][2 * j + 1]);
      }
    }
  }
}

// acc += part * scale, then part = 0: the end of a group. C fragment rows: elements 0, 1 are row
// g (the scale word's low half), 2, 3 row g + 8 (its high half).
template <typename T, int kRowTiles, int kTokenTiles>
__device__ __forceinline__ void applyScales(const unsigned (&scale_words)[kRowTiles],
                                            float (&part)[kRowTiles][kTokenTiles][4],
                                            float (&acc)[kRowTiles][kTokenTiles][4]) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
    const float2 s = common::unpack2<T>(scale_words[rt]);
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        acc[rt][tt][e] = fmaf(part[rt][tt][e], e < 2 ? s.x : s.y, acc[rt][tt][e]);
        part[rt][tt][e] = 0.0f;
      }
    }
  }
}

// The C fragments of one warp to y (+ bias) or to the split's partials. Rows (features)
// n_base + 16 rt + g (+ 8), tokens m_base + 8 tt + 2 t (+ 1).
template <typename T, int kRowTiles, int kTokenTiles>
__device__ __forceinline__ void storeTile(const GemmParams& p, int n_base, std::int64_t m_base,
                                          int g, int t,
                                          const float (&acc)[kRowTiles][kTokenTiles][4]) {
  T* y = static_cast<T*>(p.y);
  const T* bias = static_cast<const T*>(p.bias);
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int n = n_base + rt * kTileRows + g + 8 * (e >> 1);
      const float b = (p.splits == 1 && bias != nullptr) ? toFloat<T>(bias[n]) : 0.0f;
#pragma unroll
      for (int tt = 0; tt < kTokenTiles; ++tt) {
        const std::int64_t m = m_base + tt * 8 + 2 * t + (e & 1);
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

template <int kRowTiles, int kTokenTiles>
__device__ __forceinline__ void zero(float (&v)[kRowTiles][kTokenTiles][4]) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[rt][tt][e] = 0.0f;
    }
  }
}

// Whether chunk c (of a split ending before c_end) closes its group's partial sum.
template <int kGroup>
__device__ __forceinline__ bool closesGroup(int c, int c_end) {
  return ((c + 1) * kChunkK) % kGroup == 0 || c + 1 == c_end;
}

// 4 bytes global -> shared, asynchronously (cp.async.ca: sizes below 16 bytes go through L1).
__device__ __forceinline__ void cpAsync4(unsigned dst_shared, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst_shared), "l"(src) : "memory");
}

// The GEMV path (tile_m 8 or 16, M <= tile_m per block row): no barrier. Each warp streams its
// kRowTiles 16-row tiles over the split's K through a ring of its own in shared memory, kDepth
// chunks deep: every lane copies its own 16-byte fragment of each tile (the packed tiles of one
// row band are contiguous along K) and its scale and zero words with cp.async and later reads back
// only what it copied, so a lane waits for its own copies and no barrier is needed; the ring holds
// the bytes in flight without registers. x (a few KiB, L1- and L2-resident) is read one chunk
// ahead into registers.
template <typename T, int kTileM, int kGroup, bool kZeroPoint>
__device__ __forceinline__ void gemv(const GemmParams& p) {
  constexpr TileConfig kCfg = tileConfig(kTileM);
  constexpr int kRowTiles = kCfg.row_tiles_per_warp;
  constexpr int kTokenTiles = kCfg.token_tiles_per_warp;
  constexpr int kDepth = kCfg.stages;
  constexpr int kSlotBytes = kCfg.warp_slot_bytes;  // one chunk of one warp
  static_assert(kCfg.valid && kCfg.gemv, "w4a16: gemv needs a GEMV tile");

  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const int g = lane / 4;
  const int t = lane % 4;
  const int chunks = p.k / kChunkK;
  const int c_begin = static_cast<int>(blockIdx.z) * p.chunks_per_split;
  const int c_end = min(chunks, c_begin + p.chunks_per_split);
  const int count = c_end - c_begin;
  const int tile0 = (static_cast<int>(blockIdx.x) * kCfg.warps_n + warp) * kRowTiles;
  const std::int64_t m0 = static_cast<std::int64_t>(blockIdx.y) * kTileM;

  common::releaseDependentGrid();

  // Slot layout (one chunk): [kRowTiles][32 lanes][16 B] weights, then [kRowTiles][32] scale
  // words, then [kRowTiles][32] zero words.
  const unsigned ring = common::sharedAddress(smem) + warp * kDepth * kSlotBytes;
  const unsigned char* ring_ptr = smem + warp * kDepth * kSlotBytes;
  constexpr int kScaleOffset = kRowTiles * kWarp * 16;
  constexpr int kZeroOffset = kScaleOffset + kRowTiles * kWarp * 4;

  // Per row tile: the lane's fragment at chunk 0 (tiles of one band are contiguous along K) and
  // its scale (zero) word of rows (g, g + 8) in group 0; a chunk adds 512 bytes, a group n / 2
  // words.
  constexpr int kChunksPerGroup = kGroup / kChunkK;
  const std::int64_t group_words = p.n / 2;
  const unsigned char* weight_base[kRowTiles];
  std::int64_t scale_base[kRowTiles];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
    weight_base[rt] = static_cast<const unsigned char*>(p.weight) + lane * 16 +
                      static_cast<std::int64_t>(tile0 + rt) * chunks * kPackedTileBytes;
    scale_base[rt] = ((tile0 + rt) * kTileRows + 2 * g) / 2;
  }
  const auto* scales = static_cast<const unsigned*>(p.scales);
  const auto* zeros = static_cast<const unsigned*>(p.zeros);
  auto issue = [&](int slot, int c) {
    const unsigned base = ring + slot * kSlotBytes;
    const std::int64_t group_offset = static_cast<std::int64_t>(c / kChunksPerGroup) * group_words;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      common::cpAsync16(base + (rt * kWarp + lane) * 16,
                        weight_base[rt] + static_cast<std::int64_t>(c) * kPackedTileBytes, true);
      cpAsync4(base + kScaleOffset + (rt * kWarp + lane) * 4,
               scales + scale_base[rt] + group_offset);
      if constexpr (kZeroPoint) {
        cpAsync4(base + kZeroOffset + (rt * kWarp + lane) * 4,
                 zeros + scale_base[rt] + group_offset);
      }
    }
  };

  // x rows of this lane (token g of each 8-token tile); rows past m are zeros.
  const T* x_rows[kTokenTiles];
  bool x_valid[kTokenTiles];
#pragma unroll
  for (int tt = 0; tt < kTokenTiles; ++tt) {
    const std::int64_t m = m0 + tt * 8 + g;
    x_valid[tt] = m < p.m;
    x_rows[tt] = static_cast<const T*>(p.x) + (x_valid[tt] ? m : 0) * p.k + 16 * t;
  }
  auto loadX = [&](int c, uint4(&xv)[kTokenTiles][2]) {
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
      const uint4* src = reinterpret_cast<const uint4*>(x_rows[tt] + c * kChunkK);
      xv[tt][0] = x_valid[tt] ? __ldg(src) : make_uint4(0, 0, 0, 0);
      xv[tt][1] = x_valid[tt] ? __ldg(src + 1) : make_uint4(0, 0, 0, 0);
    }
  };

#pragma unroll
  for (int d = 0; d < kDepth - 1; ++d) {
    if (d < count) issue(d, c_begin + d);
    common::cpAsyncCommit();
  }
  uint4 x_next[kTokenTiles][2];
  if (count > 0) loadX(c_begin, x_next);

  float acc[kRowTiles][kTokenTiles][4];
  float part[kRowTiles][kTokenTiles][4];
  zero(acc);
  zero(part);
  for (int it = 0; it < count; ++it) {
    const int c = c_begin + it;
    // The slot refilled here was read (into registers, used) in iteration it - 1.
    if (it + kDepth - 1 < count) issue((it + kDepth - 1) % kDepth, c + kDepth - 1);
    common::cpAsyncCommit();
    common::cpAsyncWait<kDepth - 1>();  // this lane's copies of chunk c have landed

    unsigned xf[kTokenTiles][8];
#pragma unroll
    for (int tt = 0; tt < kTokenTiles; ++tt) {
      xf[tt][0] = x_next[tt][0].x;
      xf[tt][1] = x_next[tt][0].y;
      xf[tt][2] = x_next[tt][0].z;
      xf[tt][3] = x_next[tt][0].w;
      xf[tt][4] = x_next[tt][1].x;
      xf[tt][5] = x_next[tt][1].y;
      xf[tt][6] = x_next[tt][1].z;
      xf[tt][7] = x_next[tt][1].w;
    }
    if (it + 1 < count) loadX(c + 1, x_next);

    const unsigned char* slot = ring_ptr + (it % kDepth) * kSlotBytes;
    uint4 packed[kRowTiles];
    unsigned scale_words[kRowTiles];
    RowOffsets<T> off[kRowTiles];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      packed[rt] = *reinterpret_cast<const uint4*>(slot + (rt * kWarp + lane) * 16);
      scale_words[rt] =
          *reinterpret_cast<const unsigned*>(slot + kScaleOffset + (rt * kWarp + lane) * 4);
      const unsigned zero_word =
          kZeroPoint
              ? *reinterpret_cast<const unsigned*>(slot + kZeroOffset + (rt * kWarp + lane) * 4)
              : 0u;
      off[rt] = rowOffsets<T, kZeroPoint>(zero_word);
    }
    mmaChunk<T>(packed, off, xf, part);
    if (closesGroup<kGroup>(c, c_end)) applyScales<T>(scale_words, part, acc);
  }
  common::cpAsyncWait<0>();
  storeTile<T>(p, tile0 * kTileRows, m0, g, t, acc);
}

// The tiled path (tile_m 64, 128): one block owns tile_n features x tile_m tokens over one split of
// K; each 64-wide K chunk of packed weights, x, scales and zero points goes through a cp.async
// pipeline in shared memory; each warp dequantizes its row tiles once per chunk for all its token
// tiles.
template <typename T, int kTileM, int kGroup, bool kZeroPoint>
__device__ __forceinline__ void gemm(const GemmParams& p) {
  constexpr TileConfig kCfg = tileConfig(kTileM);
  constexpr int kRowTiles = kCfg.row_tiles_per_warp;
  constexpr int kTokenTiles = kCfg.token_tiles_per_warp;
  constexpr int kStages = kCfg.stages;
  static_assert(kCfg.valid && !kCfg.gemv, "w4a16: gemm needs a tiled configuration");
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
  float part[kRowTiles][kTokenTiles][4];
  zero(acc);
  zero(part);

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
    RowOffsets<T> off[kRowTiles];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      const int tile = warp_n * kRowTiles + rt;
      packed[rt] = *reinterpret_cast<const uint4*>(stage + tile * kPackedTileBytes + lane * 16);
      const unsigned zero_word =
          kZeroPoint ? *reinterpret_cast<const unsigned*>(scale_stage + kCfg.tile_n * 2 +
                                                          (tile * kTileRows + 2 * g) * 2)
                     : 0u;
      off[rt] = rowOffsets<T, kZeroPoint>(zero_word);
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
    mmaChunk<T>(packed, off, xf, part);
    if (closesGroup<kGroup>(c_begin + it, c_end)) {
      unsigned scale_words[kRowTiles];
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
        const int tile = warp_n * kRowTiles + rt;
        scale_words[rt] =
            *reinterpret_cast<const unsigned*>(scale_stage + (tile * kTileRows + 2 * g) * 2);
      }
      applyScales<T>(scale_words, part, acc);
    }
  }
  common::cpAsyncWait<0>();
  storeTile<T>(p, n0 + warp_n * kRowTiles * kTileRows, m0 + warp_m * kTokenTiles * 8, g, t, acc);
}

// y[m, n .. n + 7] = sum over splits (in split order) + bias, rounded once. The partials of up to
// kReduceBatch splits are loaded before any is added, so that a thread waits for one round trip
// per batch rather than one per split.
inline constexpr int kReduceBatch = 8;

template <typename T>
__device__ __forceinline__ void reduce(const GemmParams& p) {
  common::waitForPrimaryGrid();
  const std::int64_t vectors_per_row = p.n / kReduceVector;
  const std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  if (v >= p.m * vectors_per_row) return;
  const std::int64_t m = v / vectors_per_row;
  const std::int64_t n = (v % vectors_per_row) * kReduceVector;
  const std::int64_t split_stride = p.m * p.n;
  const float* src = p.partials + m * p.n + n;
  float sum[kReduceVector] = {};
  for (int s0 = 0; s0 < p.splits; s0 += kReduceBatch) {
    float4 part[kReduceBatch][2];
#pragma unroll
    for (int b = 0; b < kReduceBatch; ++b) {
      if (s0 + b < p.splits) {
        const float4* at = reinterpret_cast<const float4*>(src + (s0 + b) * split_stride);
        part[b][0] = at[0];
        part[b][1] = at[1];
      }
    }
#pragma unroll
    for (int b = 0; b < kReduceBatch; ++b) {
      if (s0 + b < p.splits) {
        sum[0] += part[b][0].x;
        sum[1] += part[b][0].y;
        sum[2] += part[b][0].z;
        sum[3] += part[b][0].w;
        sum[4] += part[b][1].x;
        sum[5] += part[b][1].y;
        sum[6] += part[b][1].z;
        sum[7] += part[b][1].w;
      }
    }
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
  const float scale = p.src_scales_bf16 != 0
                          ? __bfloat162float(static_cast<const __nv_bfloat16*>(p.src_scales)[src])
                          : __half2float(static_cast<const __half*>(p.src_scales)[src]);
  static_cast<T*>(p.scales)[i] = fromFloat<T>(scale);
  if (p.qzeros == nullptr) return;
  const unsigned word = static_cast<unsigned>(p.qzeros[group * (p.n / 8) + row / 8]);
  const int column = static_cast<int>(row % 8);
  // GPTQ (AutoGPTQ's v1 format) stores z - 1 in sequential nibbles; AWQ stores z in AWQ's order.
  const unsigned z = p.format == kFormatGptq ? ((word >> (4 * column)) & 0xFu) + 1u
                                             : (word >> (4 * layout::awqNibble(column))) & 0xFu;
  static_cast<T*>(p.zeros)[i] = fromFloat<T>(static_cast<float>(z));
}

}  // namespace kiln::w4a16
