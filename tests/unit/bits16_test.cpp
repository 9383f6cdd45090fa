// The 16-bit codec of the host references (kernels/common/bits16.h): exact decoding, round to
// nearest even as the GPU's _rn conversions, and the random inputs of the GPU numerics tests.
#include "common/bits16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace kiln::common {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;

TEST(Bits16, DecodesBitPatternsExactly) {
  EXPECT_EQ(toDouble(0x3c00, kF16), 1.0);
  EXPECT_EQ(toDouble(0xc000, kF16), -2.0);
  EXPECT_EQ(toDouble(0x7bff, kF16), 65504.0);
  EXPECT_EQ(toDouble(0x0001, kF16), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(toDouble(0x3555, kF16), 1365.0 / 4096.0);       // 0.333251953125
  EXPECT_EQ(toDouble(0x7c00, kF16), std::numeric_limits<double>::infinity());
  EXPECT_EQ(toDouble(0xfc00, kF16), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(toDouble(0xffff, kF16)));
  EXPECT_EQ(toDouble(0x3f80, kBF16), 1.0);
  EXPECT_EQ(toDouble(0xc040, kBF16), -3.0);
  EXPECT_EQ(toDouble(0x3eab, kBF16), 171.0 / 512.0);  // 0.333984375
  EXPECT_EQ(toDouble(0x0001, kBF16), std::ldexp(1.0, -133));
  EXPECT_TRUE(std::isnan(toDouble(0x7fc0, kBF16)));
  EXPECT_TRUE(std::isnan(toDouble(0xffff, kBF16)));
}

TEST(Bits16, DecoderIsToDoubleForEveryPattern) {
  for (Format f : {kF16, kBF16}) {
    const Decoder dec(f);
    for (std::uint32_t b = 0; b < (1u << 16); ++b) {
      const double want = toDouble(static_cast<std::uint16_t>(b), f);
      const double got = dec(static_cast<std::uint16_t>(b));
      ASSERT_TRUE(got == want || (std::isnan(got) && std::isnan(want)))
          << formatName(f) << " " << b;
    }
  }
  const Decoder dec(kBF16);
  EXPECT_EQ(dec(std::vector<std::uint16_t>{0x3f80, 0x4000, 0xbf80}),
            (std::vector<double>{1.0, 2.0, -1.0}));
}

TEST(Bits16, ExactValues) {
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

TEST(Bits16, TiesRoundToEven) {
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

TEST(Bits16, OverflowAndSpecials) {
  EXPECT_EQ(roundToBits(65519.0, kF16), 0x7bff);  // below the tie: largest finite
  EXPECT_EQ(roundToBits(65520.0, kF16), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(roundToBits(-1e6, kF16), 0xfc00);
  EXPECT_EQ(roundToBits(1e39, kBF16), 0x7f80);
  EXPECT_EQ(roundToBits(std::numeric_limits<double>::infinity(), kF16), 0x7c00);
  EXPECT_EQ(roundToBits(std::numeric_limits<double>::quiet_NaN(), kF16), 0x7e00);
  EXPECT_EQ(roundToBits(std::numeric_limits<double>::quiet_NaN(), kBF16), 0x7fc0);
  EXPECT_TRUE(std::isnan(toDouble(0xffff, kF16)));
  EXPECT_TRUE(std::isnan(toDouble(0xffff, kBF16)));
  EXPECT_EQ(toDouble(0xfc00, kF16), -std::numeric_limits<double>::infinity());
}

TEST(Bits16, EveryFinitePatternRoundTrips) {
  for (Format f : {kF16, kBF16}) {
    for (std::uint32_t b = 0; b < (1u << 16); ++b) {
      const double v = toDouble(static_cast<std::uint16_t>(b), f);
      if (std::isnan(v)) continue;
      ASSERT_EQ(roundToBits(v, f), b) << formatName(f) << " " << b;
    }
  }
}

TEST(Bits16, BfloatMatchesTruncatedFloatRounding) {
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

struct Counter {
  std::mt19937_64 engine{99};
  std::uint64_t next() { return engine(); }
};

TEST(Bits16, RandomBitsStayInTheirBinadesAndCoverSignAndMantissa) {
  for (Format f : {kF16, kBF16}) {
    Counter rng;
    bool negative = false, odd = false;
    for (int i = 0; i < 4096; ++i) {
      const double v = toDouble(randomBits(rng, f, -4, 1), f);
      ASSERT_GE(std::fabs(v), std::ldexp(1.0, -4)) << formatName(f);
      ASSERT_LT(std::fabs(v), std::ldexp(1.0, 2)) << formatName(f);
      negative = negative || v < 0;
      odd = odd || (randomBits(rng, f, 0, 0) & 1u) != 0;
    }
    EXPECT_TRUE(negative && odd) << formatName(f);
    for (int i = 0; i < 256; ++i) EXPECT_GT(toDouble(randomBits(rng, f, -1, 0, false), f), 0.0);
  }
}

}  // namespace
}  // namespace kiln::common
