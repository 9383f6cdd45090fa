// The gdn float64 reference on cases small enough to compute by hand, so the ground truth of the
// GPU numerics is itself checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

// The fused gates by hand: a + dt_bias = 0 gives softplus log 2, so g = -exp(a_log) log 2; b = 0
// gives beta 1/2; above the threshold softplus is the identity; sigmoid saturates to 1 and 0.
TEST(GdnReference, GatesFromTheGatingInputs) {
  reference::Gates gt = reference::gates(0.5, 0.0, std::log(3.0), -0.5);
  EXPECT_NEAR(gt.g, -3.0 * std::log(2.0), 1e-12);
  EXPECT_NEAR(gt.beta, 0.5, 1e-15);
  gt = reference::gates(25.0, 40.0, 0.0, 0.0);  // softplus(25) = 25 (threshold 20)
  EXPECT_DOUBLE_EQ(gt.g, -25.0);
  EXPECT_NEAR(gt.beta, 1.0, 1e-15);
  gt = reference::gates(1.0, -2.0, 0.0, 1.0);  // softplus(2) = log(1 + e^2), sigmoid(-2)
  EXPECT_NEAR(gt.g, -std::log(1.0 + std::exp(2.0)), 1e-12);
  EXPECT_NEAR(gt.beta, 1.0 / (1.0 + std::exp(2.0)), 1e-15);
  gt = reference::gates(-40.0, -800.0, 0.0, 0.0);  // softplus(-40) ~ e^-40; sigmoid(-800) = 0
  EXPECT_NEAR(gt.g, -std::exp(-40.0), 1e-25);
  EXPECT_EQ(gt.beta, 0.0);
}

