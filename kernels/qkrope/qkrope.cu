// The qkrope translation unit: one variant per compile, its head dim and dtype baked in by
// `kiln build` from kiln.toml (-DKILN_CONST_HEAD_DIM=128 -DKILN_CONST_DTYPE=__nv_bfloat16 ...).
// The entry takes one QkRopeParams by value; grid and block come from launch.h (the runner
// computes the same shape from the same function).
//
//   kiln_qkrope   per token t and head: q = rope(rmsnorm(q) * q_norm_weight) -> q_out[t];
//                 k = rope(rmsnorm(k) * k_norm_weight) -> k_cache[slot_mapping[t]] (and k_out[t]);
//                 v -> v_cache[slot_mapping[t]] (and v_out[t])
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "qkrope/launch.h"
#include "qkrope/params.h"
#include "qkrope/qkrope.cuh"

#if !defined(KILN_CONST_HEAD_DIM) || !defined(KILN_CONST_DTYPE)
#error "qkrope.cu is compiled by kiln build, which defines KILN_CONST_HEAD_DIM and KILN_CONST_DTYPE"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "qkrope needs sm_80 or newer (bf16 conversions)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
constexpr int kHeadDim = KILN_CONST_HEAD_DIM;

static_assert(std::is_same_v<Dtype, __half> || std::is_same_v<Dtype, __nv_bfloat16>,
              "qkrope: dtype must be fp16 or bf16");
static_assert(kiln::qkrope::validHeadDim(kHeadDim) && kHeadDim / 2 <= kiln::qkrope::kMaxRotaryPairs,
              "qkrope: head_dim must be a multiple of 16 with a power-of-two thread count per "
              "head (16, 32, 64, 128, 256)");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::qkrope::kMaxBlockThreads)
    kiln_qkrope(const kiln::qkrope::QkRopeParams params) {
  kiln::qkrope::qkropeBlock<Dtype, kHeadDim>(params);
}
