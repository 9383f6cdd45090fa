// The w4a16 translation unit: one variant per compile, its tile, group size, zero-point form and
// dtype baked in by `kiln build` from kiln.toml (-DKILN_CONST_TILE_M=16 -DKILN_CONST_GROUP_SIZE=128
// -DKILN_CONST_ZERO_POINT=0 -DKILN_CONST_DTYPE=__half ...). Grid, block and shared memory come from
// launch.h (the runner computes the same shapes from the same functions).
//
//   kiln_w4a16_gemm            y (splits == 1) or the split-K partials = x . dequant(W)^T (+ bias)
//   kiln_w4a16_reduce          y = sum of the partials (+ bias), a programmatic dependent of gemm
//   kiln_w4a16_repack_weights  checkpoint qweight -> kiln's packed weights (once, at load)
//   kiln_w4a16_repack_scales   checkpoint scales (and qzeros) -> pair-ordered dtype scales (zeros)
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "w4a16/launch.h"
#include "w4a16/params.h"
#include "w4a16/w4a16.cuh"

#if !defined(KILN_CONST_TILE_M) || !defined(KILN_CONST_GROUP_SIZE) || \
    !defined(KILN_CONST_ZERO_POINT) || !defined(KILN_CONST_DTYPE)
#error \
    "w4a16.cu is compiled by kiln build, which defines KILN_CONST_{TILE_M,GROUP_SIZE,ZERO_POINT,DTYPE}"
#endif

#if defined(KILN_TARGET_SM)
static_assert(KILN_TARGET_SM >= 80, "w4a16 needs sm_80 or newer (mma.sync bf16, cp.async)");
#endif

namespace {

using Dtype = KILN_CONST_DTYPE;
constexpr int kTileM = KILN_CONST_TILE_M;
constexpr int kGroup = KILN_CONST_GROUP_SIZE;
constexpr bool kZeroPoint = KILN_CONST_ZERO_POINT != 0;
constexpr kiln::w4a16::TileConfig kTile = kiln::w4a16::tileConfig(kTileM);

static_assert(std::is_same_v<Dtype, __half> || std::is_same_v<Dtype, __nv_bfloat16>,
              "w4a16: dtype must be fp16 or bf16");
static_assert(kTile.valid, "w4a16: tile_m must be one of launch.h's tiles (8, 16, 64, 128)");
static_assert(kGroup > 0 && kGroup % kiln::w4a16::kChunkK == 0,
              "w4a16: group_size must be a positive multiple of 64");

}  // namespace

extern "C" __global__ void __launch_bounds__(kTile.threads, kTile.blocks_per_sm)
    kiln_w4a16_gemm(const kiln::w4a16::GemmParams params) {
  if constexpr (kTile.gemv) {
    kiln::w4a16::gemv<Dtype, kTileM, kGroup, kZeroPoint>(params);
  } else {
    kiln::w4a16::gemm<Dtype, kTileM, kGroup, kZeroPoint>(params);
  }
}

extern "C" __global__ void __launch_bounds__(kiln::w4a16::kReduceThreads)
    kiln_w4a16_reduce(const kiln::w4a16::GemmParams params) {
  kiln::w4a16::reduce<Dtype>(params);
}

extern "C" __global__ void __launch_bounds__(kiln::w4a16::kRepackThreads)
    kiln_w4a16_repack_weights(const kiln::w4a16::RepackParams params) {
  kiln::w4a16::repackWeights(params);
}

extern "C" __global__ void __launch_bounds__(kiln::w4a16::kRepackThreads)
    kiln_w4a16_repack_scales(const kiln::w4a16::RepackParams params) {
  kiln::w4a16::repackScales<Dtype>(params);
}