// Batch of 2 with Hv = 2, H = 1: both value heads read query/key head 0; slot -1 skips
// sequence 1 (its output keeps its poison, no state is touched); sequence 0 uses slot 1.
TEST(GdnReference, GroupedHeadsSlotsAndSkips) {
  const int batch = 2, hq = 1, hv = 2, dk = 1, dv = 1;
  std::vector<double> q = {1, 1}, k = {1, 1}, v = {3, 4, 5, 6}, g = {0, 0, 0, 0},
                      beta = {1, 1, 1, 1};
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

// ---- multi-token (gdn_decode_mtp) ----------------------------------------------------------

// d_k = d_v = 1, zero state, q = k = 1 (normalised: n = 1 / sqrt(1 + eps), ~1), scale 1:
//   token 0: g = 0, beta = 1, v = 2:      S = 0 + n * 1 * (2 - 0) = 2;        o = 2
//   token 1: g = ln 0.5, beta = 0.5, v = 4: S = 1 after the decay; u = 0.5 (4 - 1) = 1.5;
//            S = 1 + 1.5 = 2.5;           o = 2.5
// The cache holds the state after each token; `state` ends as the last one.
TEST(GdnReference, MtpScalarTwoTokens) {
  const double q[] = {1, 1}, k[] = {1, 1}, v[] = {2, 4}, g[] = {0, std::log(0.5)},
               beta[] = {1, 0.5};
  double state = 0, cache[] = {-99, -99}, out[] = {-99, -99};
  reference::decodeMtpHead(2, 1, 1, q, k, v, g, beta, 1.0, &state, cache, out);
  EXPECT_NEAR(cache[0], 2.0, 1e-5);
  EXPECT_NEAR(cache[1], 2.5, 1e-5);
  EXPECT_NEAR(out[0], 2.0, 1e-5);
  EXPECT_NEAR(out[1], 2.5, 1e-5);
  EXPECT_EQ(state, cache[1]);
}

// d_k = 2, d_v = 1, state [1, 2]^T:
//   token 0 (the decode test above): q = e1, k = e0, v = 2, exp(g) = 0.5, beta = 1 -> S = [2, 1], o
//   = 1 token 1: q = e0, k = e1, v = 3, g = 0, beta = 0.5: S^T k = 1; u = 0.5 (3 - 1) = 1;
//            S = [2, 1 + 1] = [2, 2]; o = S^T q = 2
TEST(GdnReference, MtpDeltaAlongTwoKeys) {
  const double q[] = {0, 1, 1, 0}, k[] = {1, 0, 0, 1}, v[] = {2, 3}, g[] = {std::log(0.5), 0},
               beta[] = {1, 0.5};
  double state[] = {1, 2}, cache[4] = {}, out[2] = {};
  reference::decodeMtpHead(2, 2, 1, q, k, v, g, beta, 1.0, state, cache, out);
  EXPECT_NEAR(cache[0], 2.0, 1e-6);
  EXPECT_NEAR(cache[1], 1.0, 1e-12);
  EXPECT_NEAR(cache[2], 2.0, 1e-6);
  EXPECT_NEAR(cache[3], 2.0, 1e-5);
  EXPECT_NEAR(out[0], 1.0, 1e-6);
  EXPECT_NEAR(out[1], 2.0, 1e-5);
}

// Batch 2, T 2, H 1, Hv 2, d_k = d_v = 1. With q = k = 1, g = 0, beta = 1 the rule writes
// S = S (1 - n^2) + n v ~ v, so every state and output is ~ its token's v. Sequence 0 uses slot 1
// and writes cache row b = 0 (the cache is indexed by sequence, not slot); sequence 1 is skipped
// (slot -1), its outputs and cache rows keep their poison; the pool is only read.
TEST(GdnReference, MtpSlotsSkipsAndCacheBySequence) {
  const int batch = 2, tokens = 2, hq = 1, hv = 2, dk = 1, dv = 1;
  const std::vector<double> q(4, 1.0), k(4, 1.0);
  const std::vector<double> v = {3, 4, 5, 6, 7, 8, 9, 10};  // [b, t, hv]
  const std::vector<double> g(8, 0.0), beta(8, 1.0);
  const std::vector<std::int32_t> slots = {1, -1};
  const std::vector<double> state = {7, 8, 1, 2};  // [slot, hv]
  std::vector<double> cache(8, -99.0), out(8, -99.0);
  reference::decodeMtp(batch, tokens, hq, hv, dk, dv, q, k, v, g, beta, slots, 1.0, state, cache,
                       out);
  for (int i = 0; i < 4; ++i) {  // sequence 0: (t, hv) = (0,0) (0,1) (1,0) (1,1)
    EXPECT_NEAR(cache[i], v[i], 1e-5) << i;
    EXPECT_NEAR(out[i], v[i], 1e-5) << i;
  }
  for (int i = 4; i < 8; ++i) {
    EXPECT_EQ(cache[i], -99.0) << i;
    EXPECT_EQ(out[i], -99.0) << i;
  }
  // Token 0 of head 0 started from slot 1's 1 (not slot 0's 7): S = 1 (1 - n^2) + n 3.
  const double n = 1 / std::sqrt(1 + reference::kL2Eps);
  EXPECT_NEAR(cache[0], 1 * (1 - n * n) + n * 3, 1e-12);
}

// T tokens of the multi-token form are T one-token steps, each from the state the last one left:
// checked on random data (d_k = 3, d_v = 2, T = 3, grouped heads), bit for bit.
TEST(GdnReference, MtpIsDecodeTokenAfterToken) {
  const int batch = 2, tokens = 3, hq = 1, hv = 2, dk = 3, dv = 2, num_slots = 3;
  std::uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(x >> 11) / static_cast<double>(1ULL << 53) * 2 - 1;  // [-1, 1)
  };
  auto fill = [&](std::size_t n) {
    std::vector<double> r(n);
    for (double& e : r) e = next();
    return r;
  };
  const std::size_t rows = static_cast<std::size_t>(batch) * tokens;
  const auto q = fill(rows * hq * dk), k = fill(rows * hq * dk), v = fill(rows * hv * dv);
  auto g = fill(rows * hv), beta = fill(rows * hv);
  for (double& e : g) e = -std::fabs(e);
  for (double& e : beta) e = std::fabs(e);
  const auto state = fill(static_cast<std::size_t>(num_slots) * hv * dk * dv);
  const std::vector<std::int32_t> slots = {2, 0};
  std::vector<double> cache(rows * hv * dk * dv), out(rows * hv * dv);
  reference::decodeMtp(batch, tokens, hq, hv, dk, dv, q, k, v, g, beta, slots, 0.5, state, cache,
                       out);

  std::vector<double> pool = state;  // decode() updates it in place, token after token
  for (int t = 0; t < tokens; ++t) {
    std::vector<double> qt, kt, vt, gt, bt;  // token t of every sequence: the decode layouts
    for (int b = 0; b < batch; ++b) {
      const std::size_t row = static_cast<std::size_t>(b) * tokens + t;
      qt.insert(qt.end(), q.begin() + row * hq * dk, q.begin() + (row + 1) * hq * dk);
      kt.insert(kt.end(), k.begin() + row * hq * dk, k.begin() + (row + 1) * hq * dk);
      vt.insert(vt.end(), v.begin() + row * hv * dv, v.begin() + (row + 1) * hv * dv);
      gt.insert(gt.end(), g.begin() + row * hv, g.begin() + (row + 1) * hv);
      bt.insert(bt.end(), beta.begin() + row * hv, beta.begin() + (row + 1) * hv);
    }
    std::vector<double> ot(static_cast<std::size_t>(batch) * hv * dv);
    reference::decode(batch, hq, hv, dk, dv, qt, kt, vt, gt, bt, slots, 0.5, pool, ot);
    for (int b = 0; b < batch; ++b) {
      const std::size_t row = static_cast<std::size_t>(b) * tokens + t;
      const std::size_t head_state = static_cast<std::size_t>(hv) * dk * dv;
      for (std::size_t i = 0; i < head_state; ++i) {
        EXPECT_EQ(cache[row * head_state + i],
                  pool[static_cast<std::size_t>(slots[b]) * head_state + i]);
      }
      for (int i = 0; i < hv * dv; ++i) {
        EXPECT_EQ(out[row * hv * dv + i], ot[static_cast<std::size_t>(b) * hv * dv + i]);
      }
    }
  }
}

