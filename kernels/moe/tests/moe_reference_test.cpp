// The moe float64 reference on hand-computed cases: route() (the softmax values, the top-k order,
// ties to the lower expert, renormalisation on and off, k == E, several tokens), expertRows() and
// offsets() (experts without rows, one expert with every row, the tile counts at 63 / 64 / 65
// rows), act(), down() and output() on tiny shapes worked by hand (SiLU, the gate rows before the
// up rows of w1, rounding to nearest even in fp16 and bf16 through common/bits16.h; the 16-bit
// codec itself: tests/unit/bits16_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "moe/launch.h"
#include "moe/reference.h"

namespace kiln::moe::reference {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;

// The bit patterns of `values` in format `f`; every test value is exact in it.
std::vector<std::uint16_t> bits(const std::vector<double>& values, Format f) {
  std::vector<std::uint16_t> out;
  for (double v : values) {
    const std::uint16_t b = roundToBits(v, f);
    EXPECT_EQ(common::toDouble(b, f), v)
        << "test value " << v << " not exact in " << common::formatName(f);
    out.push_back(b);
  }
  return out;
}

const Decoder& decoder(Format f) {
  static const Decoder f16(kF16);
  static const Decoder bf16(kBF16);
  return f == kF16 ? f16 : bf16;
}

Shape shape(std::int64_t tokens, int experts, int top_k, std::int64_t hidden = 0,
            std::int64_t intermediate = 0) {
  Shape s;
  s.tokens = tokens;
  s.experts = experts;
  s.top_k = top_k;
  s.hidden = hidden;
  s.intermediate = intermediate;
  return s;
}

// ---- route
// -------------------------------------------------------------------------------------

TEST(MoeReference, RouteSoftmaxAndTopKOrder) {
  // exp(logits) proportional to 1, 2, 3, 4: the probabilities 0.1, 0.2, 0.3, 0.4, and the top 2
  // are experts 3 and 2, larger first.
  const std::vector<double> logits = {0.0, std::log(2.0), std::log(3.0), std::log(4.0)};
  Routing r = route(logits, shape(1, 4, 2), /*renormalize=*/false);
  ASSERT_EQ(r.ids.size(), 2u);
  ASSERT_EQ(r.weights.size(), 2u);
  ASSERT_EQ(r.probs.size(), 2u);
  EXPECT_EQ(r.ids[0], 3);
  EXPECT_EQ(r.ids[1], 2);
  EXPECT_NEAR(r.probs[0], 0.4, 1e-15);
  EXPECT_NEAR(r.probs[1], 0.3, 1e-15);
  EXPECT_NEAR(r.weights[0], 0.4, 1e-15);  // not renormalised: the probabilities themselves
  EXPECT_NEAR(r.weights[1], 0.3, 1e-15);
  // Renormalised: 0.4 / 0.7 and 0.3 / 0.7; the probabilities stay unnormalised.
  r = route(logits, shape(1, 4, 2), /*renormalize=*/true);
  EXPECT_EQ(r.ids[0], 3);
  EXPECT_EQ(r.ids[1], 2);
  EXPECT_NEAR(r.weights[0], 4.0 / 7.0, 1e-15);
  EXPECT_NEAR(r.weights[1], 3.0 / 7.0, 1e-15);
  EXPECT_NEAR(r.probs[0], 0.4, 1e-15);
  EXPECT_NEAR(r.probs[1], 0.3, 1e-15);
  // The order follows the values, not the position: the largest expert first wherever it is.
  const std::vector<double> shuffled = {std::log(3.0), std::log(4.0), 0.0, std::log(2.0)};
  r = route(shuffled, shape(1, 4, 3), false);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 0, 3}));
  EXPECT_NEAR(r.weights[0], 0.4, 1e-15);
  EXPECT_NEAR(r.weights[1], 0.3, 1e-15);
  EXPECT_NEAR(r.weights[2], 0.2, 1e-15);
}

