// The w4a16 layout maps and float64 reference on hand-computed cases: where each nibble of kiln's
// packed layout sits, the scales' pair order, AWQ's column order, the published GPTQ / AWQ
// dequantizations of literal checkpoint words, the round trips Quantized -> checkpoint -> weights
// and Quantized -> packed -> weights, and linear() (the 16-bit codec: bits16_test.cpp).
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "w4a16/launch.h"
#include "w4a16/reference.h"
#include "w4a16/w4a16_layout.h"

namespace kiln::w4a16::reference {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;

std::uint16_t bitsOf(double v, Format f) {
  const std::uint16_t b = roundToBits(v, f);
  EXPECT_EQ(common::toDouble(b, f), v)
      << "test value " << v << " not exact in " << common::formatName(f);
  return b;
}

// splitmix64: a fixed sequence, so that every run checks the same matrices.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

enum class Zeros { kNone, kGptq, kAwq };  // kGptq: z in 1..16, kAwq: z in 0..15

Quantized randomQuantized(std::uint64_t seed, std::int64_t n, std::int64_t k, std::int64_t group,
                          Format scale_format, Zeros zeros) {
  Rng rng{seed};
  Quantized w;
  w.n = n;
  w.k = k;
  w.group = group;
  w.scale_format = scale_format;
  w.q.resize(static_cast<std::size_t>(n * k));
  for (auto& q : w.q) q = static_cast<std::uint8_t>(rng.next() % 16);
  w.scales.resize(static_cast<std::size_t>(w.groups() * n));
  // Magnitudes 2^-12 .. 2^3 and every mantissa bit: within fp16's normal range, so an fp16 scale
  // rounds to a normal bf16 and a bf16 one is not clamped by the test itself.
  for (auto& s : w.scales) s = common::randomBits(rng, scale_format, -12, 2);
  if (zeros != Zeros::kNone) {
    w.zeros.resize(static_cast<std::size_t>(w.groups() * n));
    for (auto& z : w.zeros) {
      z = static_cast<std::uint8_t>(rng.next() % 16 + (zeros == Zeros::kGptq ? 1 : 0));
    }
  }
  return w;
}

// (q - z) * scale, straight from the logical form, [n][k].
std::vector<double> direct(const Quantized& w, bool round_scales_to_bf16 = false) {
  std::vector<double> out(static_cast<std::size_t>(w.n * w.k));
  for (std::int64_t row = 0; row < w.n; ++row) {
    for (std::int64_t col = 0; col < w.k; ++col) {
      const std::int64_t g = col / w.group;
      double scale =
          common::toDouble(w.scales[static_cast<std::size_t>(g * w.n + row)], w.scale_format);
      if (round_scales_to_bf16) scale = common::roundToFormat(scale, kBF16);
      const double q = w.q[static_cast<std::size_t>(row * w.k + col)];
      out[static_cast<std::size_t>(row * w.k + col)] = (q - w.zero(g, row)) * scale;
    }
  }
  return out;
}

void expectSame(const std::vector<double>& got, const std::vector<double>& want, std::int64_t k,
                const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size() && mismatches < 5; ++i) {
    if (got[i] != want[i]) {
      ++mismatches;
      ADD_FAILURE() << what << ": w[" << static_cast<std::int64_t>(i) / k << "]["
                    << static_cast<std::int64_t>(i) % k << "] = " << got[i] << ", expected "
                    << want[i];
    }
  }
}

// ---- Layout maps
// ---------------------------------------------------------------------------------

TEST(W4a16Layout, NibblesOfTheFirstWord) {
  // Word 0 is lane 0 (g 0, t 0), k-step 0: nibble i + 4 h -> row 8 (i & 1), col 2 (i >> 1) + h.
  const std::pair<std::int64_t, std::int64_t> expected[8] = {{0, 0}, {8, 0}, {0, 2}, {8, 2},
                                                             {0, 1}, {8, 1}, {0, 3}, {8, 3}};
  for (int nibble = 0; nibble < 8; ++nibble) {
    const layout::WeightIndex at = layout::weightOf(0, nibble, 4096);
    EXPECT_EQ(at.row, expected[nibble].first) << "nibble " << nibble;
    EXPECT_EQ(at.col, expected[nibble].second) << "nibble " << nibble;
  }
}

