// The rmsnorm translation unit: one variant per compile, its hidden size and dtype baked in by
// `kiln build` from kiln.toml (-DKILN_CONST_HIDDEN=4096 -DKILN_CONST_DTYPE=__nv_bfloat16 ...).
// Both entries take one RmsnormParams by value; grid and block come from launch.h (the runner
// computes the same shape from the same function).
//
//   kiln_rmsnorm      out = x * rsqrt(mean(x^2) + eps) * weight
//   kiln_add_rmsnorm  residual += x (rounded, in place); out = residual * rsqrt(...) * weight
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "rmsnorm/launch.h"
#include "rmsnorm/params.h"
#include "rmsnorm/rmsnorm.cuh"

#if !defined(KILN_CONST_HIDDEN) || !defined(KILN_CONST_DTYPE)
#error "rmsnorm.cu is compiled by kiln build, which defines KILN_CONST_HIDDEN and KILN_CONST_DTYPE"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "rmsnorm needs sm_80 or newer (bf16 conversions)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
constexpr int kHidden = KILN_CONST_HIDDEN;
constexpr kiln::rmsnorm::LaunchShape kShape =
    kiln::rmsnorm::launchShape(kHidden, static_cast<int>(sizeof(Dtype)));

static_assert(std::is_same_v<Dtype, __half> || std::is_same_v<Dtype, __nv_bfloat16>,
              "rmsnorm: dtype must be fp16 or bf16");
static_assert(kHidden > 0, "rmsnorm: hidden must be positive");
static_assert(kShape.valid,
              "rmsnorm: hidden * sizeof(dtype) must be a multiple of 512 bytes (whole warps of "
              "16-byte vectors): hidden a multiple of 256 for fp16/bf16");
static_assert(kShape.threads_per_block % 32 == 0 && kShape.threads_per_block <= 1024,
              "rmsnorm: block size must be whole warps, at most 1024 threads");

}  // namespace

extern "C" __global__ void __launch_bounds__(kShape.threads_per_block)
    kiln_rmsnorm(const kiln::rmsnorm::RmsnormParams params) {
  kiln::rmsnorm::rmsnormRows<Dtype, kHidden, false>(params);
}

extern "C" __global__ void __launch_bounds__(kShape.threads_per_block)
    kiln_add_rmsnorm(const kiln::rmsnorm::RmsnormParams params) {
  kiln::rmsnorm::rmsnormRows<Dtype, kHidden, true>(params);
}