// The commit by hand: a [batch 6, T 3, Hv 2] cache of d_k = d_v = 1 whose value names its (b, t,
// hv) as 100 b + 10 t + hv, a pool of 8 slots holding -slot. Sequence 0 accepts 2 tokens (slot 5
// gets t = 1), 1 accepts all 3 (slot 0 gets t = 2), 2 accepts 1 (slot 7 gets t = 0), 3 accepts 0,
// 4 is skipped (slot -1) though it accepted 2, 5 accepted 4 > T and -1: out of contract, nothing
// written. Every slot no committing sequence names keeps its value.
TEST(GdnReference, MtpCommitCopiesTheLastAcceptedState) {
  const int batch = 6, tokens = 3, hv = 2;
  std::vector<double> cache;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < tokens; ++t)
      for (int h = 0; h < hv; ++h) cache.push_back(100 * b + 10 * t + h);
  std::vector<double> state;
  for (int slot = 0; slot < 8; ++slot)
    for (int h = 0; h < hv; ++h) state.push_back(-slot);
  const std::vector<std::int32_t> slots = {5, 0, 7, 3, -1, 2};
  const std::vector<std::int32_t> accepted = {2, 3, 1, 0, 2, 4};
  reference::commitMtp(batch, tokens, hv, 1, 1, cache, slots, accepted, state);
  const std::vector<double> expected = {120, 121, -1, -1, -2, -2, -3,  -3,
                                        -4,  -4,  10, 11, -6, -6, 200, 201};
  EXPECT_EQ(state, expected);
  std::vector<std::int32_t> negative = {-1, 0, 0, 0, 0, 0};  // a negative count: nothing either
  std::vector<double> again = expected;
  reference::commitMtp(batch, tokens, hv, 1, 1, cache, slots, negative, again);
  EXPECT_EQ(again, expected);
  EXPECT_TRUE(reference::commits(0, 1, 1));
  EXPECT_FALSE(reference::commits(0, 2, 1));
  EXPECT_FALSE(reference::commits(-3, 1, 1));
}

