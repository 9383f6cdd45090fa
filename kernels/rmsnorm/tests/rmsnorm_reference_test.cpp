// The rmsnorm float64 reference on hand-computed cases (its 16-bit codec: bits16_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "rmsnorm/reference.h"

namespace kiln::rmsnorm::reference {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;

std::vector<std::uint16_t> bits(Format f, std::initializer_list<double> values) {
  std::vector<std::uint16_t> out;
  for (double v : values) {
    out.push_back(roundToBits(v, f));
    EXPECT_EQ(toDouble(out.back(), f), v)
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
  EXPECT_EQ(toDouble(r[0], kF16), 3.0);
  EXPECT_EQ(toDouble(r[3], kF16), 4.0);
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
