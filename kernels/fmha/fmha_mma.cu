// The fmha portable translation unit: one variant per compile (head dim, dtype, mask baked by
// `kiln build` from kiln.toml), for every SM from sm_80 (mma.sync m16n8k16, ldmatrix, cp.async).
//
//   kiln_fmha_mma         grid (m_blocks, kv_heads, batch), threads(prefillShape(head_dim))
//                         threads, sharedBytes(head_dim, prefillShape(head_dim)) dynamic shared
//                         memory; one FmhaMmaParams by value (m_blocks in rows of
//                         blockM(prefillShape(head_dim)))
//   kiln_fmha_mma_rows64  the same with the kSmall shape (64 rows per block)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "fmha/launch.h"
#include "fmha/mma_attention.cuh"
#include "fmha/params.h"

#if !defined(KILN_CONST_HEAD_DIM) || !defined(KILN_CONST_DTYPE)
#error \
    "fmha_mma.cu is compiled by kiln build, which defines KILN_CONST_HEAD_DIM and KILN_CONST_DTYPE"
#endif
#if !defined(KILN_CONST_MASK_FULL) && !defined(KILN_CONST_MASK_CAUSAL)
#error "fmha_mma.cu: kiln build defines KILN_CONST_MASK_FULL or KILN_CONST_MASK_CAUSAL"
#endif
#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80,
              "fmha mma kernel needs sm_80 or newer (mma.sync bf16, cp.async)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
constexpr int kHeadDim = KILN_CONST_HEAD_DIM;
#if defined(KILN_CONST_MASK_CAUSAL)
constexpr bool kCausal = true;
#else
constexpr bool kCausal = false;
#endif

static_assert(std::is_same_v<Dtype, __half> || std::is_same_v<Dtype, __nv_bfloat16>,
              "fmha: dtype must be fp16 or bf16");
static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256,
              "fmha mma kernel: head_dim must be 64, 128 or 256");
constexpr kiln::fmha::mma::Shape kPrefill = kiln::fmha::mma::prefillShape(kHeadDim);
constexpr kiln::fmha::mma::Shape kSmall = kiln::fmha::mma::kSmall;
static_assert(kiln::fmha::mma::sharedBytes(kHeadDim, kPrefill) <= 99 * 1024 &&
                  kiln::fmha::mma::sharedBytes(kHeadDim, kSmall) <= 99 * 1024,
              "fmha: shared memory must fit the smallest per-block limit (sm_86/89/120)");

}  // namespace

extern "C" __global__ void __launch_bounds__(kiln::fmha::mma::threads(kPrefill),
                                             kiln::fmha::mma::minBlocksPerSm(kHeadDim, kPrefill))
    kiln_fmha_mma(const kiln::fmha::FmhaMmaParams params) {
  extern __shared__ __align__(128) unsigned char smem[];
  kiln::fmha::mma::attention<Dtype, kHeadDim, kCausal, kPrefill.warps, kPrefill.m_tiles>(params,
                                                                                         smem);
}

extern "C" __global__ void __launch_bounds__(kiln::fmha::mma::threads(kSmall),
                                             kiln::fmha::mma::minBlocksPerSm(kHeadDim, kSmall))
    kiln_fmha_mma_rows64(const kiln::fmha::FmhaMmaParams params) {
  extern __shared__ __align__(128) unsigned char smem[];
  kiln::fmha::mma::attention<Dtype, kHeadDim, kCausal, kSmall.warps, kSmall.m_tiles>(params, smem);
}
