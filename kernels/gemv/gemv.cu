// The gemv translation unit: one variant per compile, its dtype baked in by `kiln build` from
// kiln.toml (-DKILN_CONST_DTYPE=__nv_bfloat16 or __half). One entry per token bucket of launch.h;
// each takes GemvParams by value (params.h).
//
//   kiln_gemv_m{1,2,4,8}   y[i, j] = sum_k x[i, k] w[j, k] (+ bias[j]) for i < m <= bucket, j < n
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

#define KILN_GEMV_ENTRY(M)                                                            \
  extern "C" __global__ void __launch_bounds__(kiln::gemv::kThreads)                  \
      kiln_gemv_m##M(const kiln::gemv::GemvParams params) {                           \
    static_assert(kiln::gemv::kBuckets[kiln::gemv::bucketIndex(M)] == M, "a bucket"); \
    kiln::gemv::gemvBlock<Dtype, M>(params);                                          \
  }

KILN_GEMV_ENTRY(1)
KILN_GEMV_ENTRY(2)
KILN_GEMV_ENTRY(4)
KILN_GEMV_ENTRY(8)
