// The decodeattn translation unit: one variant per compile, its head dim and dtype baked in by
// `kiln build` from kiln.toml (-DKILN_CONST_HEAD_DIM=128 -DKILN_CONST_DTYPE=__nv_bfloat16 ...).
// Both entries take one DecodeAttentionParams by value; grid, block and shared memory come from
// launch.h through the runner's selector.
//
//   kiln_decodeattn        grid (num_splits, kv_heads * head_chunks, batch), kThreads threads,
//                          sharedBytes(head_dim) dynamic shared memory; chunks of 16 rows.
//                          num_splits == 1: writes out; else the fp32 partials (normalized out,
//                          lse) of its key range.
//   kiln_decodeattn_rows32 the same with chunks of 32 rows (two mma row tiles per warp), for KV
//                          heads with more than 16 rows (group_size x query_tokens).
//   kiln_decodeattn_merge  grid (batch * q_heads): one block of kMergeThreads threads per row,
//                          merges the partials into out (only when num_splits > 1).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "decodeattn/decodeattn.cuh"
#include "decodeattn/launch.h"
#include "decodeattn/params.h"

#if !defined(KILN_CONST_HEAD_DIM) || !defined(KILN_CONST_DTYPE)
#error \
    "decodeattn.cu is compiled by kiln build, which defines KILN_CONST_HEAD_DIM and KILN_CONST_DTYPE"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "decodeattn needs sm_80 or newer (mma.sync bf16, cp.async)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
constexpr int kHeadDim = KILN_CONST_HEAD_DIM;

static_assert(std::is_same_v<Dtype, __half> || std::is_same_v<Dtype, __nv_bfloat16>,
              "decodeattn: dtype must be fp16 or bf16");
static_assert(kHeadDim == 64 || kHeadDim == 128, "decodeattn: head_dim must be 64 or 128");
static_assert(kiln::decodeattn::sharedBytes(kHeadDim) <= 99 * 1024,
              "decodeattn: shared memory must fit the smallest per-block limit (sm_86/89/120)");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::decodeattn::kThreads,
                                             kiln::decodeattn::blocksPerSm(kHeadDim, 1))
    kiln_decodeattn(const kiln::decodeattn::DecodeAttentionParams params) {
  extern __shared__ __align__(16) unsigned char smem[];
  kiln::decodeattn::decodeAttention<Dtype, kHeadDim, 1>(params, smem);
}

extern "C" __global__ void __launch_bounds__(kiln::decodeattn::kThreads,
                                             kiln::decodeattn::blocksPerSm(kHeadDim, 2))
    kiln_decodeattn_rows32(const kiln::decodeattn::DecodeAttentionParams params) {
  extern __shared__ __align__(16) unsigned char smem[];
  kiln::decodeattn::decodeAttention<Dtype, kHeadDim, 2>(params, smem);
}

extern "C" __global__ void __launch_bounds__(kiln::decodeattn::kMergeThreads)
    kiln_decodeattn_merge(const kiln::decodeattn::DecodeAttentionParams params) {
  kiln::decodeattn::mergeSplits<Dtype, kHeadDim>(params);
}
