// The moe translation unit: one variant per compile, its dtype baked in by `kiln build` from
// kiln.toml (-DKILN_CONST_DTYPE=__nv_bfloat16). Grids, blocks and shared memory come from launch.h
// (the runner computes the same shapes from the same functions).
//
//   kiln_moe_route     router logits -> each token's top-k experts and weights
//   kiln_moe_align     per-expert row counts and offsets, the slot of every expert row
//   kiln_moe_fc1       act = SiLU(x . gate^T) * (x . up^T) per expert row (grouped GEMM)
//   kiln_moe_fc2       down[slot] = act . w2^T per expert row (grouped GEMM)
//   kiln_moe_finalize  y = sum of each token's k rows of down, weighted (+ residual)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "moe/launch.h"
#include "moe/moe.cuh"
#include "moe/params.h"

#if !defined(KILN_CONST_DTYPE)
#error "moe.cu is compiled by kiln build, which defines KILN_CONST_DTYPE"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "moe needs sm_80 or newer (mma.sync bf16, cp.async)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
static_assert(std::is_same_v<Dtype, __half> || std::is_same_v<Dtype, __nv_bfloat16>,
              "moe: dtype must be fp16 or bf16");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::moe::kRouteWarps* kiln::moe::kWarp)
    kiln_moe_route(const kiln::moe::MoeParams params) {
  kiln::moe::route<Dtype>(params);
}

extern "C" __global__ void __launch_bounds__(kiln::moe::kAlignThreads)
    kiln_moe_align(const kiln::moe::MoeParams params) {
  kiln::moe::align(params);
}

extern "C" __global__ void __launch_bounds__(kiln::moe::kGemmThreads)
    kiln_moe_fc1(const kiln::moe::MoeParams params) {
  extern __shared__ __align__(128) unsigned char shared[];
  kiln::moe::groupedGemm<Dtype, true>(params, shared);
}

extern "C" __global__ void __launch_bounds__(kiln::moe::kGemmThreads)
    kiln_moe_fc2(const kiln::moe::MoeParams params) {
  extern __shared__ __align__(128) unsigned char shared[];
  kiln::moe::groupedGemm<Dtype, false>(params, shared);
}

extern "C" __global__ void __launch_bounds__(kiln::moe::kFinalizeThreads)
    kiln_moe_finalize(const kiln::moe::MoeParams params) {
  kiln::moe::finalize<Dtype>(params);
}