TEST(MoeReference, RouteSoftmaxIsShiftInvariantAndStable) {
  // Two experts, logits 1 apart: p = 1 / (1 + e^-1), 1 - p. The same at logits around 1000 (the
  // softmax subtracts the row's maximum before exp) and below -1000.
  const double p0 = 1.0 / (1.0 + std::exp(-1.0));  // 0.7310585786300049
  for (double base : {0.0, 1000.0, -1000.0, 88.5}) {
    const std::vector<double> logits = {base + 1.0, base};
    const Routing r = route(logits, shape(1, 2, 2), false);
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{0, 1})) << base;
    EXPECT_NEAR(r.probs[0], p0, 1e-15) << base;
    EXPECT_NEAR(r.probs[1], 1.0 - p0, 1e-15) << base;
    EXPECT_TRUE(std::isfinite(r.weights[0]) && std::isfinite(r.weights[1])) << base;
  }
  // One dominant expert takes (nearly) all the probability; the rest underflow to 0, not NaN.
  const Routing r = route({0.0, 2000.0, 0.0}, shape(1, 3, 2), true);
  EXPECT_EQ(r.ids[0], 1);
  EXPECT_EQ(r.ids[1], 0);  // the two zeros tie: the lower expert
  EXPECT_EQ(r.probs[0], 1.0);
  EXPECT_EQ(r.probs[1], 0.0);
  EXPECT_EQ(r.weights[0], 1.0);
  EXPECT_EQ(r.weights[1], 0.0);
}

TEST(MoeReference, TiesGoToTheLowerExpert) {
  // All equal: p = 1 / E exactly, and the top k are experts 0 .. k - 1 in order.
  Routing r = route({0.5, 0.5, 0.5, 0.5}, shape(1, 4, 2), false);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(r.probs, (std::vector<double>{0.25, 0.25}));
  EXPECT_EQ(r.weights, (std::vector<double>{0.25, 0.25}));
  r = route({0.5, 0.5, 0.5, 0.5}, shape(1, 4, 2), true);
  EXPECT_EQ(r.weights, (std::vector<double>{0.5, 0.5}));
  // A three-way tie at the top behind nothing: experts 1, 2, 4 in that order; a tie below the
  // cut (experts 0 and 3 at 1) is broken the same way once it is reached.
  const std::vector<double> logits = {1.0, 3.0, 3.0, 1.0, 3.0, 0.0};
  r = route(logits, shape(1, 6, 2), false);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 2}));
  r = route(logits, shape(1, 6, 3), false);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 2, 4}));
  r = route(logits, shape(1, 6, 5), false);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 2, 4, 0, 3}));
  EXPECT_EQ(r.probs[0], r.probs[1]);
  EXPECT_EQ(r.probs[1], r.probs[2]);
  EXPECT_EQ(r.probs[3], r.probs[4]);
  // The tied top is not the first expert: the later, larger experts still win over expert 0.
  r = route({-2.0, 5.0, -2.0, 5.0}, shape(1, 4, 3), false);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 3, 0}));
}

