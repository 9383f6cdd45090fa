// The decoderops translation unit: one variant per compile, its dtype baked in by `kiln build` from
// kiln.toml (-DKILN_CONST_DTYPE=__nv_bfloat16, __half or float). Each entry takes its parameter
// struct by value (params.h); grids and blocks come from launch.h (the runner computes the same
// shapes from the same functions).
//
//   kiln_embed     out[t, :] = table[ids[t], :] (a zero row for an id outside [0, rows))
//   kiln_silu_mul  out[t, i] = silu(in[t, i]) * in[t, width + i]
//   kiln_argmax    out[r] = the first index of the maximum of x[r, :] (NaN the maximum)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "decoderops/decoderops.cuh"
#include "decoderops/launch.h"
#include "decoderops/params.h"

#if !defined(KILN_CONST_DTYPE)
#error "decoderops.cu is compiled by kiln build, which defines KILN_CONST_DTYPE"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "decoderops needs sm_80 or newer (bf16, max.NaN)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
static_assert(kiln::decoderops::kIsElement<Dtype>, "decoderops: dtype must be fp16, bf16 or fp32");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::decoderops::kElementwiseThreads)
    kiln_embed(const kiln::decoderops::EmbedParams params) {
  kiln::decoderops::embedBlock(params);
}

// At most 64 registers a thread (launch.h, kElementwiseMinBlocks).
extern "C" __global__ void __launch_bounds__(kiln::decoderops::kElementwiseThreads,
                                             kiln::decoderops::kElementwiseMinBlocks)
    kiln_silu_mul(const kiln::decoderops::SiluMulParams params) {
  kiln::decoderops::siluMulBlock<Dtype>(params);
}

extern "C" __global__ void __launch_bounds__(kiln::decoderops::kArgmaxMaxThreads)
    kiln_argmax(const kiln::decoderops::ArgmaxParams params) {
  kiln::decoderops::argmaxBlock<Dtype>(params);
}
