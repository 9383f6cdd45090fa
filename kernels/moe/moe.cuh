// The moe kernels (launch.h has the five steps and their grids; params.h the tensors): routing,
// the alignment of expert rows, the two grouped GEMMs on mma.sync m16n8k16 with ldmatrix and a
// cp.async ring, and the finalize. One source for every SM from sm_80.
//
// The grouped GEMM computes, for the row tile of one expert, C[64, 128] = A[64, K] . B[128, K]^T,
// both operands K-contiguous in shared memory (ldmatrix without transposition feeds both the A
// fragment and mma's "col" B fragment). A's rows are gathered: fc1 reads the x row of each expert
// row's token, fc2 the act rows of the expert, contiguous. B's 128 rows are fc1's 64 gate rows and
// the 64 up rows of the same columns (so SiLU(gate) * up is formed in registers) or fc2's 128
// hidden rows. Rows past the expert's count and weight rows past N are zero-filled and never
// stored.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/dtype.cuh"
#include "common/sm80_mma.cuh"
#include "common/vec16.cuh"
#include "moe/launch.h"
#include "moe/params.h"

namespace kiln::moe {

// ---- route ----------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ float loadLogit(const MoeParams& p, std::int64_t i) {
  if (p.logits_fp32 != 0) return static_cast<const float*>(p.logits)[i];
  const unsigned short bits = static_cast<const unsigned short*>(p.logits)[i];
  return common::unpack2<T>(bits).x;
}

// One warp per token: lane l holds experts l, l + 32, ...; softmax in fp32 (expf, not the SFU
// approximation: the weights are outputs), then k rounds of a warp arg-max, larger probability
// first and the lower expert on ties, as a stable descending sort would pick.
template <typename T>
__device__ void route(const MoeParams& p) {
  constexpr int kPerLane = kMaxExperts / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int token = blockIdx.x * kRouteWarps + threadIdx.x / kWarp;
  if (token >= p.tokens) return;
  const std::int64_t row = static_cast<std::int64_t>(token) * p.experts;
  float v[kPerLane];
  float max_logit = -INFINITY;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + kWarp * i;
    v[i] = e < p.experts ? loadLogit<T>(p, row + e) : -INFINITY;
    max_logit = fmaxf(max_logit, v[i]);
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) {
    max_logit = fmaxf(max_logit, __shfl_xor_sync(0xffffffffu, max_logit, o));
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int e = lane + kWarp * i;
    v[i] = e < p.experts ? expf(v[i] - max_logit) : -1.0f;  // -1: no expert (probabilities >= 0)
    if (e < p.experts) sum += v[i];
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);

  float chosen_sum = 0.0f;
  float my_weight = 0.0f;  // lane j < k keeps the j-th choice
  int my_id = 0;
  for (int j = 0; j < p.top_k; ++j) {
    float best = -1.0f;
    int best_e = 0x7fffffff;
#pragma unroll
    for (int i = 0; i < kPerLane; ++i) {
      const int e = lane + kWarp * i;
      if (v[i] > best || (v[i] == best && e < best_e)) {
        best = v[i];
        best_e = e;
      }
    }
#pragma unroll
    for (int o = kWarp / 2; o > 0; o /= 2) {
      const float other = __shfl_xor_sync(0xffffffffu, best, o);
      const int other_e = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (other > best || (other == best && other_e < best_e)) {
        best = other;
        best_e = other_e;
      }
    }
    if (best_e % kWarp == lane) {
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        if (i == best_e / kWarp) v[i] = -1.0f;  // taken
      }
    }
    const float prob = best / sum;
    chosen_sum += prob;
    if (lane == j) {
      my_weight = prob;
      my_id = best_e;
    }
  }
  if (lane < p.top_k) {
    const std::int64_t slot = static_cast<std::int64_t>(token) * p.top_k + lane;
    p.topk_ids[slot] = my_id;
    p.topk_weights[slot] = p.renormalize != 0 ? my_weight / chosen_sum : my_weight;
  }
}

// ---- align ----------------------------------------------------------------------------------