// A decode step from the committed state is the decode over the accepted tokens: decodeMtp's
// cache entry n - 1, committed, is the pool decode() leaves after the first n tokens one by one.
TEST(GdnReference, MtpCommitThenDecodeContinuesTheAcceptedTokens) {
  const int tokens = 3, hq = 1, hv = 1, dk = 2, dv = 2;
  const std::vector<double> q = {1, 0.5, -1, 2, 0.25, 1}, k = {0.5, 1, 1, -1, 2, 0.5};
  const std::vector<double> v = {1, -1, 0.5, 2, -0.5, 1}, g = {-0.1, -0.2, -0.3},
                            beta = {0.5, 0.75, 0.25};
  const std::vector<std::int32_t> slots = {1};
  const std::vector<double> state0 = {0, 0, 0, 0, 0.5, -0.5, 1, 0.25};
  std::vector<double> cache(static_cast<std::size_t>(tokens) * dk * dv), out(tokens * dv);
  reference::decodeMtp(1, tokens, hq, hv, dk, dv, q, k, v, g, beta, slots, 1.0, state0, cache, out);
  for (std::int32_t n = 1; n <= tokens; ++n) {
    std::vector<double> committed = state0;
    reference::commitMtp(1, tokens, hv, dk, dv, cache, slots, {n}, committed);
    std::vector<double> pool = state0, o(dv);
    for (int t = 0; t < n; ++t) {
      reference::decode(1, hq, hv, dk, dv, {q[2 * t], q[2 * t + 1]}, {k[2 * t], k[2 * t + 1]},
                        {v[2 * t], v[2 * t + 1]}, {g[t]}, {beta[t]}, slots, 1.0, pool, o);
    }
    EXPECT_EQ(committed, pool) << n;
  }
}

// Prefill over a packed batch of three sequences (lengths 2, 0, 1; d_k = d_v = 1, H = Hv = 1):
// sequence 0 continues its slot's state token by token, sequence 1 (no token, fresh) writes zero
// back, sequence 2 is skipped (negative slot): its output and no slot touched.
TEST(GdnReference, PrefillSequencesSlotsFreshAndSkipped) {
  const std::vector<std::int32_t> cu = {0, 2, 2, 3};
  const std::vector<double> q = {1, 2, 3}, k = {2, -1, 4}, v = {1, 3, 5}, g = {-0.5, -0.25, -1},
                            beta = {0.5, 1, 1};
  const std::vector<std::int32_t> slots = {2, 0, -1}, has_initial = {1, 0, 1};
  std::vector<double> state = {7, 8, 0.5}, out = {-9, -9, -9};
  reference::prefill(3, 1, 1, 1, 1, cu, q, k, v, g, beta, slots, has_initial, 0.5, state, out);
  // Sequence 0 by hand, from the slot's 0.5, with decodeHead per token.
  double s = 0.5, o0 = 0, o1 = 0;
  reference::decodeHead(1, 1, &q[0], &k[0], &v[0], g[0], beta[0], 0.5, &s, &o0);
  reference::decodeHead(1, 1, &q[1], &k[1], &v[1], g[1], beta[1], 0.5, &s, &o1);
  EXPECT_EQ(state[2], s);
  EXPECT_EQ(out[0], o0);
  EXPECT_EQ(out[1], o1);
  EXPECT_EQ(state[0], 0.0);  // fresh, no token: zero written back
  EXPECT_EQ(state[1], 8.0);  // no sequence's slot
  EXPECT_EQ(out[2], -9.0);   // skipped
}

// Prefill of T tokens and then one decode step is the rule over the T + 1 tokens: what the GPU
// test's then_decode cases rely on (d_k = 2, d_v = 2, from a nonzero state).
TEST(GdnReference, PrefillThenDecodeIsTheRuleOverAllTokens) {
  const int dk = 2, dv = 2, T = 3;
  const std::vector<double> q = {1, 0, 0.5, 1, -1, 2, 3, 1}, k = {0, 1, 1, 1, 2, -1, 1, 3},
                            v = {1, 2, -1, 0, 3, 1, 2, 2}, g = {-0.1, -0.2, -0.3, -0.4},
                            beta = {0.9, 0.5, 0.25, 1};
  std::vector<double> pool = {1, 2, 3, 4}, out(static_cast<std::size_t>(T) * dv);
  reference::prefill(1, 1, 1, dk, dv, {0, T}, q, k, v, g, beta, {0}, {}, 1.0, pool, out);
  std::vector<double> last(dv);
  reference::decodeHead(dk, dv, &q[T * dk], &k[T * dk], &v[T * dv], g[T], beta[T], 1.0, pool.data(),
                        last.data());
  std::vector<double> whole = {1, 2, 3, 4}, all((T + 1) * dv);
  reference::prefill(1, 1, 1, dk, dv, {0, T + 1}, q, k, v, g, beta, {0}, {}, 1.0, whole, all);
  EXPECT_EQ(pool, whole);
  EXPECT_EQ(last[0], all[T * dv]);
  EXPECT_EQ(last[1], all[T * dv + 1]);
}

}  // namespace
}  // namespace kiln::gdn
