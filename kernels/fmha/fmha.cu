// The fmha translation unit: one variant per compile, its head dim, dtype and mask baked in by
// `kiln build` from kiln.toml (-DKILN_CONST_HEAD_DIM=128 -DKILN_CONST_DTYPE=__nv_bfloat16
// -DKILN_CONST_DTYPE_BF16=1 -DKILN_CONST_MASK_CAUSAL=1 ...), for sm_90a only.
//
//   kiln_fmha   grid (m_blocks, q_heads, batch), kThreads threads, sharedBytes(head_dim) dynamic
//               shared memory; one FmhaParams by value (__grid_constant__: the TMA unit reads the
//               tensor maps in it where they are).
#include "fmha/launch.h"
#include "fmha/params.h"
#include "fmha/sm90_tma_wgmma.cuh"

#if !defined(KILN_CONST_HEAD_DIM) || !defined(KILN_CONST_DTYPE)
#error "fmha.cu is compiled by kiln build, which defines KILN_CONST_HEAD_DIM and KILN_CONST_DTYPE"
#endif
#if !defined(KILN_CONST_MASK_FULL) && !defined(KILN_CONST_MASK_CAUSAL)
#error "fmha.cu: kiln build defines KILN_CONST_MASK_FULL or KILN_CONST_MASK_CAUSAL"
#endif
#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM == 90, "fmha: the TMA + wgmma kernel is for sm_90a only");
#endif

namespace {

#if defined(KILN_CONST_DTYPE_BF16)
using Element = cutlass::bfloat16_t;
#elif defined(KILN_CONST_DTYPE_FP16)
using Element = cutlass::half_t;
#else
#error "fmha: dtype must be fp16 or bf16"
#endif

constexpr int kHeadDim = KILN_CONST_HEAD_DIM;
#if defined(KILN_CONST_MASK_CAUSAL)
constexpr bool kCausal = true;
#else
constexpr bool kCausal = false;
#endif

static_assert(kHeadDim == 64 || kHeadDim == 128, "fmha: head_dim must be 64 or 128");
static_assert(kiln::fmha::sharedBytes(kHeadDim, kCausal) <= 227 * 1024,
              "fmha: shared memory must fit an sm_90 block (227 KiB)");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::fmha::kThreads, 1)
    kiln_fmha(const __grid_constant__ kiln::fmha::FmhaParams params) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  kiln::fmha::fmhaForward<Element, kHeadDim, kCausal>(params, smem);
#endif
}
