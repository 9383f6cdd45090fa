// The fmha float64 reference on small hand-computed cases (head dim 2): the exact 16-bit decoding,
// softmax weights and the natural-log lse, uniform scores, one key, the scale, large scores, the
// bottom-right causal mask with sq < sk and sq > sk (queries that see no key: out 0, lse -inf),
// a sequence with no keys in a ragged batch (offsets of later sequences), the GQA head mapping and
// the lse layout [q_heads, total_q], and sliding windows (FlashAttention's window_size_left).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fmha/reference.h"

namespace kiln::fmha::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A packed problem of head dim 2 over host vectors; lengths as (sq, sk) per sequence.
struct Case {
  int q_heads = 1, kv_heads = 1;
  bool causal = false;
  int window_left = -1;
  double scale = 1.0;
  std::vector<std::int32_t> cu_q{0}, cu_k{0};
  std::vector<double> q, k, v;  // [total, heads, 2]
  std::vector<double> out, lse;

  Case(std::vector<std::pair<int, int>> lengths, int hq, int hkv) : q_heads(hq), kv_heads(hkv) {
    for (auto [sq, sk] : lengths) {
      cu_q.push_back(cu_q.back() + sq);
      cu_k.push_back(cu_k.back() + sk);
    }
    q.assign(static_cast<std::size_t>(cu_q.back()) * q_heads * 2, 0.0);
    k.assign(static_cast<std::size_t>(cu_k.back()) * kv_heads * 2, 0.0);
    v.assign(k.size(), 0.0);
  }
  Problem problem() const {
    Problem p;
    p.causal = causal;
    p.window_left = window_left;
    p.batch = static_cast<int>(cu_q.size()) - 1;
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.head_dim = 2;
    p.scale = scale;
    p.cu_seqlens_q = cu_q.data();
    p.cu_seqlens_k = cu_k.data();
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    return p;
  }
  void run() {
    out.assign(q.size(), 99.0);  // every element must be overwritten
    lse.assign(static_cast<std::size_t>(cu_q.back()) * q_heads, 99.0);
    attention(problem(), out.data(), lse.data());
  }
  // Element c of the row of token t, head h (q / out), or of key row j, KV head h (k / v).
  double& qAt(int t, int h, int c) {
    return q[(static_cast<std::size_t>(t) * q_heads + h) * 2 + c];
  }
  double& kAt(int j, int h, int c) {
    return k[(static_cast<std::size_t>(j) * kv_heads + h) * 2 + c];
  }
  double& vAt(int j, int h, int c) {
    return v[(static_cast<std::size_t>(j) * kv_heads + h) * 2 + c];
  }
  double outAt(int t, int h, int c) const {
    return out[(static_cast<std::size_t>(t) * q_heads + h) * 2 + c];
  }
  double lseAt(int t, int h) const { return lse[static_cast<std::size_t>(h) * cu_q.back() + t]; }
};

TEST(FmhaReference, VisibleKeysBottomRight) {
  EXPECT_EQ(visibleKeys(false, 0, 3, 5), 5);
  EXPECT_EQ(visibleKeys(true, 0, 3, 3), 1);  // sq == sk: the usual lower triangle
  EXPECT_EQ(visibleKeys(true, 2, 3, 3), 3);
  EXPECT_EQ(visibleKeys(true, 0, 2, 5), 4);  // sq < sk: query 0 sees keys 0..3
  EXPECT_EQ(visibleKeys(true, 1, 2, 5), 5);
  EXPECT_EQ(visibleKeys(true, 0, 4, 2), 0);  // sq > sk: queries 0, 1 see nothing
  EXPECT_EQ(visibleKeys(true, 1, 4, 2), 0);
  EXPECT_EQ(visibleKeys(true, 2, 4, 2), 1);
  EXPECT_EQ(visibleKeys(true, 3, 4, 2), 2);
  EXPECT_EQ(visibleKeys(false, 0, 1, 0), 0);
}

