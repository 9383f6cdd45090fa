// Device code of the qkrope group: per (token, head) of the fused QKV projection, Qwen3's RMSNorm
// of the q and k heads (optional), NeoX rotary embedding of q and k, q stored to q_out, k and v
// stored into the paged caches at the token's slot (and optionally to contiguous k_out / v_out).
//
// A block holds one token's heads (launch.h). It first issues its loads (two 16-byte vectors of a
// head per thread, and that thread's weight vectors), then computes the token's rotary table into
// shared memory (cos and sin of fl32(position * inv_freq[i]), rounded to the dtype as HF and vLLM
// round their cos / sin before multiplying), one entry per thread, while the loads are in flight.
// Each head's sum of squares is reduced over its head_dim / 16 lanes with warp shuffles; the norm,
// the weight and the rotation are applied in fp32 in registers and each stored value is rounded
// once. v is copied bit for bit. Memory is touched once per byte: bound by bandwidth.
//
// Lane j of a head with rotary half h = rotary_dim / 16 vectors owns vectors (j, j + h) when j < h
// (element i of the first half and i + rotary_dim / 2 of the second: the NeoX pair) and (2j,
// 2j + 1) otherwise (the pass-through tail past rotary_dim).
//
// Programmatic dependent launch (the runner's overlap_launch, sm_90+): a block first waits for the
// kernel before (griddepcontrol.wait, a no-op when not launched as a dependent), since every byte
// it reads may be that kernel's output, then releases its own dependents at once, so that the
// next kernel's launch (decodeattn with overlap_launch) hides behind this one; that kernel waits
// for this whole grid before it reads what this one writes.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/vec16.cuh"
#include "qkrope/launch.h"
#include "qkrope/params.h"

namespace kiln::qkrope {

// Sum of `v` over each group of kLanes consecutive lanes of the warp (a power of two <= 32); every
// lane gets its group's total. All 32 lanes must call it.
template <int kLanes>
__device__ __forceinline__ float laneGroupSum(float v) {
  static_assert(kLanes >= 1 && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0,
                "laneGroupSum: a power of two up to 32 lanes");
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

template <typename T>
__device__ __forceinline__ float roundTo(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(__float2bfloat16_rn(v));
  } else {
    return __half2float(__float2half_rn(v));
  }
}

// One block: token blockIdx.x, its heads [blockIdx.y * rows_per_block, ...). Requires 16-byte
// aligned tensors, 8-byte aligned positions and slot_mapping, and a block of
// launchShape(kHeadDim, heads).threads_per_block threads (the runner admits only such launches).
template <typename T, int kHeadDim>
__device__ __forceinline__ void qkropeBlock(const QkRopeParams& p) {
  static_assert(validHeadDim(kHeadDim), "head_dim: a multiple of 16 with 1..32 threads per head");
  static_assert(kVectorsPerThread == 2, "a thread holds one rotation pair of vectors");
  constexpr int kLanes = threadsPerHead(kHeadDim);
  constexpr int kVectorsPerHead = kHeadDim / kElementsPerVector;
  __shared__ float2 rope[kMaxRotaryPairs];  // (cos, sin) of this token, rounded to T

  // Before any global read or write: every input may be the kernel before's output.
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();

  const int thread = static_cast<int>(threadIdx.x);
  const int row_in_block = thread / kLanes;
  const int lane = thread % kLanes;
  const std::int64_t token = blockIdx.x;
  const int heads = p.q_heads + 2 * p.kv_heads;
  const int head = static_cast<int>(blockIdx.y) * p.rows_per_block + row_in_block;
  // Threads past the block's heads (a partial last warp, or a short last chunk) hold no head;
  // they still take part in the shuffles and the barrier.
  const bool active = row_in_block < p.rows_per_block && head < heads;
  const bool is_q = head < p.q_heads;
  const bool is_v = head >= p.q_heads + p.kv_heads;
  const int half = p.rotary_dim / kRotaryGranule;  // vectors per rotary half
  const bool rotates = lane < half;
  const int va = rotates ? lane : 2 * lane;
  const int vb = rotates ? lane + half : 2 * lane + 1;

  common::Vec16 x[kVectorsPerThread] = {};
  common::Vec16 w[kVectorsPerThread] = {};
  const bool normed = p.qk_norm != 0 && !is_v;
  if (active) {
    const auto* row =
        static_cast<const common::Vec16*>(p.qkv) + (token * heads + head) * kVectorsPerHead;
    x[0] = common::loadStreaming(row + va);
    x[1] = common::loadStreaming(row + vb);
    if (normed) {
      const auto* weight =
          static_cast<const common::Vec16*>(is_q ? p.q_norm_weight : p.k_norm_weight);
      w[0] = common::loadReadOnly(weight + va);
      w[1] = common::loadReadOnly(weight + vb);
    }
  }
  const std::int64_t slot = p.slot_mapping[token];

  // The token's rotary table: angle = fl32(fl32(position) * inv_freq[i]) (HF's fp32 product),
  // cos and sin in fp32 (sincosf, the precise one: its argument reduction is exact for any
  // position), each rounded to T.
  const float position = __ll2float_rn(p.positions[token]);
  for (int i = thread; i < p.rotary_dim / 2; i += static_cast<int>(blockDim.x)) {
    float s, c;
    sincosf(__fmul_rn(position, p.inv_freq[i]), &s, &c);
    rope[i] = make_float2(roundTo<T>(c), roundTo<T>(s));
  }

  float f[kVectorsPerThread][kElementsPerVector];
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVectorsPerThread; ++k) {
    common::unpack8<T>(x[k], f[k]);
#pragma unroll
    for (int e = 0; e < kElementsPerVector; ++e) sum_sq = fmaf(f[k][e], f[k][e], sum_sq);
  }
  const float total = laneGroupSum<kLanes>(sum_sq);
  __syncthreads();  // the rotary table is complete
  if (!active) return;