// One block: counts the rows of every expert, writes the prefix sums of rows and of row tiles,
// and places every slot at a row of its expert. Rows of one expert land in whatever order the
// shared-memory atomics grant; every output is the same whatever the order (a row's GEMM result
// does not depend on its neighbours, and fc2 writes each row to its slot).
__device__ void align(const MoeParams& p) {
  __shared__ int counts[kMaxExperts];
  __shared__ int cursor[kMaxExperts];
  const int tid = threadIdx.x;
  const int experts = p.experts;
  const int rows = p.tokens * p.top_k;
  for (int e = tid; e < experts; e += kAlignThreads) counts[e] = 0;
  __syncthreads();
  for (int i = tid; i < rows; i += kAlignThreads) atomicAdd(&counts[p.topk_ids[i]], 1);
  __syncthreads();
  if (tid < kWarp) {
    // Warp 0 scans: lane l sums a run of kMaxExperts / 32 experts, then an exclusive warp scan.
    constexpr int kRun = kMaxExperts / kWarp;
    const int first = tid * kRun;
    int row_sum = 0, tile_sum = 0;
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      const int e = first + i;
      if (e < experts) {
        row_sum += counts[e];
        tile_sum += (counts[e] + kBlockM - 1) / kBlockM;
      }
    }
    int row_before = row_sum, tile_before = tile_sum;
#pragma unroll
    for (int o = 1; o < kWarp; o *= 2) {
      const int r = __shfl_up_sync(0xffffffffu, row_before, o);
      const int t = __shfl_up_sync(0xffffffffu, tile_before, o);
      if (tid >= o) {
        row_before += r;
        tile_before += t;
      }
    }
    row_before -= row_sum;  // exclusive
    tile_before -= tile_sum;
#pragma unroll
    for (int i = 0; i < kRun; ++i) {
      const int e = first + i;
      if (e < experts) {
        p.expert_offsets[e] = row_before;
        p.tile_offsets[e] = tile_before;
        cursor[e] = row_before;
        row_before += counts[e];
        tile_before += (counts[e] + kBlockM - 1) / kBlockM;
      }
    }
    if (tid == kWarp - 1) {
      p.expert_offsets[experts] = row_before;
      p.tile_offsets[experts] = tile_before;
    }
  }
  __syncthreads();
  for (int i = tid; i < rows; i += kAlignThreads) {
    p.sorted_slots[atomicAdd(&cursor[p.topk_ids[i]], 1)] = i;
  }
}

// ---- grouped GEMM ---------------------------------------------------------------------------

// Byte offset of 16-byte chunk `chunk` (0..3) of row `row` in a stage tile of 64-byte rows: the
// chunk index XOR (row / 2) % 4, so that the 8 rows one ldmatrix phase reads hit 8 distinct
// 16-byte bank groups.
__device__ __forceinline__ unsigned swizzle(int row, int chunk) {
  return static_cast<unsigned>(row * kRowBytes + ((chunk ^ ((row >> 1) & 3)) << 4));
}

__device__ __forceinline__ float silu(float g) {
  return g / (1.0f + expf(-g));
}

// kFc1: C = x[gathered] . w1[e]^T over H, SiLU(gate) * up into act; else C = act . w2[e]^T over I
// into down at each row's slot.
template <typename T, bool kFc1>
__device__ void groupedGemm(const MoeParams& p, unsigned char* shared) {
  const int tile = blockIdx.x;
  const int* tile_offsets = p.tile_offsets;
  const int experts = p.experts;
  if (tile >= tile_offsets[experts]) return;
  // The expert: the last e with tile_offsets[e] <= tile (experts without rows have no tiles).
  int lo = 0, hi = experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offsets[mid] <= tile) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int expert = lo;
  const int m0 = (tile - tile_offsets[expert]) * kBlockM;
  const int row_begin = p.expert_offsets[expert] + m0;
  const int valid_rows = min(kBlockM, p.expert_offsets[expert + 1] - row_begin);

  const int k_total = kFc1 ? p.hidden : p.intermediate;
  const int n_total = kFc1 ? p.intermediate : p.hidden;  // output columns
  const int n0 = blockIdx.y * (kFc1 ? kBlockN : kBlockBRows);
  const T* b_base = static_cast<const T*>(kFc1 ? p.w1 : p.w2) +
                    static_cast<std::int64_t>(expert) * (kFc1 ? 2 * n_total : n_total) * k_total;

  const int tid = threadIdx.x;
  const int warp = tid / kWarp;
  const int lane = tid % kWarp;
  const int chunk = tid % 4;  // every thread copies the same 16-byte chunk of its rows

  // A: 64 rows x 4 chunks, two rows per thread (tid / 4 and tid / 4 + 32).
  constexpr int kARowsPerThread = kBlockM * 4 / kGemmThreads;
  const T* a_src[kARowsPerThread];
  bool a_valid[kARowsPerThread];