TEST(FmhaReference, UniformScoresAverageTheValues) {
  // q = 0: every score is 0, weights 1/3 each; out = mean of V rows, lse = log 3.
  Case c({{1, 3}}, 1, 1);
  const double vals[3][2] = {{1, -2}, {2, 4}, {6, 1}};
  for (int j = 0; j < 3; ++j) {
    c.kAt(j, 0, 0) = j + 1.0;
    c.kAt(j, 0, 1) = -j;
    for (int e = 0; e < 2; ++e) c.vAt(j, 0, e) = vals[j][e];
  }
  c.run();
  EXPECT_NEAR(c.outAt(0, 0, 0), 3.0, 1e-15);
  EXPECT_NEAR(c.outAt(0, 0, 1), 1.0, 1e-15);
  EXPECT_NEAR(c.lseAt(0, 0), std::log(3.0), 1e-15);
}

TEST(FmhaReference, OneKeyReturnsItsValueAndItsScore) {
  Case c({{1, 1}}, 1, 1);
  c.scale = 0.5;
  c.qAt(0, 0, 0) = 1.0;
  c.qAt(0, 0, 1) = 2.0;
  c.kAt(0, 0, 0) = 3.0;
  c.kAt(0, 0, 1) = -4.0;
  c.vAt(0, 0, 0) = 7.0;
  c.vAt(0, 0, 1) = -1.5;
  c.run();
  EXPECT_EQ(c.outAt(0, 0, 0), 7.0);
  EXPECT_EQ(c.outAt(0, 0, 1), -1.5);
  EXPECT_EQ(c.lseAt(0, 0), 0.5 * (3.0 - 8.0));  // log(exp(s)) = s
}

TEST(FmhaReference, SoftmaxWeightsFollowTheScale) {
  // Dots 0 and 1; scale ln 3 gives weights 1/4, 3/4, scale ln 7 gives 1/8, 7/8:
  // out = w0 (4, 0) + w1 (0, 4), lse = log(1 + e^scale).
  for (const double e : {3.0, 7.0}) {
    Case c({{1, 2}}, 1, 1);
    c.scale = std::log(e);
    c.qAt(0, 0, 0) = 1.0;
    c.kAt(1, 0, 0) = 1.0;
    c.vAt(0, 0, 0) = 4.0;
    c.vAt(1, 0, 1) = 4.0;
    c.run();
    EXPECT_NEAR(c.outAt(0, 0, 0), 4.0 / (1.0 + e), 1e-14) << e;
    EXPECT_NEAR(c.outAt(0, 0, 1), 4.0 * e / (1.0 + e), 1e-14) << e;
    EXPECT_NEAR(c.lseAt(0, 0), std::log(1.0 + e), 1e-14) << e;
  }
}

TEST(FmhaReference, LargeScoresDoNotOverflow) {
  // Scores 1000 and 1000 + ln 3 (exp would overflow without the max): weights 1/4, 3/4.
  Case c({{1, 2}}, 1, 1);
  c.qAt(0, 0, 0) = 1.0;
  c.kAt(0, 0, 0) = 1000.0;
  c.kAt(1, 0, 0) = 1000.0 + std::log(3.0);
  c.vAt(0, 0, 0) = 4.0;
  c.vAt(1, 0, 1) = 4.0;
  c.run();
  EXPECT_NEAR(c.outAt(0, 0, 0), 1.0, 1e-12);
  EXPECT_NEAR(c.outAt(0, 0, 1), 3.0, 1e-12);
  EXPECT_NEAR(c.lseAt(0, 0), 1000.0 + std::log(4.0), 1e-12);
}

// K = 0 (every score 0), V row j = (j, 10 j): a query seeing n keys gets the mean of the first n
// rows, ((n - 1) / 2, 5 (n - 1)), and lse log n.
void fillUniformPrefix(Case& c, int total_k) {
  for (int j = 0; j < total_k; ++j) {
    c.vAt(j, 0, 0) = j;
    c.vAt(j, 0, 1) = 10.0 * j;
  }
}

TEST(FmhaReference, CausalIsBottomRightWhenFewerQueriesThanKeys) {
  // sq 2, sk 5 (chunked prefill): query 0 sees keys 0..3, query 1 sees all 5. Without the mask
  // both see 5.
  for (const bool causal : {true, false}) {
    Case c({{2, 5}}, 1, 1);
    c.causal = causal;
    fillUniformPrefix(c, 5);
    c.run();
    const int n0 = causal ? 4 : 5;
    EXPECT_NEAR(c.outAt(0, 0, 0), (n0 - 1) / 2.0, 1e-14) << causal;
    EXPECT_NEAR(c.outAt(0, 0, 1), 5.0 * (n0 - 1), 1e-13) << causal;
    EXPECT_NEAR(c.lseAt(0, 0), std::log(n0), 1e-15) << causal;
    EXPECT_NEAR(c.outAt(1, 0, 0), 2.0, 1e-14) << causal;
    EXPECT_NEAR(c.lseAt(1, 0), std::log(5.0), 1e-15) << causal;
  }
}

