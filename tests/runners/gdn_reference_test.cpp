// The gdn float64 reference on cases small enough to compute by hand, so the ground truth of the
// GPU numerics is itself checked.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gdn/reference.h"

namespace kiln::gdn {
namespace {

// d_k = d_v = 1, zero state: S = 0 -> u = beta v, S = k_n u, o = scale S q_n with k_n = k/|k|.
TEST(GdnReference, ScalarFromZeroState) {
  const double q = 2, k = -3, v = 5, g = -0.5, beta = 0.25, scale = 0.5;
  double state = 0, out = 0;
  reference::decodeHead(1, 1, &q, &k, &v, g, beta, scale, &state, &out);
  const double kn = k / std::sqrt(k * k + reference::kL2Eps);
  const double qn = q / std::sqrt(q * q + reference::kL2Eps);
  EXPECT_NEAR(state, kn * beta * v, 1e-12);
  EXPECT_NEAR(out, scale * state * qn, 1e-12);
}

// d_k = 2, d_v = 1, unit k along axis 0, state [1, 2]^T decayed by exp(g) = 0.5:
//   S = [0.5, 1]; S^T k = 0.5; u = 1 * (2 - 0.5) = 1.5; S = [2, 1]; q = axis 1 -> o = 1 (scale 1).
TEST(GdnReference, DecayDeltaAndReadout) {
  const double q[] = {0, 1}, k[] = {1, 0}, v = 2;
  double state[] = {1, 2}, out = 0;
  reference::decodeHead(2, 1, q, k, &v, std::log(0.5), 1.0, 1.0, state, &out);
  EXPECT_NEAR(state[0], 2.0, 1e-6);
  EXPECT_NEAR(state[1], 1.0, 1e-12);
  EXPECT_NEAR(out, 1.0, 1e-6);
}

// Batch of 2 with Hv = 2, H = 1: both value heads read query/key head 0; slot -1 skips
// sequence 1 (its output keeps its poison, no state is touched); sequence 0 uses slot 1.
TEST(GdnReference, GroupedHeadsSlotsAndSkips) {
  const int batch = 2, hq = 1, hv = 2, dk = 1, dv = 1;
  std::vector<double> q = {1, 1}, k = {1, 1}, v = {3, 4, 5, 6}, g = {0, 0, 0, 0}, beta = {1, 1, 1, 1};
  std::vector<std::int32_t> slots = {1, -1};
  std::vector<double> state(2 * hv * dk * dv, 0.0), out(batch * hv * dv, -99.0);
  reference::decode(batch, hq, hv, dk, dv, q, k, v, g, beta, slots, 1.0, state, out);
  const double n = 1 / std::sqrt(1 + reference::kL2Eps);
  EXPECT_NEAR(state[2], n * 3, 1e-12);  // slot 1, head 0
  EXPECT_NEAR(state[3], n * 4, 1e-12);  // slot 1, head 1
  EXPECT_EQ(state[0], 0.0);             // slot 0 untouched
  EXPECT_NEAR(out[0], n * n * 3, 1e-12);
  EXPECT_NEAR(out[1], n * n * 4, 1e-12);
  EXPECT_EQ(out[2], -99.0);
  EXPECT_EQ(out[3], -99.0);
}

}  // namespace
}  // namespace kiln::gdn