#pragma unroll
  for (int i = 0; i < kARowsPerThread; ++i) {
    const int r = tid / 4 + i * (kGemmThreads / 4);
    a_valid[i] = r < valid_rows;
    std::int64_t src_row = 0;
    if (a_valid[i]) {
      if constexpr (kFc1) {
        src_row = p.sorted_slots[row_begin + r] / p.top_k;  // the token of the row's slot
      } else {
        src_row = row_begin + r;
      }
    }
    a_src[i] = static_cast<const T*>(kFc1 ? p.x : p.act) + src_row * k_total + chunk * 8;
  }
  // B: 128 rows x 4 chunks, four rows per thread (tid / 4 + 32 i).
  constexpr int kBRowsPerThread = kBlockBRows * 4 / kGemmThreads;
  const T* b_src[kBRowsPerThread];
  bool b_valid[kBRowsPerThread];
#pragma unroll
  for (int i = 0; i < kBRowsPerThread; ++i) {
    const int r = tid / 4 + i * (kGemmThreads / 4);
    int n;
    if constexpr (kFc1) {
      n = r < kBlockN ? n0 + r : n_total + n0 + (r - kBlockN);  // gate rows, then up rows
      b_valid[i] = true;
    } else {
      n = n0 + r;
      b_valid[i] = n < n_total;
    }
    b_src[i] = b_base + static_cast<std::int64_t>(b_valid[i] ? n : 0) * k_total + chunk * 8;
  }

  const unsigned smem = common::sharedAddress(shared);
  auto load_stage = [&](int stage, int kt) {
    const unsigned a_dst = smem + stage * kStageBytes;
    const unsigned b_dst = a_dst + kStageABytes;
    const int k_off = kt * kBlockK;
#pragma unroll
    for (int i = 0; i < kARowsPerThread; ++i) {
      const int r = tid / 4 + i * (kGemmThreads / 4);
      common::cpAsync16(a_dst + swizzle(r, chunk), a_src[i] + (a_valid[i] ? k_off : 0), a_valid[i]);
    }
#pragma unroll
    for (int i = 0; i < kBRowsPerThread; ++i) {
      const int r = tid / 4 + i * (kGemmThreads / 4);
      common::cpAsync16(b_dst + swizzle(r, chunk), b_src[i] + (b_valid[i] ? k_off : 0), b_valid[i]);
    }
  };

  // Warp (warp_m, warp_n): rows 32 warp_m .. +32 (two m16 tiles) and eight n8 tiles of B rows:
  // fc1 gate rows 32 warp_n + 8 j (j < 4) and up rows 64 + 32 warp_n + 8 (j - 4); fc2 rows
  // 64 warp_n + 8 j.
  const int warp_m = warp % 2;
  const int warp_n = warp / 2;
  auto b_tile_row = [&](int j) {
    if constexpr (kFc1) {
      return j < 4 ? warp_n * 32 + 8 * j : kBlockN + warp_n * 32 + 8 * (j - 4);
    } else {
      return warp_n * 64 + 8 * j;
    }
  };

  float acc[2][8][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[mi][j][c] = 0.0f;
    }
  }

  const int k_tiles = k_total / kBlockK;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    common::cpAsyncCommit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    common::cpAsyncWait<kStages - 2>();
    __syncthreads();  // stage kt is visible, and every warp is done with stage kt - 1
    const int next = kt + kStages - 1;
    if (next < k_tiles) load_stage(next % kStages, next);
    common::cpAsyncCommit();

    const unsigned a_stage = smem + (kt % kStages) * kStageBytes;
    const unsigned b_stage = a_stage + kStageABytes;
