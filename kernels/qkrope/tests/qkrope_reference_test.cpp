// The qkrope float64 reference on hand-computed cases: the rotation of known vectors at known
// angles, the norm, the partial rotary tail, the cache addressing of both layouts (its 16-bit
// codec: bits16_test.cpp; its inv_freq: qkrope_selector_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "qkrope/reference.h"

namespace kiln::qkrope::reference {
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

TEST(QkropeReference, PositionZeroIsTheIdentity) {
  // Angle 0: cos 1, sin 0 exactly, in both formats.
  for (Format f : {kF16, kBF16}) {
    const Decoder dec(f);
    const auto x = bits(f, {1, -2, 0.5, 3});
    double out[4];
    normRopeHead(dec, f, 4, 4, 10000.0f, 0, x.data(), nullptr, 0.0, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], dec(x[i])) << formatName(f) << " " << i;
  }
}

TEST(QkropeReference, RotatesTheNeoxPairsByTheirAngles) {
  // head dim 4, theta 10000: inv_freq = (1, 10000^-1/2 = 0.01), so at position 1 pair 0 turns by
  // 1 rad and pair 1 by fl32(0.01). x = (1, 0, 0, 1): pairs (x0, x2) = (1, 0) and (x1, x3) = (0, 1)
  // give out = (c0, -s1, s0, c1), with cos and sin rounded to the format.
  for (Format f : {kF16, kBF16}) {
    const Decoder dec(f);
    const auto x = bits(f, {1, 0, 0, 1});
    double out[4];
    normRopeHead(dec, f, 4, 4, 10000.0f, 1, x.data(), nullptr, 0.0, out);
    const double c0 = roundToFormat(std::cos(1.0), f), s0 = roundToFormat(std::sin(1.0), f);
    const double a1 = static_cast<double>(0.01f);
    const double c1 = roundToFormat(std::cos(a1), f), s1 = roundToFormat(std::sin(a1), f);
    EXPECT_EQ(out[0], c0) << formatName(f);
    EXPECT_EQ(out[1], -s1) << formatName(f);
    EXPECT_EQ(out[2], s0) << formatName(f);
    EXPECT_EQ(out[3], c1) << formatName(f);
    // The rounding is the format's: bf16 cos(1) = 0.5390625 (0.5403 exact), fp16 0.54052734375.
    EXPECT_EQ(out[0], f == kBF16 ? 0.5390625 : 0.54052734375);
  }
  // rotation() itself: pair 1 of 4 at position 100 turns by fl32(100 * fl32(0.01)) = 1.0 rad
  // (fl32(0.01) = 0.00999999977648, times 100 rounds to 1.0 in fp32).
  const Rotation r = rotation(kF16, 10000.0f, 4, 100, 1);
  EXPECT_EQ(r.cos, roundToFormat(std::cos(1.0), kF16));
  EXPECT_EQ(r.sin, roundToFormat(std::sin(1.0), kF16));
}

TEST(QkropeReference, AngleIsTheFp32Product) {
  // At position 123457 the angle of pair 0 (inv_freq 1) is fl32(123457) = 123457 exactly; of pair
  // 1 of 4 (inv_freq fl32(0.01)) it is fl32(123457 * 0.00999999977648), not 1234.57.
  const float angle = static_cast<float>(123457) * 0.01f;
  EXPECT_NE(static_cast<double>(angle), 1234.57);
  const Rotation r = rotation(kBF16, 10000.0f, 4, 123457, 1);
  EXPECT_EQ(r.cos, roundToFormat(std::cos(static_cast<double>(angle)), kBF16));
  EXPECT_EQ(r.sin, roundToFormat(std::sin(static_cast<double>(angle)), kBF16));
}

TEST(QkropeReference, NormThenRotation) {
  // x = (3, 4, 0, 0): mean(x^2) = 25 / 4, rms 2.5 (eps 0), weight (1, 2, 1, 1) -> (1.2, 3.2, 0, 0);
  // at position 0 that is the output. eps 2.25: rsqrt(6.25 + 2.25) = 1 / sqrt(8.5).
  const Decoder dec(kBF16);
  const auto x = bits(kBF16, {3, 4, 0, 0});
  const auto w = bits(kBF16, {1, 2, 1, 1});
  double out[4];
  normRopeHead(dec, kBF16, 4, 4, 1e6f, 0, x.data(), w.data(), 0.0, out);
  EXPECT_DOUBLE_EQ(out[0], 1.2);
  EXPECT_DOUBLE_EQ(out[1], 3.2);
  EXPECT_EQ(out[2], 0.0);
  EXPECT_EQ(out[3], 0.0);
  normRopeHead(dec, kBF16, 4, 4, 1e6f, 0, x.data(), w.data(), 2.25, out);
  EXPECT_DOUBLE_EQ(out[0], 3.0 / std::sqrt(8.5));
  // At position 1 the normed (1.2, 3.2, 0, 0) turns: out = (1.2 c0, 3.2 c1, 1.2 s0, 3.2 s1).
  normRopeHead(dec, kBF16, 4, 4, 1e6f, 1, x.data(), w.data(), 0.0, out);
  const Rotation r0 = rotation(kBF16, 1e6f, 4, 1, 0), r1 = rotation(kBF16, 1e6f, 4, 1, 1);
  EXPECT_DOUBLE_EQ(out[0], 1.2 * r0.cos);
  EXPECT_DOUBLE_EQ(out[1], 3.2 * r1.cos);
  EXPECT_DOUBLE_EQ(out[2], 1.2 * r0.sin);
  EXPECT_DOUBLE_EQ(out[3], 3.2 * r1.sin);
}