TEST(FmhaReference, QueriesThatSeeNoKeyGetZeroAndMinusInfinity) {
  // Causal, sq 4, sk 2: queries 0 and 1 see no key (j <= i - 2), query 2 sees key 0, query 3
  // both keys.
  Case c({{4, 2}}, 1, 1);
  c.causal = true;
  fillUniformPrefix(c, 2);
  c.vAt(0, 0, 0) = 3.0;  // rows (3, 0), (1, 10)
  c.run();
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(c.outAt(t, 0, 0), 0.0) << t;
    EXPECT_EQ(c.outAt(t, 0, 1), 0.0) << t;
    EXPECT_EQ(c.lseAt(t, 0), -kInf) << t;
  }
  EXPECT_EQ(c.outAt(2, 0, 0), 3.0);
  EXPECT_EQ(c.outAt(2, 0, 1), 0.0);
  EXPECT_EQ(c.lseAt(2, 0), 0.0);
  EXPECT_NEAR(c.outAt(3, 0, 0), 2.0, 1e-15);
  EXPECT_NEAR(c.outAt(3, 0, 1), 5.0, 1e-15);
  EXPECT_NEAR(c.lseAt(3, 0), std::log(2.0), 1e-15);
}

TEST(FmhaReference, RaggedBatchWithAnEmptyKeySequence) {
  // Sequences (sq, sk) = (2, 0), (0, 3), (1, 2): the first has no keys (out 0, lse -inf for
  // both its queries), the second no queries; the third reads key rows 3, 4 and writes token 2.
  Case c({{2, 0}, {0, 3}, {1, 2}}, 1, 1);
  fillUniformPrefix(c, 5);  // key rows 0..4 = (j, 10 j); sequence 2 owns rows 3 and 4
  c.run();
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(c.outAt(t, 0, 0), 0.0) << t;
    EXPECT_EQ(c.outAt(t, 0, 1), 0.0) << t;
    EXPECT_EQ(c.lseAt(t, 0), -kInf) << t;
  }
  EXPECT_NEAR(c.outAt(2, 0, 0), 3.5, 1e-15);
  EXPECT_NEAR(c.outAt(2, 0, 1), 35.0, 1e-13);
  EXPECT_NEAR(c.lseAt(2, 0), std::log(2.0), 1e-15);
}

TEST(FmhaReference, GqaMapsQueryHeadsToKvHeadsAndLseIsHeadMajor) {
  // 4 query heads on 2 KV heads, one sequence of 2 query tokens and 2 keys whose scores are equal
  // per head: heads 0, 1 average KV head 0's values, heads 2, 3 KV head 1's. Query head h
  // has q = (h, 0) and the keys (1, 0), so its lse is h + log 2 (scale 1): the layout [q_heads,
  // total_q] puts lse(t, h) at h * total_q + t.
  Case c({{2, 2}}, 4, 2);
  for (int t = 0; t < 2; ++t) {
    for (int h = 0; h < 4; ++h) c.qAt(t, h, 0) = h;
  }
  for (int j = 0; j < 2; ++j) {
    for (int h = 0; h < 2; ++h) {
      c.kAt(j, h, 0) = 1.0;
      c.vAt(j, h, 0) = 10.0 * (h + 1) + j;  // KV head 0: 10, 11; head 1: 20, 21
      c.vAt(j, h, 1) = -(h + 1.0);
    }
  }
  c.run();
  for (int t = 0; t < 2; ++t) {
    for (int h = 0; h < 4; ++h) {
      const int kvh = h / 2;
      EXPECT_NEAR(c.outAt(t, h, 0), 10.0 * (kvh + 1) + 0.5, 1e-13) << t << " " << h;
      EXPECT_NEAR(c.outAt(t, h, 1), -(kvh + 1.0), 1e-14) << t << " " << h;
      EXPECT_NEAR(c.lseAt(t, h), h + std::log(2.0), 1e-14) << t << " " << h;
    }
  }
}