TEST(W4a16Layout, LaneAndKStepOfAWord) {
  // Word 22 = lane 5 (g 1, t 1), k-step j 2; nibble 2 (i 2, h 0): row 1, col 16 + 8 + 2 = 26.
  layout::WeightIndex at = layout::weightOf(22, 2, 4096);
  EXPECT_EQ(at.row, 1);
  EXPECT_EQ(at.col, 26);
  at = layout::weightOf(22, 7, 4096);  // i 3, h 1: row 1 + 8, col 16 + 8 + 2 + 1
  EXPECT_EQ(at.row, 9);
  EXPECT_EQ(at.col, 27);
  at = layout::weightOf(3, 0, 4096);  // lane 0, j 3: col 12
  EXPECT_EQ(at.row, 0);
  EXPECT_EQ(at.col, 12);
  at = layout::weightOf(4, 0, 4096);  // lane 1 (g 0, t 1), j 0: col 16
  EXPECT_EQ(at.row, 0);
  EXPECT_EQ(at.col, 16);
  at = layout::weightOf(16, 1, 4096);  // lane 4 (g 1, t 0), nibble 1: row 1 + 8
  EXPECT_EQ(at.row, 9);
  EXPECT_EQ(at.col, 0);
}

TEST(W4a16Layout, ChunksThenRowTiles) {
  // k 128: two 64-wide chunks per row tile; 128 words (512 bytes) per (row tile, chunk), chunks
  // of one row tile consecutive.
  layout::WeightIndex at = layout::weightOf(128, 0, 128);  // row tile 0, chunk 1
  EXPECT_EQ(at.row, 0);
  EXPECT_EQ(at.col, 64);
  at = layout::weightOf(256, 0, 128);  // row tile 1, chunk 0
  EXPECT_EQ(at.row, 16);
  EXPECT_EQ(at.col, 0);
  // Word 511 = tile 3 (row tile 1, chunk 1), lane 31 (g 7, t 3), j 3; nibble 5 (i 1, h 1):
  // row 16 + 7 + 8 = 31, col 64 + 48 + 12 + 0 + 1 = 125.
  at = layout::weightOf(511, 5, 128);
  EXPECT_EQ(at.row, 31);
  EXPECT_EQ(at.col, 125);
  // With k 64 the same word is row tile 3, chunk 0.
  at = layout::weightOf(511, 5, 64);
  EXPECT_EQ(at.row, 48 + 15);
  EXPECT_EQ(at.col, 61);
}

TEST(W4a16Layout, WeightOfIsABijection) {
  for (const auto& [n, k] : {std::pair<std::int64_t, std::int64_t>{16, 64}, {32, 128}, {48, 192}}) {
    const std::int64_t words = packedWeightBytes(n, k) / 4;
    ASSERT_EQ(words * 8, n * k);
    std::vector<int> hits(static_cast<std::size_t>(n * k), 0);
    for (std::int64_t word = 0; word < words; ++word) {
      for (int nibble = 0; nibble < 8; ++nibble) {
        const layout::WeightIndex at = layout::weightOf(word, nibble, k);
        ASSERT_GE(at.row, 0);
        ASSERT_LT(at.row, n) << "word " << word << " nibble " << nibble;
        ASSERT_GE(at.col, 0);
        ASSERT_LT(at.col, k) << "word " << word << " nibble " << nibble;
        ++hits[static_cast<std::size_t>(at.row * k + at.col)];
      }
    }
    for (std::int64_t i = 0; i < n * k; ++i) {
      EXPECT_EQ(hits[static_cast<std::size_t>(i)], 1)
          << n << " x " << k << ": (" << i / k << ", " << i % k << ")";
    }
  }
}