#pragma unroll
    for (int ks = 0; ks < kBlockK / 16; ++ks) {
      unsigned a[2][4];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int r = warp_m * 32 + mi * 16 + lane % 16;
        common::ldmatrixX4(a[mi], a_stage + swizzle(r, 2 * ks + lane / 16));
      }
#pragma unroll
      for (int jp = 0; jp < 4; ++jp) {  // n8 tiles 2 jp and 2 jp + 1
        unsigned b[4];
        const int r = b_tile_row(2 * jp + lane / 16) + lane % 8;
        common::ldmatrixX4(b, b_stage + swizzle(r, 2 * ks + (lane / 8) % 2));
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) {
          common::mma16816<T>(acc[mi][2 * jp], a[mi], b[0], b[1]);
          common::mma16816<T>(acc[mi][2 * jp + 1], a[mi], b[2], b[3]);
        }
      }
    }
  }
  common::cpAsyncWait<0>();

  // Epilogue: c0, c1 of an n8 tile are (row g, columns 2 t, 2 t + 1), c2, c3 the same at row g + 8.
  const int g = lane / 4;
  const int t4 = lane % 4;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = warp_m * 32 + mi * 16 + g + 8 * half;
      if (r >= valid_rows) continue;
      if constexpr (kFc1) {
        T* out = static_cast<T*>(p.act) + static_cast<std::int64_t>(row_begin + r) * n_total;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = n0 + warp_n * 32 + 8 * j + 2 * t4;
          const float lo = silu(acc[mi][j][2 * half]) * acc[mi][j + 4][2 * half];
          const float hi = silu(acc[mi][j][2 * half + 1]) * acc[mi][j + 4][2 * half + 1];
          *reinterpret_cast<unsigned*>(out + col) = common::pack2<T>(lo, hi);
        }
      } else {
        const std::int64_t slot = p.sorted_slots[row_begin + r];
        T* out = static_cast<T*>(p.down) + slot * n_total;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int col = n0 + warp_n * 64 + 8 * j + 2 * t4;
          if (col < n_total) {
            *reinterpret_cast<unsigned*>(out + col) =
                common::pack2<T>(acc[mi][j][2 * half], acc[mi][j][2 * half + 1]);
          }
        }
      }
    }
  }
}

// ---- finalize -------------------------------------------------------------------------------

// One block per token, eight columns per thread per step: y = sum_j w_j * down[t k + j] (+ r),
// accumulated in fp32 in j order and rounded once.
template <typename T>
__device__ void finalize(const MoeParams& p) {
  const int token = blockIdx.x;
  const int k = p.top_k;
  const std::int64_t h = p.hidden;
  const std::int64_t slot0 = static_cast<std::int64_t>(token) * k;
  for (std::int64_t col = threadIdx.x * 8; col < h; col += kFinalizeThreads * 8) {
    float sum[8] = {};
    if (p.residual != nullptr) {
      common::unpack8<T>(common::loadStreaming(reinterpret_cast<const common::Vec16*>(
                             static_cast<const T*>(p.residual) + token * h + col)),
                         sum);
    }
    // The routed sum first, then the residual, as (sum_j w_j d_j) + r.
    float routed[8] = {};
    for (int j = 0; j < k; ++j) {
      const float w = p.topk_weights[slot0 + j];
      float d[8];
      common::unpack8<T>(*reinterpret_cast<const common::Vec16*>(static_cast<const T*>(p.down) +
                                                                 (slot0 + j) * h + col),
                         d);
#pragma unroll
      for (int i = 0; i < 8; ++i) routed[i] = fmaf(w, d[i], routed[i]);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) sum[i] += routed[i];
    common::store(reinterpret_cast<common::Vec16*>(static_cast<T*>(p.y) + token * h + col),
                  common::pack8<T>(sum));
  }
}

}  // namespace kiln::moe