TEST(FmhaReference, MqaAndNoLse) {
  // MQA (one KV head for 3 query heads), lse not requested: every head returns the one key's value.
  Case c({{1, 1}}, 3, 1);
  c.vAt(0, 0, 0) = 5.0;
  c.vAt(0, 0, 1) = -6.0;
  std::vector<double> out(c.q.size(), 99.0);
  attention(c.problem(), out.data(), nullptr);
  for (int h = 0; h < 3; ++h) {
    EXPECT_EQ(out[static_cast<std::size_t>(h) * 2], 5.0) << h;
    EXPECT_EQ(out[static_cast<std::size_t>(h) * 2 + 1], -6.0) << h;
  }
}

TEST(FmhaReference, SlidingWindowRangesFollowFlashAttention) {
  // window_left W keeps keys i + sk - sq - W .. i + sk - sq: W + 1 keys at most.
  EXPECT_EQ(visibleRange(true, -1, 5, 8, 8).begin, 0);  // no window: the causal prefix
  EXPECT_EQ(visibleRange(true, -1, 5, 8, 8).end, 6);
  EXPECT_EQ(visibleRange(true, 0, 5, 8, 8).begin, 5);  // W = 0: the diagonal key alone
  EXPECT_EQ(visibleRange(true, 0, 5, 8, 8).count(), 1);
  EXPECT_EQ(visibleRange(true, 2, 5, 8, 8).begin, 3);
  EXPECT_EQ(visibleRange(true, 2, 5, 8, 8).count(), 3);
  EXPECT_EQ(visibleRange(true, 2, 1, 8, 8).begin, 0);  // the window clipped at key 0
  EXPECT_EQ(visibleRange(true, 2, 1, 8, 8).count(), 2);
  EXPECT_EQ(visibleRange(true, 100, 5, 8, 8).count(), 6);  // longer than the sequence
  EXPECT_EQ(visibleRange(true, 1, 0, 2, 5).begin, 2);      // sq < sk: query 0's diagonal is key 3
  EXPECT_EQ(visibleRange(true, 1, 0, 2, 5).end, 4);
  EXPECT_EQ(visibleRange(true, 1, 0, 4, 2).count(), 0);  // sq > sk: query 0 sees nothing
  EXPECT_EQ(visibleRange(false, -1, 0, 4, 2).count(), 2);
}

TEST(FmhaReference, SlidingWindowAveragesOnlyTheWindow) {
  // Uniform scores, sq = sk = 6, W = 2: query i averages keys max(0, i - 2) .. i.
  Case c({{6, 6}}, 1, 1);
  c.causal = true;
  c.window_left = 2;
  fillUniformPrefix(c, 6);
  c.run();
  for (int i = 0; i < 6; ++i) {
    const int lo = std::max(0, i - 2);
    const double mean = (lo + i) / 2.0;
    EXPECT_NEAR(c.outAt(i, 0, 0), mean, 1e-14) << i;
    EXPECT_NEAR(c.outAt(i, 0, 1), 10.0 * mean, 1e-13) << i;
    EXPECT_NEAR(c.lseAt(i, 0), std::log(i - lo + 1.0), 1e-15) << i;
  }
}

TEST(FmhaReference, RelativeL2) {
  const Decoder dec(Format::kBFloat16);
  const std::uint16_t got[2] = {0x3f80, 0x4000};  // 1, 2
  const double exact[2] = {1.0, 2.0};
  EXPECT_EQ(relativeL2(dec, 2, got, exact), 0.0);
  const double off[2] = {1.0, 2.5};  // ||(0, -0.5)|| / ||(1, 2.5)||
  EXPECT_NEAR(relativeL2(dec, 2, got, off), 0.5 / std::sqrt(7.25), 1e-15);
  const double zero[2] = {0.0, 0.0};  // a zero reference: the plain norm of got
  EXPECT_NEAR(relativeL2(dec, 2, got, zero), std::sqrt(5.0), 1e-15);
  const std::uint16_t nan[2] = {0x7fc0, 0x3f80};
  EXPECT_TRUE(std::isnan(relativeL2(dec, 2, nan, exact)));
}

}  // namespace
}  // namespace kiln::fmha::reference
