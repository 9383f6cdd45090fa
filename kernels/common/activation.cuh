// SwiGLU's activation, silu(gate) * up, as every kiln kernel that forms it computes it: decoderops'
// silu_mul writes it, gemv's gated input reads it into the product, and the two agree bit for bit
// because this is the one definition.
#pragma once

#include "common/dtype.cuh"
#include "common/vec16.cuh"

namespace kiln::common {

// silu(g) * u as torch's F.silu writes silu in fp32 (g / (1 + exp(-g)), precise expf and IEEE
// division: no fast-math), then the product; one rounding to the 16-bit type after this.
__device__ __forceinline__ float siluMul(float g, float u) {
  return (g / (1.0f + expf(-g))) * u;
}

// Eight fp16 / bf16 gates and ups -> eight silu(g) * u, each rounded once to nearest even.
template <typename T>
__device__ __forceinline__ Vec16 siluMul8(const Vec16& g, const Vec16& u) {
  static_assert(kIsHalf16<T>, "siluMul8: fp16 or bf16 only");
  float fg[8], fu[8], y[8];
  unpack8<T>(g, fg);
  unpack8<T>(u, fu);
#pragma unroll
  for (int e = 0; e < 8; ++e) y[e] = siluMul(fg[e], fu[e]);
  return pack8<T>(y);
}

}  // namespace kiln::common
