// The rotary frequencies, as Hugging Face transformers computes them for the default rope type
// (`_compute_default_rope_parameters`): inv_freq[i] = 1 / theta^(2i / rotary_dim), every step in
// fp32: the exponent fl32(fl32(2i) / rotary_dim), the power in fp32 (computed here in float64 and
// rounded once, i.e. correctly rounded; torch's fp32 pow is within an ulp of it), the reciprocal an
// fp32 division. The runner computes the table on the host and passes it in QkRopeParams, and the
// float64 reference uses the same function, so the kernel's and the reference's fp32 angles
// (fl32(fl32(position) * inv_freq[i])) are the same numbers. Host only, no CUDA headers.
#pragma once

#include <cmath>

namespace kiln::qkrope {

inline float invFreq(float theta, int rotary_dim, int i) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
  const float power =
      static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
  return 1.0f / power;
}

}  // namespace kiln::qkrope
