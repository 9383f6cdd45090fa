// Host reference for the gemv group, in float64, for the GPU numerics test and the CPU tests:
// y[i, j] = sum_k x[i, k] w[j, k] (+ bias[j]) as the definition states it, and the acceptance
// bound of the kernel's fp32 accumulation and single rounding. Header-only, no CUDA headers:
// fp16 / bf16 values travel as their bit patterns (uint16_t, decoded exactly by common/bits16.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/bits16.h"

namespace kiln::gemv::reference {

using common::Decoder;
using common::Format;
using common::formatName;
using common::roundToBits;
using common::toDouble;

// y[i, j] (float64) for i < m, j < n; x [m, ldx], w [n, k], bias [n] or null (bit patterns of
// `format`). Also the sum of |x w| terms per output (the scale of the fp32 accumulation error).
struct Result {
  std::vector<double> y;      // [m, n]
  std::vector<double> scale;  // [m, n]: sum_k |x[i, k] w[j, k]| + |bias[j]|
};

inline Result gemv(Format format, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t ldx,
                   const std::uint16_t* x, const std::uint16_t* w, const std::uint16_t* bias) {
  const Decoder decode(format);
  Result r;
  r.y.assign(static_cast<std::size_t>(m * n), 0.0);
  r.scale.assign(static_cast<std::size_t>(m * n), 0.0);
  std::vector<double> xd(static_cast<std::size_t>(m * k));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t c = 0; c < k; ++c) xd[i * k + c] = decode(x[i * ldx + c]);
  std::vector<double> wrow(static_cast<std::size_t>(k));
  for (std::int64_t j = 0; j < n; ++j) {
    for (std::int64_t c = 0; c < k; ++c) wrow[c] = decode(w[j * k + c]);
    const double b = bias != nullptr ? decode(bias[j]) : 0.0;
    for (std::int64_t i = 0; i < m; ++i) {
      double sum = 0.0, abs_sum = 0.0;
      for (std::int64_t c = 0; c < k; ++c) {
        const double term = xd[i * k + c] * wrow[c];
        sum += term;
        abs_sum += std::fabs(term);
      }
      r.y[i * n + j] = sum + b;
      r.scale[i * n + j] = abs_sum + std::fabs(b);
    }
  }
  return r;
}

// The acceptance bound of one output: the kernel sums on the tensor cores, which add each chunk
// of 16 products (exact) to an fp32 accumulator with the terms aligned to the largest and the bits
// shifted out truncated, the result rounded toward zero (Fasi, Higham, Mikaitis and Pranesh,
// "Numerical behavior of NVIDIA tensor cores", 2021: the internal sum of 4 to 16 terms errs by
// about one ulp of the largest). Counted here as two errors of 2^-23 relative to `scale` (sum of
// |terms|) per chunk, k / 16 chunks, plus the warps' 3 fp32 additions and 38 of headroom. Then one
// rounding to the output format of `output_mantissa_bits` (0: float32 output, no rounding): half
// an ulp, at most |exact| 2^-(bits + 1), plus half the format's smallest subnormal (2^-25 covers
// fp16 and bf16).
inline double tolerance(std::int64_t k, double scale, double exact, int output_mantissa_bits) {
  const double accumulate = (static_cast<double>(k) / 8.0 + 41.0) * std::ldexp(1.0, -23) * scale;
  if (output_mantissa_bits == 0) return accumulate;
  return accumulate * 1.01 + std::fabs(exact) * std::ldexp(1.0, -(output_mantissa_bits + 1)) +
         std::ldexp(1.0, -25);
}

}  // namespace kiln::gemv::reference
