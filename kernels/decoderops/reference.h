// Host reference for the decoderops group, in float64, for the GPU numerics test and the CPU
// tests: the embedding gather, silu(gate) * up and argmax as their definitions state them, and
// the acceptance rule of silu_mul (one rounding). Header-only, no CUDA headers: fp16 / bf16 values
// travel as their bit patterns (uint16_t, decoded exactly by common/bits16.h), fp32 as its bit
// pattern (uint32_t).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "common/bits16.h"

namespace kiln::decoderops::reference {

// The 16-bit codec (common/bits16.h), under the names this reference's callers use.
using common::Decoder;
using common::Format;
using common::formatName;
using common::roundToBits;
using common::toDouble;

// fp32 bit patterns.
inline double fp32ToDouble(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return static_cast<double>(f);
}
inline std::uint32_t fp32Bits(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// out[t, :] = table[ids[t], :] for t < tokens, or a zero row for an id outside [0, rows): a copy
// of bit patterns (Bits: uint16_t or uint32_t), so any pattern, a NaN's payload included, is kept.
template <typename Bits>
void embed(std::int64_t tokens, std::int64_t rows, std::int64_t width, const std::int32_t* ids,
           const Bits* table, Bits* out) {
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t id = ids[t];
    Bits* dst = out + t * width;
    for (std::int64_t i = 0; i < width; ++i) {
      dst[i] = (id >= 0 && id < rows) ? table[id * width + i] : Bits{0};
    }
  }
}

// silu(g) * u = g / (1 + exp(-g)) * u, exact but for float64's roundings.
inline double siluMul(double g, double u) {
  return g / (1.0 + std::exp(-g)) * u;
}

// For g below this, exp(-g) overflows fp32 (ln(FLT_MAX) = 88.72...), so the kernel's fp32
// g / (1 + expf(-g)) is -0, as torch's F.silu computes it; the exact value, |g| e^g |u| <
// 89 * 3.0e-39 * |u|, is below 2^-117 for |u| < 16. The GPU test accepts a zero there.
inline constexpr double kSiluZeroBelow = -88.7;

// The representable value next to `bits` (a sign-magnitude float pattern: uint16_t fp16 / bf16 or
// uint32_t fp32) toward +inf (`up`) or -inf; -0 and +0 step alike.
template <typename Bits>
Bits stepToward(Bits bits, bool up) {
  constexpr Bits kSign = static_cast<Bits>(Bits{1} << (sizeof(Bits) * 8 - 1));
  const bool negative = (bits & kSign) != 0;
  if (static_cast<Bits>(bits & static_cast<Bits>(~kSign)) == 0) {
    return up ? Bits{1} : static_cast<Bits>(kSign | Bits{1});
  }
  const bool away_from_zero = negative != up;
  return static_cast<Bits>(away_from_zero ? bits + 1 : bits - 1);
}

// Whether `got` (decoded by `decode`) is fewer than `steps` values of its format from `exact`:
// stepping from got toward exact passes exact within `steps` steps, or lands on it in fewer.
// steps = 1 is one rounding (faithful): got is one of the two values of the format that bracket
// exact (exact itself, when the format has it). A NaN is never within.
template <typename Bits, typename Decode>
bool withinSteps(Bits got, double exact, int steps, Decode decode) {
  const double d = decode(got);
  if (std::isnan(d) || std::isnan(exact)) return false;
  if (d == exact) return true;
  const bool up = exact > d;
  Bits b = got;
  for (int i = 1; i <= steps; ++i) {
    b = stepToward(b, up);
    const double n = decode(b);
    if (up ? n > exact : n < exact) return true;  // got and this value bracket exact
    if (n == exact) return i < steps;             // got is i values from exact
  }
  return false;
}

// One rounding of a 16-bit output: got is a value of format f next to exact on either side.
inline bool withinOneRounding(std::uint16_t got, double exact, Format f) {
  return withinSteps(got, exact, 1, [f](std::uint16_t b) { return toDouble(b, f); });
}

// An fp32 output: fewer than kFp32Steps values from exact. The kernel's fp32 arithmetic (expf
// within 2 ulp, then an add, a division and a product each rounded to nearest) bounds its relative
// error by 2^-22 + 3 * 2^-24 = 7 * 2^-24: fewer than 7 ulps at the top of a binade, 3.5 at its
// bottom.
inline constexpr int kFp32Steps = 8;
inline bool withinFp32Steps(std::uint32_t got, double exact) {
  return withinSteps(got, exact, kFp32Steps, fp32ToDouble);
}

// torch.argmax of one row of `width` values (get(j) -> double, exact): the first NaN if the row
// has one, else the first index of the maximum (-0 == +0). width >= 1.
template <typename Get>
std::int64_t argmax(std::int64_t width, Get get) {
  for (std::int64_t j = 0; j < width; ++j) {
    if (std::isnan(get(j))) return j;
  }
  std::int64_t best = 0;
  double best_value = get(0);
  for (std::int64_t j = 1; j < width; ++j) {
    const double v = get(j);
    if (v > best_value) {
      best = j;
      best_value = v;
    }
  }
  return best;
}

}  // namespace kiln::decoderops::reference