TEST(W4a16Layout, ScalePositionsArePairOrder) {
  const std::int64_t rows[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
  for (int pos = 0; pos < 16; ++pos) {
    EXPECT_EQ(layout::scaleRowOf(pos), rows[pos]) << "position " << pos;
    EXPECT_EQ(layout::scaleRowOf(16 + pos), 16 + rows[pos]) << "position " << 16 + pos;
    EXPECT_EQ(layout::scaleRowOf(4096 + pos), 4096 + rows[pos]) << "position " << 4096 + pos;
  }
}

TEST(W4a16Layout, AwqColumnOrder) {
  // AutoAWQ's AWQ_ORDER 0, 2, 4, 6, 1, 3, 5, 7 (nibble -> column), read the other way.
  const int nibbles[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int c = 0; c < 8; ++c) EXPECT_EQ(layout::awqNibble(c), nibbles[c]) << "column " << c;
}

// ---- Checkpoints: hand-written words ------------------------------------------------------------

// GPTQ, n 8, k 8, one group of 8: qweight [1][8] (8 K of a column per word, K j in nibble j),
// qzeros [1][1] (column c's z - 1 in nibble c), scales [1][8] fp16.
TEST(W4a16Reference, GptqLiteralWordsDequantizeByThePublishedFormula) {
  Checkpoint c;
  c.qweight = {0x76543210,                              // column 0: q = k
               static_cast<std::int32_t>(0xFFFFFFFFu),  // column 1: q = 15
               0x00000000,                              // column 2: q = 0
               static_cast<std::int32_t>(0x89ABCDEFu),  // column 3: q = 15 - k
               static_cast<std::int32_t>(0x80000001u),  // column 4: q = 1 at k 0, 8 at k 7
               0,
               0,
               0};
  c.qzeros = {0x76543210};  // column c stores c: z = c + 1
  const std::vector<std::uint16_t> scales = {
      bitsOf(0.5, kF16),   bitsOf(0.25, kF16), bitsOf(2, kF16), bitsOf(1, kF16),
      bitsOf(0.125, kF16), bitsOf(1, kF16),    bitsOf(1, kF16), bitsOf(1, kF16)};
  // w = scale * (q - (stored + 1)).
  const double expected[8][8] = {
      {-0.5, 0, 0.5, 1, 1.5, 2, 2.5, 3},                              // 0.5 * (k - 1)
      {3.25, 3.25, 3.25, 3.25, 3.25, 3.25, 3.25, 3.25},               // 0.25 * (15 - 2)
      {-6, -6, -6, -6, -6, -6, -6, -6},                               // 2 * (0 - 3)
      {11, 10, 9, 8, 7, 6, 5, 4},                                     // 1 * (15 - k - 4)
      {-0.5, -0.625, -0.625, -0.625, -0.625, -0.625, -0.625, 0.375},  // 0.125 * (q - 5)
      {-6, -6, -6, -6, -6, -6, -6, -6},                               // 0 - 6
      {-7, -7, -7, -7, -7, -7, -7, -7},
      {-8, -8, -8, -8, -8, -8, -8, -8},
  };
  const std::vector<double> w = dequantGptq(c, scales, kF16, 8, 8, 8);
  ASSERT_EQ(w.size(), 64u);
  for (int row = 0; row < 8; ++row) {
    for (int col = 0; col < 8; ++col) {
      EXPECT_EQ(w[static_cast<std::size_t>(row * 8 + col)], expected[row][col])
          << "w[" << row << "][" << col << "]";
    }
  }
  // Without qzeros the symmetric z = 8: column 0 is 0.5 * (k - 8).
  Checkpoint symmetric = c;
  symmetric.qzeros.clear();
  const std::vector<double> s = dequantGptq(symmetric, scales, kF16, 8, 8, 8);
  for (int col = 0; col < 8; ++col) EXPECT_EQ(s[static_cast<std::size_t>(col)], 0.5 * (col - 8));
  EXPECT_EQ(s[8], 0.25 * 7);  // column 1: 0.25 * (15 - 8)

  // packGptq writes exactly these words from the logical form.
  Quantized q;
  q.n = 8;
  q.k = 8;
  q.group = 8;
  q.scale_format = kF16;
  q.scales = scales;
  q.q.assign(64, 0);
  for (int col = 0; col < 8; ++col) {
    q.q[static_cast<std::size_t>(0 * 8 + col)] = static_cast<std::uint8_t>(col);
    q.q[static_cast<std::size_t>(1 * 8 + col)] = 15;
    q.q[static_cast<std::size_t>(3 * 8 + col)] = static_cast<std::uint8_t>(15 - col);
  }
  q.q[4 * 8 + 0] = 1;
  q.q[4 * 8 + 7] = 8;
  q.zeros = {1, 2, 3, 4, 5, 6, 7, 8};
  const Checkpoint packed = packGptq(q);
  EXPECT_EQ(packed.qweight, c.qweight);
  EXPECT_EQ(packed.qzeros, c.qzeros);
}

// AWQ, n 8, k 2, one group of 2: qweight [2][1] (8 columns of one K per word, AWQ's order),
// qzeros [1][1] (z itself, the same order), scales [1][8] bf16.
TEST(W4a16Reference, AwqLiteralWordsDequantizeByThePublishedFormula) {
  Checkpoint c;
  // K 0: nibble p holds p, so column c holds awqNibble(c): q = 0, 4, 1, 5, 2, 6, 3, 7.
  // K 1: nibble 0 (column 0) holds 15, every other column 0.
  c.qweight = {0x76543210, 0x0000000F};
  c.qzeros = {0x00000021};  // nibble 0 (column 0): z 1; nibble 1 (column 2): z 2; else 0
  std::vector<std::uint16_t> scales(8, bitsOf(1, kBF16));
  scales[0] = bitsOf(0.5, kBF16);
  scales[2] = bitsOf(2, kBF16);
  // w = (q - z) * scale.
  const double expected[8][2] = {{-0.5, 7}, {4, 0}, {-2, -4}, {5, 0},
                                 {2, 0},    {6, 0}, {3, 0},   {7, 0}};
  const std::vector<double> w = dequantAwq(c, scales, kBF16, 8, 2, 2);
  ASSERT_EQ(w.size(), 16u);
  for (int row = 0; row < 8; ++row) {
    for (int col = 0; col < 2; ++col) {
      EXPECT_EQ(w[static_cast<std::size_t>(row * 2 + col)], expected[row][col])
          << "w[" << row << "][" << col << "]";
    }
  }
  Checkpoint symmetric = c;
  symmetric.qzeros.clear();  // z = 8
  const std::vector<double> s = dequantAwq(symmetric, scales, kBF16, 8, 2, 2);
  EXPECT_EQ(s[0], -4);   // (0 - 8) * 0.5
  EXPECT_EQ(s[1], 3.5);  // (15 - 8) * 0.5
  EXPECT_EQ(s[2], -4);   // column 1: 4 - 8
  EXPECT_EQ(s[4], -14);  // column 2: (1 - 8) * 2

  Quantized q;
  q.n = 8;
  q.k = 2;
  q.group = 2;
  q.scale_format = kBF16;
  q.scales = scales;
  q.q = {0, 15, 4, 0, 1, 0, 5, 0, 2, 0, 6, 0, 3, 0, 7, 0};
  q.zeros = {1, 0, 2, 0, 0, 0, 0, 0};
  const Checkpoint packed = packAwq(q);
  EXPECT_EQ(packed.qweight, c.qweight);
  EXPECT_EQ(packed.qzeros, c.qzeros);
}

// ---- Round trips
// ---------------------------------------------------------------------------------

TEST(W4a16Reference, CheckpointsDequantizeToTheLogicalWeights) {
  const std::int64_t n = 32, k = 256, group = 128;
  std::uint64_t seed = 1;
  for (Format f : {kF16, kBF16}) {
    for (Zeros zeros : {Zeros::kNone, Zeros::kGptq}) {
      const Quantized w = randomQuantized(seed++, n, k, group, f, zeros);
      const Checkpoint c = packGptq(w);
      EXPECT_EQ(c.qweight.size(), static_cast<std::size_t>(k / 8 * n));
      EXPECT_EQ(c.qzeros.size(), zeros == Zeros::kNone ? 0u : static_cast<std::size_t>(2 * 4));
      expectSame(dequantGptq(c, w.scales, f, n, k, group), direct(w), k, "gptq");
    }
    for (Zeros zeros : {Zeros::kNone, Zeros::kAwq}) {
      const Quantized w = randomQuantized(seed++, n, k, group, f, zeros);
      const Checkpoint c = packAwq(w);
      EXPECT_EQ(c.qweight.size(), static_cast<std::size_t>(k * n / 8));
      expectSame(dequantAwq(c, w.scales, f, n, k, group), direct(w), k, "awq");
    }
  }
}

TEST(W4a16Reference, ZeroPointsCoverTheirWholeRange) {
  // GPTQ stores z - 1, so z 16 is nibble 15 and z 1 nibble 0; AWQ stores z 0..15 as is.
  Quantized w = randomQuantized(7, 16, 128, 128, kF16, Zeros::kGptq);
  for (std::size_t i = 0; i < w.zeros.size(); ++i) w.zeros[i] = static_cast<std::uint8_t>(1 + i);
  const Checkpoint gptq = packGptq(w);
  EXPECT_EQ(static_cast<std::uint32_t>(gptq.qzeros[0]), 0x76543210u);
  EXPECT_EQ(static_cast<std::uint32_t>(gptq.qzeros[1]), 0xFEDCBA98u);
  expectSame(dequantGptq(gptq, w.scales, kF16, 16, 128, 128), direct(w), 128, "gptq z 1..16");
  for (std::size_t i = 0; i < w.zeros.size(); ++i) w.zeros[i] = static_cast<std::uint8_t>(i);
  const Checkpoint awq = packAwq(w);
  EXPECT_EQ(static_cast<std::uint32_t>(awq.qzeros[0]), 0x75316420u);  // AWQ's column order
  EXPECT_EQ(static_cast<std::uint32_t>(awq.qzeros[1]), 0xFDB9ECA8u);
  expectSame(dequantAwq(awq, w.scales, kF16, 16, 128, 128), direct(w), 128, "awq z 0..15");
}

TEST(W4a16Reference, PackedLayoutHoldsTheCheckpointWeights) {
  const std::int64_t n = 48, k = 384, group = 128;
  std::uint64_t seed = 100;
  for (Format f : {kF16, kBF16}) {
    for (Zeros zeros : {Zeros::kNone, Zeros::kGptq, Zeros::kAwq}) {
      const Quantized w = randomQuantized(seed++, n, k, group, f, zeros);
      const Packed p = repackHost(w, f);
      EXPECT_EQ(p.weight.size(), static_cast<std::size_t>(n * k / 8));
      EXPECT_EQ(p.scales.size(), static_cast<std::size_t>(3 * n));
      EXPECT_EQ(p.zeros.size(), zeros == Zeros::kNone ? 0u : static_cast<std::size_t>(3 * n));
      const std::vector<double> packed = dequantPacked(p, f, n, k, group);
      // The scale format is the dtype: the same doubles as the checkpoint's own formula.
      if (zeros != Zeros::kAwq) {
        expectSame(packed, dequantGptq(packGptq(w), w.scales, f, n, k, group), k, "gptq");
      }
      if (zeros != Zeros::kGptq) {
        expectSame(packed, dequantAwq(packAwq(w), w.scales, f, n, k, group), k, "awq");
      }
    }
  }
}

TEST(W4a16Reference, Fp16CheckpointScalesAreRoundedToBf16) {
  const std::int64_t n = 32, k = 256, group = 128;
  for (Zeros zeros : {Zeros::kNone, Zeros::kGptq}) {
    const Quantized w = randomQuantized(200 + static_cast<int>(zeros), n, k, group, kF16, zeros);
    const std::vector<double> packed = dequantPacked(repackHost(w, kBF16), kBF16, n, k, group);
    expectSame(packed, direct(w, /*round_scales_to_bf16=*/true), k, "fp16 scales, bf16 dtype");
    // The rounding is not a no-op for these scales (3 more mantissa bits than bf16 has).
    int differ = 0;
    const std::vector<double> exact = direct(w);
    for (std::size_t i = 0; i < exact.size(); ++i) differ += packed[i] != exact[i] ? 1 : 0;
    EXPECT_GT(differ, 0);
  }
}

TEST(W4a16Reference, RepackHostWritesTheLayoutBitForBit) {
  // q[row][col] = (7 row + 3 col) % 16, the scale of row r is r + 1 and its zero point r.
  Quantized w;
  w.n = 16;
  w.k = 64;
  w.group = 64;
  w.scale_format = kBF16;
  w.q.resize(16 * 64);
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 64; ++col) {
      w.q[static_cast<std::size_t>(row * 64 + col)] =
          static_cast<std::uint8_t>((7 * row + 3 * col) % 16);
    }
  }
  for (int row = 0; row < 16; ++row) w.scales.push_back(bitsOf(row + 1, kBF16));
  for (int row = 0; row < 16; ++row) w.zeros.push_back(static_cast<std::uint8_t>(row));
  const Packed p = repackHost(w, kF16);
  // Word 0 nibbles 0..7 are (0,0) (8,0) (0,2) (8,2) (0,1) (8,1) (0,3) (8,3): q 0, 8, 6, 14, 3, 11,
  // 9, 1.
  EXPECT_EQ(p.weight[0], 0x19B3E680u);
  // Word 22 (lane 5, j 2) nibble 2 is (1, 26): q (7 + 78) % 16 = 5.
  EXPECT_EQ((p.weight[22] >> 8) & 0xFu, 5u);
  // Scales and zero points in pair order, as fp16: position 1 is row 8, position 2 row 1.
  EXPECT_EQ(p.scales[0], bitsOf(1, kF16));
  EXPECT_EQ(p.scales[1], bitsOf(9, kF16));
  EXPECT_EQ(p.scales[2], bitsOf(2, kF16));
  EXPECT_EQ(p.scales[15], bitsOf(16, kF16));
  EXPECT_EQ(p.zeros[1], bitsOf(8, kF16));
  EXPECT_EQ(p.zeros[14], bitsOf(7, kF16));
}

