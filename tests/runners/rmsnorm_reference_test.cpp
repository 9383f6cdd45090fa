// The rmsnorm float64 reference and its 16-bit conversions, on hand-computed cases.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "rmsnorm/reference.h"

namespace kiln::rmsnorm::reference {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;

TEST(RmsnormReferenceConvert, ExactValues) {
  EXPECT_EQ(roundToBits(1.0, kF16), 0x3c00);
  EXPECT_EQ(roundToBits(-2.0, kF16), 0xc000);
  EXPECT_EQ(roundToBits(0.5, kF16), 0x3800);
  EXPECT_EQ(roundToBits(65504.0, kF16), 0x7bff);               // largest finite
  EXPECT_EQ(roundToBits(std::ldexp(1.0, -14), kF16), 0x0400);  // smallest normal
  EXPECT_EQ(roundToBits(std::ldexp(1.0, -24), kF16), 0x0001);  // smallest subnormal
  EXPECT_EQ(roundToBits(1.0, kBF16), 0x3f80);
  EXPECT_EQ(roundToBits(-2.0, kBF16), 0xc000);
  EXPECT_EQ(roundToBits(3.0, kBF16), 0x4040);
  EXPECT_EQ(roundToBits(std::ldexp(1.0, -126), kBF16), 0x0080);
  EXPECT_EQ(roundToBits(std::ldexp(1.0, -133), kBF16), 0x0001);
  EXPECT_EQ(roundToBits(0.0, kF16), 0x0000);
  EXPECT_EQ(roundToBits(-0.0, kBF16), 0x8000);
}

TEST(RmsnormReferenceConvert, TiesRoundToEven) {
  // fp16 near 1: spacing 2^-10. 1 + 2^-11 is halfway between 1 (even) and 1 + 2^-10 (odd).
  EXPECT_EQ(roundToBits(1.0 + std::ldexp(1.0, -11), kF16), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  EXPECT_EQ(roundToBits(1.0 + 3 * std::ldexp(1.0, -11), kF16), 0x3c02);
  // Just above a tie rounds up.
  EXPECT_EQ(roundToBits(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30), kF16), 0x3c01);
  // bf16 near 1: spacing 2^-7.
  EXPECT_EQ(roundToBits(1.0 + std::ldexp(1.0, -8), kBF16), 0x3f80);
  EXPECT_EQ(roundToBits(1.0 + 3 * std::ldexp(1.0, -8), kBF16), 0x3f82);
  EXPECT_EQ(roundToBits(-(1.0 + 3 * std::ldexp(1.0, -8)), kBF16), 0xbf82);
  // A tie that carries into the exponent: 2 - 2^-8 is halfway between 2 - 2^-7 (odd) and 2.
  EXPECT_EQ(roundToBits(2.0 - std::ldexp(1.0, -8), kBF16), 0x4000);
  // Subnormal tie: half the smallest fp16 subnormal rounds to zero (even), 1.5x to 2 units.
  EXPECT_EQ(roundToBits(std::ldexp(1.0, -25), kF16), 0x0000);
  EXPECT_EQ(roundToBits(3 * std::ldexp(1.0, -25), kF16), 0x0002);
}

TEST(RmsnormReferenceConvert, OverflowAndSpecials) {
  EXPECT_EQ(roundToBits(65519.0, kF16), 0x7bff);  // below the tie: largest finite
  EXPECT_EQ(roundToBits(65520.0, kF16), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(roundToBits(-1e6, kF16), 0xfc00);
  EXPECT_EQ(roundToBits(1e39, kBF16), 0x7f80);
  EXPECT_EQ(roundToBits(std::numeric_limits<double>::infinity(), kF16), 0x7c00);
  EXPECT_EQ(roundToBits(std::numeric_limits<double>::quiet_NaN(), kF16), 0x7e00);
  EXPECT_EQ(roundToBits(std::numeric_limits<double>::quiet_NaN(), kBF16), 0x7fc0);
  EXPECT_TRUE(std::isnan(bitsToDouble(0xffff, kF16)));
  EXPECT_TRUE(std::isnan(bitsToDouble(0xffff, kBF16)));
  EXPECT_EQ(bitsToDouble(0xfc00, kF16), -std::numeric_limits<double>::infinity());
}

TEST(RmsnormReferenceConvert, EveryFinitePatternRoundTrips) {
  for (Format f : {kF16, kBF16}) {
    for (std::uint32_t b = 0; b < (1u << 16); ++b) {
      const double v = bitsToDouble(static_cast<std::uint16_t>(b), f);
      if (std::isnan(v)) continue;
      ASSERT_EQ(roundToBits(v, f), b) << formatName(f) << " " << b;
    }
  }
}

TEST(RmsnormReferenceConvert, BfloatMatchesTruncatedFloatRounding) {
  // bf16 is the top half of an fp32: the usual bit trick (add 0x7fff + lsb, truncate) is RNE.
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float v = dist(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
    ASSERT_EQ(roundToBits(v, kBF16), static_cast<std::uint16_t>(rounded >> 16)) << v;
  }
}

std::vector<std::uint16_t> bits(Format f, std::initializer_list<double> values) {
  std::vector<std::uint16_t> out;
  for (double v : values) {
    out.push_back(roundToBits(v, f));
    EXPECT_EQ(bitsToDouble(out.back(), f), v)
        << "test value " << v << " not exact in " << formatName(f);
  }
  return out;
}

TEST(RmsnormReference, PlainHandComputed) {
  // Row 0: x = (3, 4, 0, 0): mean(x^2) = 25 / 4, rms = 2.5 (eps 0 for exact numbers).
  // Row 1: x = (1, -1, 1, -1), eps 0: rms 1, out = x * w.
  for (Format f : {kF16, kBF16}) {
    const auto x = bits(f, {3, 4, 0, 0, 1, -1, 1, -1});
    const auto w = bits(f, {1, 2, 3, 4});
    double out[8];
    rmsnorm(f, 2, 4, 0.0, x.data(), w.data(), out);
    const double expected[8] = {1.2, 3.2, 0, 0, 1, -2, 3, -4};
    for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(out[i], expected[i]) << formatName(f) << " " << i;
  }
}

TEST(RmsnormReference, EpsAddsToTheMeanSquare) {
  // x = 1 everywhere, eps = 3: rsqrt(1 + 3) = 0.5.
  const auto x = bits(kBF16, {1, 1, 1, 1});
  const auto w = bits(kBF16, {1, -1, 0.5, 2});
  double out[4];
  rmsnorm(kBF16, 1, 4, 3.0, x.data(), w.data(), out);
  EXPECT_DOUBLE_EQ(out[0], 0.5);
  EXPECT_DOUBLE_EQ(out[1], -0.5);
  EXPECT_DOUBLE_EQ(out[2], 0.25);
  EXPECT_DOUBLE_EQ(out[3], 1.0);
}

TEST(RmsnormReference, FusedNormalizesTheRoundedResidual) {
  // bf16: 1 + 2^-8 is a tie and rounds to 1, so the stored residual is exactly (1, 1, 1, 1) and
  // the output is the weight over sqrt(1 + eps); without the rounding row 0's mean would differ.
  const double tiny = std::ldexp(1.0, -8);
  const auto x = bits(kBF16, {1, 1, 0.5, 2});
  const auto r = bits(kBF16, {tiny, 0, 0.5, -1});
  const auto w = bits(kBF16, {1, 2, 3, 4});
  std::vector<std::uint16_t> residual_out(4);
  double out[4];
  addRmsnorm(kBF16, 1, 4, 1.0, x.data(), r.data(), w.data(), residual_out.data(), out);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(residual_out[i], 0x3f80) << i;
  const double inv = 1.0 / std::sqrt(2.0);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(out[i], (i + 1) * inv) << i;
}

TEST(RmsnormReference, FusedMayUpdateResidualInPlace) {
  auto x = bits(kF16, {1, 2, 3, 4});
  auto r = bits(kF16, {2, 2, 1, 0});  // sums (3, 4, 4, 4): mean square 57/4
  const auto w = bits(kF16, {1, 1, 1, 1});
  double out[4];
  addRmsnorm(kF16, 1, 4, 0.0, x.data(), r.data(), w.data(), r.data(), out);
  EXPECT_EQ(bitsToDouble(r[0], kF16), 3.0);
  EXPECT_EQ(bitsToDouble(r[3], kF16), 4.0);
  EXPECT_DOUBLE_EQ(out[0], 3.0 / std::sqrt(57.0 / 4.0));
}

TEST(RmsnormReference, RelativeL2) {
  const auto got = bits(kF16, {1, 2, 2, 0});
  const double ref[4] = {1, 2, 2, 1};  // ||ref|| = sqrt(10), ||diff|| = 1
  EXPECT_DOUBLE_EQ(relativeL2(kF16, 4, got.data(), ref), 1.0 / std::sqrt(10.0));
  const std::uint16_t nan[1] = {0x7e00};
  const double one[1] = {1.0};
  EXPECT_TRUE(std::isnan(relativeL2(kF16, 1, nan, one)));
  EXPECT_FALSE(relativeL2(kF16, 1, nan, one) <= 1.0);
}

}  // namespace
}  // namespace kiln::rmsnorm::reference
