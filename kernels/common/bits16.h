// The two 16-bit activation formats as the host references see them: values travel as their bit
// patterns (uint16_t), decoded exactly and rounded to nearest even exactly as the GPU's _rn
// conversions do. One codec for every group's reference.h and GPU numerics test. Header-only, host
// only, no CUDA headers.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace kiln::common {

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

// The exact value of a 16-bit pattern (NaN patterns decode to a quiet NaN).
inline double toDouble(std::uint16_t bits, Format f) {
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

// `v` rounded to format `f`, as a double.
inline double roundToFormat(double v, Format f) {
  return toDouble(roundToBits(v, f), f);
}

// A random finite value of format `f` with magnitude in [2^lo, 2^(hi + 1)): exponent, mantissa and
// (when allow_negative) sign drawn from one rng.next() (any generator of 64-bit values), so every
// mantissa bit is exercised and nothing is rounded on the host. lo .. hi must be normal exponents
// of the format.
template <typename Rng>
std::uint16_t randomBits(Rng& rng, Format f, int lo, int hi, bool allow_negative = true) {
  const FormatLayout l = layoutOf(f);
  const std::uint64_t r = rng.next();
  const int exponent = lo + static_cast<int>(r % static_cast<std::uint64_t>(hi - lo + 1));
  const unsigned mantissa = static_cast<unsigned>((r >> 16) & ((1u << l.mantissa_bits) - 1u));
  const unsigned sign = (allow_negative && ((r >> 40) & 1u)) ? 0x8000u : 0u;
  return static_cast<std::uint16_t>(
      sign | (static_cast<unsigned>(exponent + l.bias) << l.mantissa_bits) | mantissa);
}

// toDouble for every bit pattern, precomputed: the references and the GPU tests decode millions
// of elements, a table lookup each instead of ldexp.
class Decoder {
 public:
  explicit Decoder(Format f) : table_(1u << 16) {
    for (std::uint32_t bits = 0; bits < (1u << 16); ++bits) {
      table_[bits] = toDouble(static_cast<std::uint16_t>(bits), f);
    }
  }
  double operator()(std::uint16_t bits) const { return table_[bits]; }
  std::vector<double> operator()(const std::vector<std::uint16_t>& bits) const {
    std::vector<double> values(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) values[i] = table_[bits[i]];
    return values;
  }

 private:
  std::vector<double> table_;
};

}  // namespace kiln::common
