// The gemv translation unit: one variant per compile, its dtype baked in by `kiln build` from
// kiln.toml (-DKILN_CONST_DTYPE=__nv_bfloat16 or __half). One entry; it takes GemvParams by value
// (params.h).
//
//   kiln_gemv   y[i, j] = sum_k x[i, k] w[j, k] (+ bias[j]) for i < m <= 8, j < n
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "gemv/gemv.cuh"
#include "gemv/launch.h"
#include "gemv/params.h"

#if !defined(KILN_CONST_DTYPE)
#error "gemv.cu is compiled by kiln build, which defines KILN_CONST_DTYPE"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "gemv needs sm_80 or newer (bf16)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
static_assert(kiln::common::kIsHalf16<Dtype>, "gemv: dtype must be fp16 or bf16");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::gemv::kThreads)
    kiln_gemv(const kiln::gemv::GemvParams params) {
  kiln::gemv::gemvBlock<Dtype>(params);
}