TEST(QkropeReference, PartialRotaryLeavesTheTail) {
  // head dim 8, rotary dim 4: pairs (0, 2) and (1, 3) turn with rotary dim 4's frequencies; dims
  // 4..7 pass through (normed when there is a weight).
  const Decoder dec(kF16);
  const auto x = bits(kF16, {1, 2, 3, 4, 5, 6, 7, 8});
  double out[8];
  normRopeHead(dec, kF16, 8, 4, 10000.0f, 3, x.data(), nullptr, 0.0, out);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(out[i], i + 1.0) << i;
  const Rotation r0 = rotation(kF16, 10000.0f, 4, 3, 0), r1 = rotation(kF16, 10000.0f, 4, 3, 1);
  EXPECT_DOUBLE_EQ(out[0], 1 * r0.cos - 3 * r0.sin);
  EXPECT_DOUBLE_EQ(out[2], 3 * r0.cos + 1 * r0.sin);
  EXPECT_DOUBLE_EQ(out[1], 2 * r1.cos - 4 * r1.sin);
  EXPECT_DOUBLE_EQ(out[3], 4 * r1.cos + 2 * r1.sin);
}

TEST(QkropeReference, ProblemSplitsQkvIntoQAndKHeads) {
  // 1 token, 2 q heads, 1 kv head of 4: qkv rows q0, q1, k0, v0; q heads normed with q's weight,
  // k with k's; position 0, so the outputs are the normed rows.
  const auto qkv = bits(kBF16, {2, 0, 0, 0, 0, 4, 0, 0, 1, 1, 1, 1, 9, 9, 9, 9});
  const auto wq = bits(kBF16, {1, 1, 1, 1});
  const auto wk = bits(kBF16, {2, 2, 2, 2});
  const std::int64_t positions[1] = {0};
  Problem p;
  p.format = kBF16;
  p.tokens = 1;
  p.q_heads = 2;
  p.kv_heads = 1;
  p.head_dim = 4;
  p.rotary_dim = 4;
  p.qk_norm = true;
  p.qkv = qkv.data();
  p.positions = positions;
  p.q_norm_weight = wq.data();
  p.k_norm_weight = wk.data();
  double q[8], k[4];
  qkNormRope(p, q, k);
  const double q_expected[8] = {2, 0, 0, 0, 0, 2, 0, 0};  // rms 1 and 2
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(q[i], q_expected[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(k[i], 2.0) << i;  // rms 1, weight 2
}

TEST(QkropeReference, CacheElementOfBothLayouts) {
  // page size 16, 2 kv heads, head dim 8; slot 37 = page 2, row 5.
  EXPECT_EQ(cacheElement(Layout::kNHD, 16, 2, 8, 37, 1), ((2 * 16 + 5) * 2 + 1) * 8u);
  EXPECT_EQ(cacheElement(Layout::kHND, 16, 2, 8, 37, 1), ((2 * 2 + 1) * 16 + 5) * 8u);
  EXPECT_EQ(cacheElement(Layout::kNHD, 16, 2, 8, 0, 0), 0u);
  EXPECT_EQ(cacheElement(Layout::kHND, 16, 2, 8, 15, 0), 15 * 8u);
}

TEST(QkropeReference, RelativeL2) {
  const auto got = bits(kF16, {1, 2, 2, 0});
  const double ref[4] = {1, 2, 2, 1};  // ||ref|| = sqrt(10), ||diff|| = 1
  EXPECT_DOUBLE_EQ(relativeL2(kF16, 4, got.data(), ref), 1.0 / std::sqrt(10.0));
  const std::uint16_t nan[1] = {0x7e00};
  const double one[1] = {1.0};
  EXPECT_TRUE(std::isnan(relativeL2(kF16, 1, nan, one)));
}

}  // namespace
}  // namespace kiln::qkrope::reference
