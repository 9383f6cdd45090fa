// The gemv float64 reference on hand-computed cases (fp16 and bf16 bit patterns, a bias, rows of
// x padded past k with NaNs that must not be read), and its acceptance bound: the fp32 part grows
// with k and the scale, a 16-bit output adds half an ulp of the exact value (the two neighbours
// of an exact value between two values of the format pass, the next ones do not), and a host
// model of the kernel's own fp32 summation order (launch.h: a lane's strided vectors, 8 fmaf
// each, then a butterfly; bias, then one rounding) stays inside it (the 16-bit codec itself:
// bits16_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "gemv/launch.h"
#include "gemv/reference.h"

namespace kiln::gemv::reference {
namespace {

constexpr Format kF16 = Format::kFloat16;
constexpr Format kBF16 = Format::kBFloat16;
constexpr std::uint16_t kNan16 = 0x7e00;  // an fp16 NaN: in padding that must not be read

std::uint16_t f16(double v) {
  return roundToBits(v, kF16);
}
std::uint16_t bf16(double v) {
  return roundToBits(v, kBF16);
}

TEST(GemvReference, HandComputedProductsWithPaddedRowsAndBias) {
  // x [2, ldx 4] with k 2: the last two columns of each row are NaN padding. w [3, 2].
  const std::uint16_t x[] = {f16(1.0),  f16(2.0), kNan16, kNan16,
                             f16(-1.0), f16(0.5), kNan16, kNan16};
  const std::uint16_t w[] = {f16(1.0), f16(1.0), f16(2.0), f16(-1.0), f16(0.5), f16(3.0)};
  const std::uint16_t bias[] = {f16(0.25), f16(-2.0), f16(1.0)};
  Result r = gemv(kF16, 2, 3, 2, 4, x, w, nullptr);
  EXPECT_EQ(r.y, (std::vector<double>{3.0, 0.0, 6.5, -0.5, -2.5, 1.0}));
  EXPECT_EQ(r.scale, (std::vector<double>{3.0, 4.0, 6.5, 1.5, 2.5, 2.0}));
  r = gemv(kF16, 2, 3, 2, 4, x, w, bias);
  EXPECT_EQ(r.y, (std::vector<double>{3.25, -2.0, 7.5, -0.25, -4.5, 2.0}));
  EXPECT_EQ(r.scale, (std::vector<double>{3.25, 6.0, 7.5, 1.75, 4.5, 3.0}));
  // One row, one column of w: m 1, n 1.
  r = gemv(kF16, 1, 1, 2, 4, x + 4, w + 2, bias + 1);
  EXPECT_EQ(r.y, (std::vector<double>{-4.5}));
  EXPECT_EQ(r.scale, (std::vector<double>{4.5}));
}

TEST(GemvReference, Bf16PatternsAndExactProducts) {
  // bf16 holds 1 + 2^-7 and 1 - 2^-8 exactly; their product 1 - 2^-8 + 2^-7 - 2^-15 is exact in
  // float64 (and in no 16-bit format): the reference sums exactly at this size.
  const double a = 1.0 + std::ldexp(1.0, -7), b = 1.0 - std::ldexp(1.0, -8);
  ASSERT_EQ(toDouble(bf16(a), kBF16), a);
  ASSERT_EQ(toDouble(bf16(b), kBF16), b);
  const std::uint16_t x[] = {bf16(a), bf16(-3.0), bf16(0.0), bf16(1.0)};       // m 1, k 4
  const std::uint16_t w[] = {bf16(b),   bf16(2.0), bf16(-7.5), bf16(1024.0),   // w0
                             bf16(1.0), bf16(0.0), bf16(5.0),  bf16(-0.125)};  // w1
  const Result r = gemv(kBF16, 1, 2, 4, 4, x, w, nullptr);
  ASSERT_EQ(r.y.size(), 2u);
  EXPECT_EQ(r.y[0], a * b - 6.0 + 0.0 + 1024.0);
  EXPECT_EQ(r.scale[0], a * b + 6.0 + 0.0 + 1024.0);
  EXPECT_EQ(r.y[1], a - 0.125);
  EXPECT_EQ(r.scale[1], a + 0.125);
}

TEST(GemvReference, Fp32OutputToleranceIsTheAccumulationBound) {
  const double u = std::ldexp(1.0, -23);
  // (k / 8 + 41) errors of 2^-23, relative to the scale; no output rounding.
  EXPECT_EQ(tolerance(256, 1.0, 0.0, 0), 73.0 * u);
  EXPECT_EQ(tolerance(2048, 1.0, 5.0, 0), 297.0 * u);
  EXPECT_EQ(tolerance(8, 1.0, 0.0, 0), 42.0 * u);
  EXPECT_EQ(tolerance(2048, 1000.0, 0.0, 0), 297.0 * u * 1000.0);
  EXPECT_EQ(tolerance(2048, 0.0, 123.0, 0), 0.0);  // no terms: exact (nothing was rounded)
  // Grows with k and with the scale, not with the exact value.
  EXPECT_LT(tolerance(2048, 1.0, 0.0, 0), tolerance(8192, 1.0, 0.0, 0));
  EXPECT_LT(tolerance(2048, 1.0, 0.0, 0), tolerance(2048, 2.0, 0.0, 0));
  EXPECT_EQ(tolerance(2048, 1.0, 0.0, 0), tolerance(2048, 1.0, -1e6, 0));
}

TEST(GemvReference, SixteenBitOutputAddsHalfAnUlpOfTheExactValue) {
  // No accumulation error (scale 0): |exact| 2^-(bits + 1) + 2^-25.
  EXPECT_EQ(tolerance(8, 0.0, 1.0, 10), std::ldexp(1.0, -11) + std::ldexp(1.0, -25));
  EXPECT_EQ(tolerance(8, 0.0, -4.0, 7), std::ldexp(1.0, -6) + std::ldexp(1.0, -25));
  EXPECT_EQ(tolerance(8, 0.0, 0.0, 10), std::ldexp(1.0, -25));
  // The accumulation part, with 1 % on top (the fp32 sum is rounded, not the exact value).
  const double accumulate = tolerance(4096, 3.0, 0.0, 0);
  EXPECT_DOUBLE_EQ(tolerance(4096, 3.0, 2.0, 7),
                   accumulate * 1.01 + 2.0 * std::ldexp(1.0, -8) + std::ldexp(1.0, -25));
  // Symmetric in the sign of the exact value.
  EXPECT_EQ(tolerance(64, 1.0, 3.5, 10), tolerance(64, 1.0, -3.5, 10));
}

// |value of `bits` - exact| <= tolerance, with no accumulation error.
bool within(std::uint16_t bits, double exact, Format f) {
  const int mantissa = f == kF16 ? 10 : 7;
  return std::fabs(toDouble(bits, f) - exact) <= tolerance(8, 0.0, exact, mantissa);
}

TEST(GemvReference, TheTwoNeighboursOfAnExactValuePassTheNextOnesDoNot) {
  // fp16 near 1: 1 - 2^-11 (0x3bff), 1 (0x3c00), 1 + 2^-10 (0x3c01), 1 + 2^-9 (0x3c02). exact =
  // 1 + 2^-11, a tie: both 0x3c00 and 0x3c01 pass, nothing else.
  const double tie = 1.0 + std::ldexp(1.0, -11);
  EXPECT_TRUE(within(0x3c00, tie, kF16));
  EXPECT_TRUE(within(0x3c01, tie, kF16));
  EXPECT_FALSE(within(0x3bff, tie, kF16));
  EXPECT_FALSE(within(0x3c02, tie, kF16));
  // bf16 near -3.01: -3 (0xc040) and -3.015625 (0xc041) pass; -2.984375 and -3.03125 do not.
  EXPECT_TRUE(within(0xc040, -3.01, kBF16));
  EXPECT_TRUE(within(0xc041, -3.01, kBF16));
  EXPECT_FALSE(within(0xc03f, -3.01, kBF16));
  EXPECT_FALSE(within(0xc042, -3.01, kBF16));
  // Below fp16's smallest subnormal (2^-24): zero passes, 2^-24 only from 2^-25 up.
  EXPECT_TRUE(within(0x0000, 1e-30, kF16));
  EXPECT_FALSE(within(0x0001, 1e-30, kF16));
  EXPECT_TRUE(within(0x0001, std::ldexp(1.0, -25), kF16));
  EXPECT_TRUE(within(0x0000, std::ldexp(1.0, -25), kF16));
  // Every exact value's own rounding passes: a sweep over magnitudes of both formats.
  for (Format f : {kF16, kBF16}) {
    for (int e = -30; e <= 14; ++e) {
      for (int step = 0; step < 64; ++step) {
        const double v = std::ldexp(1.0 + step / 64.0 + 1.0 / 4096.0, e) * (step % 2 ? -1 : 1);
        EXPECT_TRUE(within(roundToBits(v, f), v, f)) << formatName(f) << " " << v;
      }
    }
  }
}

// ---- the kernel's summation order on the host ---------------------------------------------

// fp32 `acc` + `chunk` (exact) rounded toward zero: a tensor core's addition of a chunk of
// products to its accumulator, at its best (reference.h: the hardware may lose a little more,
// which the bound's factor 2 covers).
float addTowardZero(float acc, double chunk) {
  const double exact = static_cast<double>(acc) + chunk;
  const auto nearest = static_cast<float>(exact);
  if (std::fabs(static_cast<double>(nearest)) <= std::fabs(exact)) return nearest;
  return std::nextafter(nearest, 0.0f);
}

// y[i, j] in the kernel's order (gemv.cuh, launch.h): k in steps of 32, batches of kUnroll steps
// dealt to the kWarps warps in turn; a step is two mma chunks of 16 products, elements 8t + {0..3}
// and then 8t + {4..7} of the step for t = 0..3, each added to the warp's fp32 accumulator; warp 0
// adds the others in order; the bias is added in fp32.
float kernelSum(Format f, std::int64_t k, const std::uint16_t* x, const std::uint16_t* w,
                const std::uint16_t* bias) {
  constexpr int kStep = kVectorsPerStep * kElementsPerVector;
  float acc[kWarps] = {};
  const std::int64_t steps = (k + kStep - 1) / kStep;
  for (std::int64_t s = 0; s < steps; ++s) {
    const auto warp = static_cast<int>((s / kUnroll) % kWarps);
    for (int half = 0; half < 2; ++half) {
      double chunk = 0.0;
      for (int t = 0; t < 4; ++t) {
        for (int e = 0; e < 4; ++e) {
          const std::int64_t at = s * kStep + 8 * t + 4 * half + e;
          if (at < k) chunk += toDouble(x[at], f) * toDouble(w[at], f);
        }
      }
      acc[warp] = addTowardZero(acc[warp], chunk);
    }
  }
  float value = acc[0];
  for (int warp = 1; warp < kWarps; ++warp) value += acc[warp];
  if (bias != nullptr) value += static_cast<float>(toDouble(*bias, f));
  return value;
}

// splitmix64, as the GPU tests draw their bits.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

TEST(GemvReference, TheKernelsSummationOrderStaysWithinTheTolerance) {
  Rng rng{0x6e6d7621ULL};
  // Random signs (the usual case) and all terms positive (no cancellation: the accumulated
  // rounding is largest relative to the result), for k of one vector a lane and fewer, a tail,
  // and the largest k of the GPU test.
  for (Format f : {kF16, kBF16}) {
    const int bits = f == kF16 ? 10 : 7;
    for (std::int64_t k : {8, 264, 2048, 8200}) {
      for (bool positive : {false, true}) {
        const std::int64_t n = 16;
        std::vector<std::uint16_t> x(static_cast<std::size_t>(k));
        std::vector<std::uint16_t> w(static_cast<std::size_t>(n * k));
        std::vector<std::uint16_t> bias(static_cast<std::size_t>(n));
        for (auto& b : x) b = common::randomBits(rng, f, -4, 1, !positive);
        for (auto& b : w) b = common::randomBits(rng, f, -8, -3, !positive);
        for (auto& b : bias) b = common::randomBits(rng, f, -4, 0);
        const Result r = gemv(f, 1, n, k, k, x.data(), w.data(), bias.data());
        for (std::int64_t j = 0; j < n; ++j) {
          const float sum = kernelSum(f, k, x.data(), w.data() + j * k, bias.data() + j);
          const double exact = r.y[static_cast<std::size_t>(j)];
          const double scale = r.scale[static_cast<std::size_t>(j)];
          // float32 output: the sum itself; 16-bit: rounded once.
          EXPECT_LE(std::fabs(static_cast<double>(sum) - exact), tolerance(k, scale, exact, 0))
              << formatName(f) << " k " << k << " row " << j << (positive ? " positive" : "");
          const double rounded = toDouble(roundToBits(static_cast<double>(sum), f), f);
          EXPECT_LE(std::fabs(rounded - exact), tolerance(k, scale, exact, bits))
              << formatName(f) << " k " << k << " row " << j << (positive ? " positive" : "");
        }
      }
    }
  }
}

TEST(GemvReference, AWrongProductFailsTheTolerance) {
  // The bound is tight enough to catch a dropped or misread vector: y with the last 16-byte
  // vector of the row (8 elements) left out is outside it, for a float32 and a bf16 output.
  Rng rng{0x77ULL};
  const std::int64_t k = 2048;
  std::vector<std::uint16_t> x(static_cast<std::size_t>(k)), w(static_cast<std::size_t>(k));
  for (auto& b : x) b = common::randomBits(rng, kBF16, -4, 1);
  for (auto& b : w) b = common::randomBits(rng, kBF16, -8, -3);
  const Result full = gemv(kBF16, 1, 1, k, k, x.data(), w.data(), nullptr);
  const Result short_row = gemv(kBF16, 1, 1, k - 8, k, x.data(), w.data(), nullptr);
  const double dropped = std::fabs(full.y[0] - short_row.y[0]);
  ASSERT_GT(dropped, 0.0);
  EXPECT_GT(dropped, tolerance(k, full.scale[0], full.y[0], 0));
  EXPECT_GT(dropped, tolerance(k, full.scale[0], full.y[0], 7));
}

}  // namespace
}  // namespace kiln::gemv::reference
