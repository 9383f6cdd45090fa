// Host reference for the rmsnorm group, in float64, for the GPU numerics test and the benchmark's
// checks. Header-only, no CUDA headers: 16-bit values travel as their bit patterns (uint16_t),
// through the exact codec of common/bits16.h (round to nearest even, as the GPU's _rn conversions
// do).
//
// The reference mirrors the kernel's one deliberate rounding: the fused op stores x + residual
// rounded to the dtype and normalizes those rounded values, so the reference rounds the sum too
// (and the stored residual must then match bit for bit). The output is returned unrounded, so the
// error measured against it includes the kernel's final rounding.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/bits16.h"

namespace kiln::rmsnorm::reference {

// The 16-bit codec (common/bits16.h), under the names this reference's callers use.
using common::Decoder;
using common::Format;
using common::FormatLayout;
using common::formatName;
using common::layoutOf;
using common::roundToBits;
using common::roundToFormat;
using common::toDouble;

// out[r, i] = x[r, i] / sqrt(mean_i(x[r, i]^2) + eps) * weight[i], unrounded.
// x: [rows, hidden], weight: [hidden], out: [rows, hidden].
inline void rmsnorm(Format f, std::int64_t rows, std::int64_t hidden, double eps,
                    const std::uint16_t* x, const std::uint16_t* weight, double* out) {
  const Decoder dec(f);
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::uint16_t* xr = x + r * hidden;
    double sum_sq = 0.0;
    for (std::int64_t i = 0; i < hidden; ++i) sum_sq += dec(xr[i]) * dec(xr[i]);
    const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(hidden) + eps);
    for (std::int64_t i = 0; i < hidden; ++i)
      out[r * hidden + i] = dec(xr[i]) * inv_rms * dec(weight[i]);
  }
}

// residual_out[r, i] = round(x[r, i] + residual[r, i]) (the value the kernel stores in place);
// out = rmsnorm of residual_out, unrounded. residual_out may be `residual` itself.
inline void addRmsnorm(Format f, std::int64_t rows, std::int64_t hidden, double eps,
                       const std::uint16_t* x, const std::uint16_t* residual,
                       const std::uint16_t* weight, std::uint16_t* residual_out, double* out) {
  const Decoder dec(f);
  for (std::int64_t n = 0; n < rows * hidden; ++n) {
    residual_out[n] = roundToBits(dec(x[n]) + dec(residual[n]), f);
  }
  rmsnorm(f, rows, hidden, eps, residual_out, weight, out);
}

// ||got - ref||_2 / ||ref||_2 over n elements (||got - ref||_2 when ref is all zero). NaN in
// `got` gives NaN, which fails every `<= bound` check.
inline double relativeL2(Format f, std::size_t n, const std::uint16_t* got, const double* ref) {
  const Decoder dec(f);
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = dec(got[i]) - ref[i];
    diff += d * d;
    norm += ref[i] * ref[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace kiln::rmsnorm::reference