TEST(MoeReference, TopKOfEveryExpert) {
  // k == E: every expert, by descending probability; the probabilities sum to 1, so renormalising
  // leaves the weights the probabilities (to rounding).
  const std::vector<double> logits = {std::log(2.0), std::log(5.0), 0.0, std::log(2.0)};
  // exp: 2, 5, 1, 2 over 10.
  for (bool renormalize : {false, true}) {
    const Routing r = route(logits, shape(1, 4, 4), renormalize);
    EXPECT_EQ(r.ids, (std::vector<std::int32_t>{1, 0, 3, 2})) << renormalize;
    const double want[] = {0.5, 0.2, 0.2, 0.1};
    double sum = 0.0;
    for (int j = 0; j < 4; ++j) {
      EXPECT_NEAR(r.probs[j], want[j], 1e-15) << renormalize << " " << j;
      EXPECT_NEAR(r.weights[j], want[j], 1e-15) << renormalize << " " << j;
      sum += r.weights[j];
    }
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
  // One expert: weight 1 (the probability is 1).
  const Routing one = route({-3.25}, shape(1, 1, 1), false);
  EXPECT_EQ(one.ids, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(one.weights, (std::vector<double>{1.0}));
}

TEST(MoeReference, RouteOfSeveralTokensFillsSlotsTokenMajor) {
  // [T 3, E 3], k 2: slot t * k + j. Token 0 prefers 2 then 0; token 1 ties 0 and 1 (0 first);
  // token 2 prefers 1 then 2.
  const std::vector<double> logits = {
      std::log(2.0), 0.0,           std::log(7.0),  // exp 2, 1, 7 over 10
      0.0,           0.0,           -1e9,           // 0.5, 0.5, 0
      0.0,           std::log(3.0), std::log(1.0),  // 1, 3, 1 over 5: experts 0 and 2 tie, 0 wins
  };
  const Routing r = route(logits, shape(3, 3, 2), true);
  EXPECT_EQ(r.ids, (std::vector<std::int32_t>{2, 0, 0, 1, 1, 0}));
  const double probs[] = {0.7, 0.2, 0.5, 0.5, 0.6, 0.2};
  const double weights[] = {7.0 / 9.0, 2.0 / 9.0, 0.5, 0.5, 0.75, 0.25};
  for (int slot = 0; slot < 6; ++slot) {
    EXPECT_NEAR(r.probs[slot], probs[slot], 1e-15) << slot;
    EXPECT_NEAR(r.weights[slot], weights[slot], 1e-15) << slot;
  }
  // No tokens: nothing.
  const Routing none = route({}, shape(0, 3, 2), true);
  EXPECT_TRUE(none.ids.empty());
  EXPECT_TRUE(none.weights.empty());
}

// ---- expertRows and offsets
// ----------------------------------------------------------------------

TEST(MoeReference, ExpertRowsListEachExpertsSlotsAscending) {
  // [T 3, k 2] over 4 experts: slots 0..5 -> experts 2, 0, 0, 2, 1, 2; expert 3 has no rows.
  const std::vector<std::int32_t> ids = {2, 0, 0, 2, 1, 2};
  const auto rows = expertRows(ids, 4);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0], (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(rows[1], (std::vector<std::int32_t>{4}));
  EXPECT_EQ(rows[2], (std::vector<std::int32_t>{0, 3, 5}));
  EXPECT_TRUE(rows[3].empty());
  // One expert with every row, the others empty.
  const std::vector<std::int32_t> all_three(7, 3);
  const auto one = expertRows(all_three, 5);
  ASSERT_EQ(one.size(), 5u);
  for (int e : {0, 1, 2, 4}) EXPECT_TRUE(one[e].empty()) << e;
  EXPECT_EQ(one[3], (std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6}));
  // No rows at all.
  const auto none = expertRows({}, 3);
  ASSERT_EQ(none.size(), 3u);
  for (const auto& r : none) EXPECT_TRUE(r.empty());
}

TEST(MoeReference, OffsetsArePrefixSumsOfRowsAndTiles) {
  // The routing of ExpertRowsListEachExpertsSlotsAscending: counts 2, 1, 3, 0; one partial tile
  // for each expert with rows.
  Offsets o = offsets({2, 0, 0, 2, 1, 2}, 4, kBlockM);
  EXPECT_EQ(o.experts, (std::vector<std::int32_t>{0, 2, 3, 6, 6}));
  EXPECT_EQ(o.tiles, (std::vector<std::int32_t>{0, 1, 2, 3, 3}));
  // Experts without rows in the first, middle and last place take no tiles.
  o = offsets({1, 1, 3}, 5, kBlockM);
  EXPECT_EQ(o.experts, (std::vector<std::int32_t>{0, 0, 2, 2, 3, 3}));
  EXPECT_EQ(o.tiles, (std::vector<std::int32_t>{0, 0, 1, 1, 2, 2}));
  // No rows: all zero.
  o = offsets({}, 3, kBlockM);
  EXPECT_EQ(o.experts, (std::vector<std::int32_t>{0, 0, 0, 0}));
  EXPECT_EQ(o.tiles, (std::vector<std::int32_t>{0, 0, 0, 0}));
}

TEST(MoeReference, TileCountsAtTheTileBoundary) {
  // 63, 64 and 65 rows make 1, 1 and 2 tiles of 64; 0 rows none, 1 row one, 128 rows two. The ids
  // are interleaved (the counts are what matter, not the order).
  const int counts[] = {63, 64, 65, 0, 1, 128};
  std::vector<std::int32_t> ids;
  for (int round = 0; round < 128; ++round) {
    for (int e = 0; e < 6; ++e) {
      if (round < counts[e]) ids.push_back(e);
    }
  }
  ASSERT_EQ(ids.size(), 321u);
  const Offsets o = offsets(ids, 6, kBlockM);
  EXPECT_EQ(o.experts, (std::vector<std::int32_t>{0, 63, 127, 192, 192, 193, 321}));
  EXPECT_EQ(o.tiles, (std::vector<std::int32_t>{0, 1, 2, 4, 4, 5, 7}));
  // The GEMM grids, sized before the routing is known, have room for these tiles.
  EXPECT_LE(o.tiles.back(), maxRowTiles(321, 6));
  // One expert with every row: 130 rows of expert 3 of 5 are three tiles, 128 exactly two.
  Offsets one = offsets(std::vector<std::int32_t>(130, 3), 5, kBlockM);
  EXPECT_EQ(one.experts, (std::vector<std::int32_t>{0, 0, 0, 0, 130, 130}));
  EXPECT_EQ(one.tiles, (std::vector<std::int32_t>{0, 0, 0, 0, 3, 3}));
  one = offsets(std::vector<std::int32_t>(128, 0), 2, kBlockM);
  EXPECT_EQ(one.experts, (std::vector<std::int32_t>{0, 128, 128}));
  EXPECT_EQ(one.tiles, (std::vector<std::int32_t>{0, 2, 2}));
  // Another tile height counts in its own tiles: 65 rows are five tiles of 16.
  const Offsets sixteen = offsets(std::vector<std::int32_t>(65, 1), 2, 16);
  EXPECT_EQ(sixteen.tiles, (std::vector<std::int32_t>{0, 0, 5}));
}

TEST(MoeReference, OffsetsAgreeWithExpertRows) {
  // The rows of expert e are offsets[e] .. offsets[e + 1], as many as expertRows lists, on the
  // routing route() makes for a few tokens.
  std::vector<double> logits;
  for (int t = 0; t < 5; ++t) {
    for (int e = 0; e < 6; ++e) logits.push_back(std::sin(1.0 + t * 6 + e));
  }
  const Routing r = route(logits, shape(5, 6, 3), true);
  const auto rows = expertRows(r.ids, 6);
  const Offsets o = offsets(r.ids, 6, kBlockM);
  for (int e = 0; e < 6; ++e) {
    EXPECT_EQ(o.experts[e + 1] - o.experts[e], static_cast<std::int32_t>(rows[e].size())) << e;
  }
  EXPECT_EQ(o.experts.back(), 15);
}

// ---- act, down, output
// ---------------------------------------------------------------------------

TEST(MoeReference, SiluIsGTimesItsSigmoid) {
  EXPECT_EQ(silu(0.0), 0.0);
  EXPECT_NEAR(silu(1.0), 0.7310585786300049, 1e-16);  // 1 / (1 + e^-1)
  EXPECT_NEAR(silu(-1.0), -0.2689414213699951, 1e-16);
  EXPECT_NEAR(silu(2.0), 1.7615941559557646, 1e-15);  // 2 / (1 + e^-2)
  EXPECT_NEAR(silu(-40.0), 0.0, 1e-15);
  EXPECT_NEAR(silu(40.0), 40.0, 1e-12);
}

TEST(MoeReference, ActIsSiluOfTheGateTimesTheUpRounded) {
  // H 2, I 1: w1e is [2I, H] = the gate row, then the up row. x = (1, 2), gate = (0.5, 0.25),
  // up = (1, -1): g = 0.5 + 0.5 = 1, u = 1 - 2 = -1, SiLU(1) * -1 = -0.7310585786300049, which
  // rounds (to nearest even) in fp16 to -1497 / 2048 = -0.73095703125 (1497.21 ulps of 2^-11) and
  // in bf16 to -187 / 256 = -0.73046875 (187.15 ulps of 2^-8).
  const double x[] = {1.0, 2.0};
  const std::vector<double> w1e = {0.5, 0.25, 1.0, -1.0};
  const Shape s = shape(1, 1, 1, 2, 1);
  double out = 0.0;
  act(x, bits(w1e, kF16).data(), s, decoder(kF16), kF16, &out);
  EXPECT_EQ(out, -0.73095703125);
  act(x, bits(w1e, kBF16).data(), s, decoder(kBF16), kBF16, &out);
  EXPECT_EQ(out, -0.73046875);
}

TEST(MoeReference, ActReadsAllGateRowsBeforeAllUpRows) {
  // H 2, I 2: rows gate0, gate1, up0, up1. x = (1, 0) picks each row's first element:
  // g = (2, 0), u = (3, 5): out0 = SiLU(2) * 3 = 5.284782467867294, out1 = SiLU(0) * 5 = 0.
  // 5.2848 is 1352.90 ulps of 2^-8 in fp16 (-> 1353 / 256 = 5.28515625) and 169.11 ulps of 2^-5
  // in bf16 (-> 169 / 32 = 5.28125). Were the rows interleaved (gate0, up0, gate1, up1) the result
  // would be SiLU(2) * 0 and SiLU(3) * 5.
  const double x[] = {1.0, 0.0};
  const std::vector<double> w1e = {2.0, 7.0,   // gate 0
                                   0.0, 7.0,   // gate 1
                                   3.0, 7.0,   // up 0
                                   5.0, 7.0};  // up 1
  const Shape s = shape(1, 1, 1, 2, 2);
  double out[2] = {-1.0, -1.0};
  act(x, bits(w1e, kF16).data(), s, decoder(kF16), kF16, out);
  EXPECT_EQ(out[0], 5.28515625);
  EXPECT_EQ(out[1], 0.0);
  act(x, bits(w1e, kBF16).data(), s, decoder(kBF16), kBF16, out);
  EXPECT_EQ(out[0], 5.28125);
  EXPECT_EQ(out[1], 0.0);
  // x = (1, 1): gate = (-0.5 + 0.5, 1 + 1) = (0, 2), up = (3 + 4, 100 + 2) = (7, 102): out0 =
  // SiLU(0) * 7 = 0 exactly, out1 = SiLU(2) * 102 = 179.682603907488, which is 179.68 ulps of 1
  // in bf16 (-> 180) and 1437.46 ulps of 2^-3 in fp16 (-> 1437 / 8 = 179.625).
  const double ones[] = {1.0, 1.0};
  const std::vector<double> w1e2 = {-0.5, 0.5, 1.0, 1.0, 3.0, 4.0, 100.0, 2.0};
  act(ones, bits(w1e2, kBF16).data(), s, decoder(kBF16), kBF16, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 180.0);
  act(ones, bits(w1e2, kF16).data(), s, decoder(kF16), kF16, out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 179.625);
}

TEST(MoeReference, DownIsTheDotWithEachHiddenRowRounded) {
  // I 2, H 3: w2e is [H, I]. a = (1, 2): out = (1 + 2, 0.5 - 2, 3 + 0.5) = (3, -1.5, 3.5), exact.
  const double a[] = {1.0, 2.0};
  const std::vector<double> w2e = {1.0, 1.0, 0.5, -1.0, 3.0, 0.25};
  const Shape s = shape(1, 1, 1, 3, 2);
  double out[3] = {};
  for (Format f : {kF16, kBF16}) {
    down(a, bits(w2e, f).data(), s, decoder(f), f, out);
    EXPECT_EQ(out[0], 3.0) << common::formatName(f);
    EXPECT_EQ(out[1], -1.5) << common::formatName(f);
    EXPECT_EQ(out[2], 3.5) << common::formatName(f);
  }
  // Rounding to nearest even: a = (1, 1), rows (1, 2^-8) and (1, 3 * 2^-8). 1 + 2^-8 is exact in
  // fp16 (ulp 2^-10) and halfway between 1 and 1 + 2^-7 in bf16 (ulp 2^-7): the even 1.
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 in bf16: the even 1 + 2^-6.
  const double ones[] = {1.0, 1.0};
  const std::vector<double> w2e_round = {1.0, 1.0 / 256, 1.0, 3.0 / 256};
  const Shape s2 = shape(1, 1, 1, 2, 2);
  double out2[2] = {};
  down(ones, bits(w2e_round, kF16).data(), s2, decoder(kF16), kF16, out2);
  EXPECT_EQ(out2[0], 1.00390625);
  EXPECT_EQ(out2[1], 1.01171875);
  down(ones, bits(w2e_round, kBF16).data(), s2, decoder(kBF16), kBF16, out2);
  EXPECT_EQ(out2[0], 1.0);
  EXPECT_EQ(out2[1], 1.015625);
  // Overflow of the format: 70000 is past fp16's 65504 (infinity), inside bf16's range.
  const double big[] = {70000.0, 0.0};
  down(big, bits(w2e_round, kF16).data(), s2, decoder(kF16), kF16, out2);
  EXPECT_TRUE(std::isinf(out2[0]) && out2[0] > 0);
  down(big, bits(w2e_round, kBF16).data(), s2, decoder(kBF16), kBF16, out2);
  EXPECT_EQ(out2[0], 70144.0);  // 70000 is 136.72 ulps of 2^9 in [2^16, 2^17): 137 x 512
}

TEST(MoeReference, OutputIsTheWeightedSumPlusResidualUnrounded) {
  // k 2, H 2: weights (0.75, 0.25), down rows (4, 8) and (-4, 0), residual (1, -1):
  // (3 - 1 + 1, 6 + 0 - 1) = (3, 5); without the residual (2, 6).
  const double weights[] = {0.75, 0.25};
  const double d0[] = {4.0, 8.0};
  const double d1[] = {-4.0, 0.0};
  const std::vector<const double*> rows = {d0, d1};
  const double residual[] = {1.0, -1.0};
  double out[2] = {};
  output(weights, rows, residual, 2, out);
  EXPECT_EQ(out[0], 3.0);
  EXPECT_EQ(out[1], 5.0);
  output(weights, rows, nullptr, 2, out);
  EXPECT_EQ(out[0], 2.0);
  EXPECT_EQ(out[1], 6.0);
  // Unrounded: a third of 1 stays the double 1 / 3 (the caller rounds once).
  const double third[] = {1.0 / 3.0};
  const double one[] = {1.0};
  output(third, {one}, nullptr, 1, out);
  EXPECT_EQ(out[0], 1.0 / 3.0);
  // No rows: the residual alone.
  output(weights, {}, residual, 2, out);
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(out[1], -1.0);
}

TEST(MoeReference, ATinyBlockByHand) {
  // T 2, E 2, k 1, H 2, I 1, bf16, renormalised. Token 0 routes to expert 1, token 1 to expert 0
  // (weight 1 each: k 1 renormalised). x0 = (1, 0), x1 = (0, 1).
  // Expert 0: gate (0, 2), up (0, 1); w2 rows (1), (-1). Expert 1: gate (0, 0), up (1, 1).
  //   token 1 on expert 0: g = 2, u = 1, act = SiLU(2) = 1.7615941559557646 -> bf16 1.7578125
  //   (225.48 ulps of 2^-7: 225 / 128); down = (1.7578125, -1.7578125); y1 = down.
  //   token 0 on expert 1: g = 0: act 0, down (0, 0), y0 = (0, 0).
  const Shape s = shape(2, 2, 1, 2, 1);
  const Routing r = route({0.0, 1.0, 1.0, 0.0}, s, true);
  ASSERT_EQ(r.ids, (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(r.weights, (std::vector<double>{1.0, 1.0}));
  const double x[2][2] = {{1.0, 0.0}, {0.0, 1.0}};
  const std::vector<std::uint16_t> w1[2] = {bits({0.0, 2.0, 0.0, 1.0}, kBF16),
                                            bits({0.0, 0.0, 1.0, 1.0}, kBF16)};
  const std::vector<std::uint16_t> w2[2] = {bits({1.0, -1.0}, kBF16), bits({0.5, 0.5}, kBF16)};
  double act_rows[2][1] = {};
  double down_rows[2][2] = {};
  for (int slot = 0; slot < 2; ++slot) {  // k 1: slot t is token t
    const auto e = static_cast<std::size_t>(r.ids[static_cast<std::size_t>(slot)]);
    act(x[slot], w1[e].data(), s, decoder(kBF16), kBF16, act_rows[slot]);
    down(act_rows[slot], w2[e].data(), s, decoder(kBF16), kBF16, down_rows[slot]);
  }
  EXPECT_EQ(act_rows[0][0], 0.0);
  EXPECT_EQ(act_rows[1][0], 1.7578125);
  EXPECT_EQ(down_rows[1][0], 1.7578125);
  EXPECT_EQ(down_rows[1][1], -1.7578125);
  double y[2][2] = {};
  for (int t = 0; t < 2; ++t) {
    output(&r.weights[static_cast<std::size_t>(t)], {down_rows[t]}, nullptr, 2, y[t]);
  }
  EXPECT_EQ(y[0][0], 0.0);
  EXPECT_EQ(y[0][1], 0.0);
  EXPECT_EQ(y[1][0], 1.7578125);
  EXPECT_EQ(y[1][1], -1.7578125);
}

}  // namespace
}  // namespace kiln::moe::reference
