// The decoderops float64 reference on hand-computed cases: the gather (out-of-range ids write
// zeros, bit patterns copied as they are), silu(g) * u at known points, the one-rounding
// acceptance rule of silu_mul (next values of fp16, bf16 and fp32 patterns), and argmax's
// first-occurrence and NaN rules (its 16-bit codec: bits16_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "decoderops/reference.h"

namespace kiln::decoderops::reference {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(DecoderopsReference, EmbedGathersRowsAndZeroesOutOfRangeIds) {
  // 3 rows of 2; ids 2, 0, -1, 3, 2147483647, 1, -2147483648.
  const std::uint16_t table[] = {0x1111, 0x1112, 0x2221, 0x2222, 0x7e01, 0xffff};
  const std::int32_t ids[] = {2, 0, -1, 3, 2147483647, 1, -2147483647 - 1};
  std::vector<std::uint16_t> out(14, 0xabcd);
  embed<std::uint16_t>(7, 3, 2, ids, table, out.data());
  const std::vector<std::uint16_t> want = {0x7e01, 0xffff, 0x1111, 0x1112, 0,      0, 0,
                                           0,      0,      0,      0x2221, 0x2222, 0, 0};
  EXPECT_EQ(out, want);  // a NaN's payload (0x7e01) and 0xffff are copied as they are
  // fp32 patterns; no rows at all: every id is out of range.
  const std::uint32_t table32[] = {0xdeadbeef, 0x7fc00001, 0x00000001, 0x80000000};
  const std::int32_t ids32[] = {1, 0};
  std::vector<std::uint32_t> out32(4, 7);
  embed<std::uint32_t>(2, 2, 2, ids32, table32, out32.data());
  EXPECT_EQ(out32, (std::vector<std::uint32_t>{0x00000001, 0x80000000, 0xdeadbeef, 0x7fc00001}));
  embed<std::uint32_t>(2, 0, 2, ids32, table32, out32.data());
  EXPECT_EQ(out32, (std::vector<std::uint32_t>{0, 0, 0, 0}));
}

TEST(DecoderopsReference, SiluMulAtKnownPoints) {
  EXPECT_EQ(siluMul(0.0, 5.0), 0.0);                                  // silu(0) = 0
  EXPECT_DOUBLE_EQ(siluMul(1.0, 1.0), 1.0 / (1.0 + std::exp(-1.0)));  // sigmoid(1) = 0.7310...
  EXPECT_NEAR(siluMul(1.0, 2.0), 1.4621171572600098, 1e-15);
  EXPECT_NEAR(siluMul(-1.0, 1.0), -0.2689414213699951, 1e-15);
  // Large g: silu(g) -> g; very negative g: -> -0 (g e^g).
  EXPECT_DOUBLE_EQ(siluMul(40.0, 0.5), 20.0);
  EXPECT_NEAR(siluMul(-40.0, 1.0), -40.0 * std::exp(-40.0), 1e-30);
  EXPECT_EQ(siluMul(-1000.0, 1.0), 0.0);  // exp(1000) overflows double: -1000 / inf = -0
  EXPECT_TRUE(std::signbit(siluMul(-1000.0, 1.0)));
  // silu(g) * u = silu(g) times u: odd in u.
  EXPECT_DOUBLE_EQ(siluMul(0.75, -3.0), -siluMul(0.75, 3.0));
}

TEST(DecoderopsReference, StepTowardWalksSignMagnitudePatterns) {
  EXPECT_EQ(stepToward<std::uint16_t>(0x3c00, true), 0x3c01);   // 1.0 up
  EXPECT_EQ(stepToward<std::uint16_t>(0x3c00, false), 0x3bff);  // 1.0 down
  EXPECT_EQ(stepToward<std::uint16_t>(0xbc00, true), 0xbbff);   // -1.0 up: toward zero
  EXPECT_EQ(stepToward<std::uint16_t>(0xbc00, false), 0xbc01);  // -1.0 down: away
  EXPECT_EQ(stepToward<std::uint16_t>(0x0000, true), 0x0001);   // +0 up: smallest subnormal
  EXPECT_EQ(stepToward<std::uint16_t>(0x8000, true), 0x0001);   // -0 up likewise
  EXPECT_EQ(stepToward<std::uint16_t>(0x0000, false), 0x8001);
  EXPECT_EQ(stepToward<std::uint16_t>(0x0001, false), 0x0000);
  EXPECT_EQ(stepToward<std::uint16_t>(0x7bff, true), 0x7c00);  // fp16 max -> inf
  EXPECT_EQ(stepToward<std::uint32_t>(0x3f800000u, false), 0x3f7fffffu);
  EXPECT_EQ(stepToward<std::uint32_t>(0x80000000u, false), 0x80000001u);
}

TEST(DecoderopsReference, OneRoundingAcceptsTheTwoBracketingValues) {
  // fp16 values next to 1: 1 - 2^-11 (0x3bff), 1 (0x3c00), 1 + 2^-10 (0x3c01). exact = 1 +
  // 2^-12 lies between 0x3c00 and 0x3c01: both are one rounding away, nothing else is.
  const double exact = 1.0 + std::ldexp(1.0, -12);
  EXPECT_TRUE(withinOneRounding(0x3c00, exact, kF16));
  EXPECT_TRUE(withinOneRounding(0x3c01, exact, kF16));
  EXPECT_FALSE(withinOneRounding(0x3bff, exact, kF16));
  EXPECT_FALSE(withinOneRounding(0x3c02, exact, kF16));
  // An exact value of the format: only itself.
  EXPECT_TRUE(withinOneRounding(0x3c00, 1.0, kF16));
  EXPECT_FALSE(withinOneRounding(0x3c01, 1.0, kF16));
  EXPECT_FALSE(withinOneRounding(0x3bff, 1.0, kF16));
  // bf16 near -3: -3 is 0xc040, next away from zero 0xc041 = -3.015625.
  EXPECT_TRUE(withinOneRounding(0xc040, -3.01, kBF16));
  EXPECT_TRUE(withinOneRounding(0xc041, -3.01, kBF16));
  EXPECT_FALSE(withinOneRounding(0xc042, -3.01, kBF16));
  EXPECT_FALSE(withinOneRounding(0xc03f, -3.01, kBF16));
  // Zero: -0 and +0 are the same value; a tiny exact value is bracketed by 0 and the smallest
  // subnormal on its side.
  EXPECT_TRUE(withinOneRounding(0x8000, 0.0, kF16));
  EXPECT_TRUE(withinOneRounding(0x0000, -1e-30, kF16));
  EXPECT_TRUE(withinOneRounding(0x8001, -1e-30, kF16));
  EXPECT_FALSE(withinOneRounding(0x0001, -1e-30, kF16));
  // Past the largest finite value: the largest and inf bracket it.
  EXPECT_TRUE(withinOneRounding(0x7c00, 70000.0, kF16));
  EXPECT_TRUE(withinOneRounding(0x7bff, 70000.0, kF16));
  // NaN is never within.
  EXPECT_FALSE(withinOneRounding(0x7e00, 1.0, kF16));
  EXPECT_FALSE(withinOneRounding(0xffff, 1.0, kBF16));
}

TEST(DecoderopsReference, Fp32AcceptsFewerThanEightValuesEitherSide) {
  ASSERT_EQ(kFp32Steps, 8);
  const std::uint32_t one = fp32Bits(1.0f);  // fp32 values above 1 are 2^-23 apart, below 2^-24
  EXPECT_TRUE(withinFp32Steps(one, 1.0));
  EXPECT_TRUE(withinFp32Steps(one + 7, 1.0));
  EXPECT_FALSE(withinFp32Steps(one + 8, 1.0));
  EXPECT_TRUE(withinFp32Steps(one - 7, 1.0));
  EXPECT_FALSE(withinFp32Steps(one - 8, 1.0));
  // Between two values (half a step above 1): got and the 8th value toward exact bracket it.
  const double between = 1.0 + std::ldexp(1.0, -24);
  EXPECT_TRUE(withinFp32Steps(one + 8, between));
  EXPECT_FALSE(withinFp32Steps(one + 9, between));
  EXPECT_TRUE(withinFp32Steps(one - 7, between));
  EXPECT_FALSE(withinFp32Steps(one - 8, between));
  EXPECT_FALSE(withinFp32Steps(fp32Bits(std::numeric_limits<float>::quiet_NaN()), 1.0));
  EXPECT_EQ(fp32ToDouble(0x3f800000u), 1.0);
  EXPECT_EQ(fp32ToDouble(0xc0400000u), -3.0);
}

TEST(DecoderopsReference, WithinStepsCountsValuesOfTheFormat) {
  // fp16 1.0 (0x3c00) and 1.0 + 3 * 2^-10 (0x3c03): 3 values apart; within 4, not within 3.
  const auto dec = [](std::uint16_t b) { return toDouble(b, Format::kFloat16); };
  EXPECT_TRUE(withinSteps<std::uint16_t>(0x3c03, 1.0, 4, dec));
  EXPECT_FALSE(withinSteps<std::uint16_t>(0x3c03, 1.0, 3, dec));
  EXPECT_TRUE(withinSteps<std::uint16_t>(0x3c00, 1.0 + 3 * std::ldexp(1.0, -10), 4, dec));
  EXPECT_FALSE(withinSteps<std::uint16_t>(0x3c00, 1.0 + 3 * std::ldexp(1.0, -10), 3, dec));
}

std::int64_t argmaxOf(const std::vector<double>& x) {
  return argmax(static_cast<std::int64_t>(x.size()),
                [&](std::int64_t j) { return x[static_cast<std::size_t>(j)]; });
}

TEST(DecoderopsReference, ArgmaxIsTheFirstMaximum) {
  EXPECT_EQ(argmaxOf({5.0}), 0);
  EXPECT_EQ(argmaxOf({1.0, 3.0, 2.0}), 1);
  EXPECT_EQ(argmaxOf({1.0, 3.0, 3.0, 2.0, 3.0}), 1);  // ties: the first
  EXPECT_EQ(argmaxOf({-2.0, -1.0, -1.0}), 1);
  EXPECT_EQ(argmaxOf({0.0, 1.0, 7.0}), 2);  // the last element
  EXPECT_EQ(argmaxOf({-0.0, 0.0}), 0);      // -0 == +0: the first
  EXPECT_EQ(argmaxOf({0.0, -0.0}), 0);
  EXPECT_EQ(argmaxOf({-kInf, -kInf, -kInf}), 0);  // every value -inf: index 0
  EXPECT_EQ(argmaxOf({-kInf, -5.0, -kInf}), 1);
  EXPECT_EQ(argmaxOf({1.0, kInf, 2.0, kInf}), 1);
}

TEST(DecoderopsReference, ArgmaxTakesTheFirstNan) {
  EXPECT_EQ(argmaxOf({1.0, kNan, 3.0}), 1);  // a NaN beats every number, +inf included
  EXPECT_EQ(argmaxOf({kInf, 2.0, kNan, kNan}), 2);
  EXPECT_EQ(argmaxOf({kNan, kInf}), 0);
  EXPECT_EQ(argmaxOf({-kInf, -kInf, kNan}), 2);
  EXPECT_EQ(argmaxOf({kNan}), 0);
}

}  // namespace
}  // namespace kiln::decoderops::reference
