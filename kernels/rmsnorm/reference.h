// Host reference for the rmsnorm group, in float64, for the GPU numerics test and the benchmark's
// checks. Header-only, no CUDA headers: 16-bit values travel as their bit patterns (uint16_t), and
// the conversions below round to nearest even exactly as the GPU's _rn conversions do.
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

namespace kiln::rmsnorm::reference {

enum class Format { kFloat16, kBFloat16 };

// IEEE-style binary16 (1-5-10) and bfloat16 (1-8-7).
struct FormatLayout {
  int mantissa_bits;
  int exponent_bits;
  int bias;
  std::uint16_t quiet_nan;
};

inline constexpr FormatLayout layoutOf(Format f) {
  return f == Format::kFloat16 ? FormatLayout{10, 5, 15, 0x7e00} : FormatLayout{7, 8, 127, 0x7fc0};
}

inline constexpr const char* formatName(Format f) {
  return f == Format::kFloat16 ? "fp16" : "bf16";
}

// `v` rounded to nearest (ties to even) in format `f`: overflow goes to infinity, values below
// the smallest subnormal round to (signed) zero, NaN becomes the canonical quiet NaN.
inline std::uint16_t roundToBits(double v, Format f) {
  const FormatLayout l = layoutOf(f);
  const int emax = (1 << (l.exponent_bits - 1)) - 1;  // 15 / 127
  const int emin = 1 - emax;                          // -14 / -126
  const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const std::uint16_t inf =
      static_cast<std::uint16_t>(((1u << l.exponent_bits) - 1u) << l.mantissa_bits);
  if (std::isnan(v)) return l.quiet_nan;
  const double a = std::fabs(v);
  if (std::isinf(a)) return static_cast<std::uint16_t>(sign | inf);
  if (a == 0.0) return sign;
  int e2 = 0;
  (void)std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  int exponent = e2 - 1;     // a in [2^exponent, 2^(exponent + 1))
  const double one = std::ldexp(1.0, l.mantissa_bits);
  if (exponent < emin) {
    // Subnormal: multiples of 2^(emin - mantissa_bits). q == 2^mantissa_bits (rounded up to the
    // smallest normal) is that normal's encoding as it stands.
    const double q = std::nearbyint(std::ldexp(a, l.mantissa_bits - emin));
    return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(q));
  }
  double q = std::nearbyint(std::ldexp(a, l.mantissa_bits - exponent));  // [2^m, 2^(m+1)]
  if (q == 2.0 * one) {
    q = one;
    ++exponent;
  }
  if (exponent > emax) return static_cast<std::uint16_t>(sign | inf);
  const unsigned biased = static_cast<unsigned>(exponent + l.bias);
  return static_cast<std::uint16_t>(sign | (biased << l.mantissa_bits) |
                                    static_cast<unsigned>(q - one));
}

// The exact value of a 16-bit pattern.
inline double bitsToDouble(std::uint16_t bits, Format f) {
  const FormatLayout l = layoutOf(f);
  const unsigned exponent_mask = (1u << l.exponent_bits) - 1u;
  const unsigned exponent = (bits >> l.mantissa_bits) & exponent_mask;
  const unsigned mantissa = bits & ((1u << l.mantissa_bits) - 1u);
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == exponent_mask) {
    return mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                         : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0)
    return sign * std::ldexp(static_cast<double>(mantissa), 1 - l.bias - l.mantissa_bits);
  return sign * std::ldexp(static_cast<double>(mantissa | (1u << l.mantissa_bits)),
                           static_cast<int>(exponent) - l.bias - l.mantissa_bits);
}

inline double roundToFormat(double v, Format f) {
  return bitsToDouble(roundToBits(v, f), f);
}

// Every 16-bit pattern decoded once: the test decodes hundreds of millions of elements.
class Decoder {
 public:
  explicit Decoder(Format f) : table_(1u << 16) {
    for (std::uint32_t b = 0; b < (1u << 16); ++b)
      table_[b] = bitsToDouble(static_cast<std::uint16_t>(b), f);
  }
  double operator()(std::uint16_t bits) const { return table_[bits]; }

 private:
  std::vector<double> table_;
};

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