  const bool to_cache = slot >= 0 && slot < p.num_slots;
  const int kv_head = head - p.q_heads - (is_v ? p.kv_heads : 0);
  common::Vec16* cache_row = nullptr;
  if (!is_q && to_cache) {
    const std::int64_t page = slot >> p.page_size_log2;
    const std::int64_t in_page = slot & ((std::int64_t{1} << p.page_size_log2) - 1);
    cache_row = static_cast<common::Vec16*>(is_v ? p.v_cache : p.k_cache) +
                (page * p.page_stride + in_page * p.token_stride +
                 static_cast<std::int64_t>(kv_head) * p.head_stride) /
                    kElementsPerVector;
  }
  common::Vec16* out_row = nullptr;  // q_out, k_out or v_out
  if (is_q) {
    out_row = static_cast<common::Vec16*>(p.q_out) + (token * p.q_heads + head) * kVectorsPerHead;
  } else if ((is_v ? p.v_out : p.k_out) != nullptr) {
    out_row = static_cast<common::Vec16*>(is_v ? p.v_out : p.k_out) +
              (token * p.kv_heads + kv_head) * kVectorsPerHead;
  }

  common::Vec16 y[kVectorsPerThread] = {x[0], x[1]};
  if (!is_v) {
    if (normed) {
      const float inv_rms = rsqrtf(total * (1.0f / static_cast<float>(kHeadDim)) + p.eps);
#pragma unroll
      for (int k = 0; k < kVectorsPerThread; ++k) {
        float fw[kElementsPerVector];
        common::unpack8<T>(w[k], fw);
#pragma unroll
        for (int e = 0; e < kElementsPerVector; ++e) f[k][e] = (f[k][e] * inv_rms) * fw[e];
      }
    }
    if (rotates) {
      // NeoX: out[i] = x[i] cos - x[i + r/2] sin, out[i + r/2] = x[i + r/2] cos + x[i] sin.
      const int first = lane * kElementsPerVector;
#pragma unroll
      for (int e = 0; e < kElementsPerVector; ++e) {
        const float2 cs = rope[first + e];
        const float a = f[0][e], b = f[1][e];
        f[0][e] = fmaf(a, cs.x, -b * cs.y);
        f[1][e] = fmaf(b, cs.x, a * cs.y);
      }
    }
    y[0] = common::pack8<T>(f[0]);
    y[1] = common::pack8<T>(f[1]);
  }
  if (cache_row != nullptr) {
    common::store(cache_row + va, y[0]);
    common::store(cache_row + vb, y[1]);
  }
  if (out_row != nullptr) {
    common::store(out_row + va, y[0]);
    common::store(out_row + vb, y[1]);
  }
}

}  // namespace kiln::qkrope