// ---- linear
// --------------------------------------------------------------------------------------

TEST(W4a16Reference, LinearHandComputed) {
  // m 2, n 3, k 4: y = x . w^T (+ bias).
  for (Format f : {kF16, kBF16}) {
    std::vector<std::uint16_t> x;
    for (double v : {1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.0, 2.0}) x.push_back(bitsOf(v, f));
    const std::vector<double> w = {1, 0, 0, 0, 0.5, -1, 2, 0.25, 0, 0, 0, 0};
    std::vector<std::uint16_t> bias;
    for (double v : {1.0, -2.0, 0.5}) bias.push_back(bitsOf(v, f));
    // Row 0: 1; 0.5 - 2 + 6 + 1 = 5.5; 0. Row 1: -1; -0.5 - 0.5 + 0 + 0.5 = -0.5; 0.
    const std::vector<double> plain = linear(f, 2, 3, 4, x.data(), w, nullptr);
    EXPECT_EQ(plain, (std::vector<double>{1, 5.5, 0, -1, -0.5, 0})) << common::formatName(f);
    const std::vector<double> biased = linear(f, 2, 3, 4, x.data(), w, bias.data());
    EXPECT_EQ(biased, (std::vector<double>{2, 3.5, 0.5, 0, -2.5, 0.5})) << common::formatName(f);
    const Decoder dec(f);
    EXPECT_EQ(linearAt(dec, 4, x.data() + 4, w.data() + 4, bias.data(), 1), -2.5);
    EXPECT_EQ(linearAt(dec, 4, x.data() + 4, w.data() + 4, nullptr, 1), -0.5);
    EXPECT_EQ(linearAt(dec, 4, x.data(), w.data() + 8, bias.data(), 2), 0.5);
  }
}

TEST(W4a16Reference, LinearIsUnrounded) {
  // 1 + 2^-12 is not a bf16 or fp16 value: linear() keeps it.
  const std::vector<std::uint16_t> x = {bitsOf(1, kBF16), bitsOf(1.0 / 4096, kBF16)};
  const std::vector<double> w = {1, 1};
  EXPECT_EQ(linear(kBF16, 1, 1, 2, x.data(), w, nullptr), (std::vector<double>{1 + 1.0 / 4096}));
}

}  // namespace
}  // namespace kiln::w4a16::reference
