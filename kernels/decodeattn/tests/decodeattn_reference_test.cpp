// The decodeattn float64 reference on small hand-computed cases (head dim 2, pages of 2 keys):
// the exact 16-bit decoding, softmax weights, the page-table walk (permuted pages, poisoned unused
// rows never read), the GQA head mapping, the empty-sequence convention, and the causal limits of
// several query tokens per sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "decodeattn/reference.h"

namespace kiln::decodeattn::reference {
namespace {

constexpr std::uint16_t kBf16One = 0x3f80, kBf16Two = 0x4000, kBf16Three = 0x4040,
                        kBf16Four = 0x4080, kBf16MinusOne = 0xbf80, kBf16Zero = 0x0000,
                        kBf16NaN = 0x7fc0;

// Head dim 2, one page of `page_size` keys per table entry; one query and one KV head and one
// query token unless set.
struct Case {
  std::vector<std::uint16_t> q, k, v;
  std::vector<std::int32_t> table, lens;
  int q_heads = 1, kv_heads = 1, query_tokens = 1;
  PagedProblem problem(int page_size, double scale) const {
    PagedProblem p;
    p.format = Format::kBFloat16;
    p.batch = static_cast<int>(lens.size());
    p.q_heads = q_heads;
    p.kv_heads = kv_heads;
    p.query_tokens = query_tokens;
    p.head_dim = 2;
    p.page_size = page_size;
    p.max_pages_per_seq = static_cast<int>(table.size() / lens.size());
    p.scale = scale;
    p.q = q.data();
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.page_table = table.data();
    p.seq_lens = lens.data();
    return p;
  }
};

TEST(DecodeAttentionReference, OneKeyReturnsItsValue) {
  const Case c{{kBf16One, kBf16Zero}, {kBf16Two, kBf16Zero}, {kBf16Three, kBf16MinusOne}, {0}, {1}};
  double out[2];
  decodeAttention(c.problem(16, 0.7), out);
  EXPECT_EQ(out[0], 3.0);
  EXPECT_EQ(out[1], -1.0);
}

TEST(DecodeAttentionReference, SoftmaxWeightsOfTwoKeys) {
  // Scores 0 and ln 3: weights 1/4 and 3/4; out = (4, 0)/4 + 3 (0, 4)/4 = (1, 3).
  const Case c{{kBf16One, kBf16Zero},
               {kBf16Zero, kBf16Zero, kBf16One, kBf16Zero},
               {kBf16Four, kBf16Zero, kBf16Zero, kBf16Four},
               {0},
               {2}};
  double out[2];
  decodeAttention(c.problem(16, std::log(3.0)), out);
  EXPECT_NEAR(out[0], 1.0, 1e-15);
  EXPECT_NEAR(out[1], 3.0, 1e-15);
}

TEST(DecodeAttentionReference, WalksPermutedPagesAndNeverReadsUnusedRows) {
  // Pages of 2 keys; the sequence's 3 keys are page 2 rows 0-1, then page 0 row 0. Page 1 and
  // page 0 row 1 hold NaN: a reference that read them would return NaN.
  // Equal keys: uniform weights, out = mean of the three values (1, 2, 3) and (0, 0, 3).
  const std::uint16_t n = kBf16NaN;
  Case c;
  c.q = {kBf16One, kBf16One};
  c.k = {kBf16One, kBf16One, n,        n,          // page 0: row 0 (key 2), row 1 unused
         n,        n,        n,        n,          // page 1 unused
         kBf16One, kBf16One, kBf16One, kBf16One};  // page 2: keys 0, 1
  c.v = {kBf16Three, kBf16Three, n, n, n, n, n, n, kBf16One, kBf16Zero, kBf16Two, kBf16Zero};
  c.table = {2, 0, 1};  // the third entry is past the length: never read
  c.lens = {3};
  double out[2];
  decodeAttention(c.problem(2, 0.5), out);
  EXPECT_NEAR(out[0], 2.0, 1e-15);
  EXPECT_NEAR(out[1], 1.0, 1e-15);
}

TEST(DecodeAttentionReference, GqaMapsQueryHeadToKvHeadByIntegerDivision) {
  // 4 query heads on 2 KV heads, one key: heads 0, 1 return KV head 0's value, heads 2, 3 head 1's.
  Case c{std::vector<std::uint16_t>(4 * 2, kBf16One),
         std::vector<std::uint16_t>(2 * 2, kBf16One),
         {kBf16One, kBf16Two, kBf16Three, kBf16Four},  // v: [1 key][2 heads][2 dims]
         {0},
         {1}};
  c.q_heads = 4;
  c.kv_heads = 2;
  double out[8];
  decodeAttention(c.problem(16, 1.0), out);
  const double want[8] = {1, 2, 1, 2, 3, 4, 3, 4};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], want[i]) << i;
}

TEST(DecodeAttentionReference, PageElementOfBothLayouts) {
  // Pages of 4 keys, 3 KV heads, head dim 8: 96 elements per page.
  // NHD: (page 2, row 1, head 2) = 2 * 96 + (1 * 3 + 2) * 8; HND: 2 * 96 + (2 * 4 + 1) * 8.
  EXPECT_EQ(pageElement(Layout::kNHD, 4, 3, 8, 2, 1, 2), 2u * 96 + 5 * 8);
  EXPECT_EQ(pageElement(Layout::kHND, 4, 3, 8, 2, 1, 2), 2u * 96 + 9 * 8);
  EXPECT_EQ(pageElement(Layout::kNHD, 4, 3, 8, 0, 3, 0), 9u * 8);
  EXPECT_EQ(pageElement(Layout::kHND, 4, 3, 8, 0, 3, 0), 3u * 8);
}

TEST(DecodeAttentionReference, HndCacheGivesTheSameResultAsNhd) {
  // 2 query heads on 2 KV heads, 3 keys in pages of 2 keys (page 1 then page 0), head dim 2; the
  // same logical keys and values stored once per layout.
  const std::vector<std::uint16_t> q = {kBf16One, kBf16Zero, kBf16Zero, kBf16One};
  // Logical key j, head h: K = (j + h, 1), V = (h, j).
  const std::uint16_t num[4] = {kBf16Zero, kBf16One, kBf16Two, kBf16Three};
  const std::vector<std::int32_t> table = {1, 0}, lens = {3};
  std::vector<std::uint16_t> k[2], v[2];
  for (int l = 0; l < 2; ++l) {
    const Layout layout = l == 0 ? Layout::kNHD : Layout::kHND;
    k[l].assign(2 * 2 * 2 * 2, kBf16NaN);
    v[l].assign(2 * 2 * 2 * 2, kBf16NaN);
    for (int j = 0; j < 3; ++j) {
      for (int h = 0; h < 2; ++h) {
        const std::size_t e = pageElement(layout, 2, 2, 2, table[j / 2], j % 2, h);
        k[l][e] = num[j + h > 3 ? 3 : j + h];
        k[l][e + 1] = kBf16One;
        v[l][e] = num[h];
        v[l][e + 1] = num[j];
      }
    }
  }
  double out[2][4];
  for (int l = 0; l < 2; ++l) {
    PagedProblem p;
    p.format = Format::kBFloat16;
    p.layout = l == 0 ? Layout::kNHD : Layout::kHND;
    p.batch = 1;
    p.q_heads = 2;
    p.kv_heads = 2;
    p.head_dim = 2;
    p.page_size = 2;
    p.max_pages_per_seq = 2;
    p.scale = 0.5;
    p.q = q.data();
    p.k_cache = k[l].data();
    p.v_cache = v[l].data();
    p.page_table = table.data();
    p.seq_lens = lens.data();
    decodeAttention(p, out[l]);
  }
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::isfinite(out[0][i])) << i;  // no NaN (unused) element was read
    EXPECT_EQ(out[0][i], out[1][i]) << i;
  }
  // Head 1 (q = (0, 1)): equal scores 0.5, out = (1, mean of j) = (1, 1).
  EXPECT_NEAR(out[0][2], 1.0, 1e-15);
  EXPECT_NEAR(out[0][3], 1.0, 1e-15);
}

TEST(DecodeAttentionReference, EmptySequenceIsZerosAndOthersAreUnaffected) {
  Case c{{kBf16One, kBf16Zero, kBf16One, kBf16Zero},
         {kBf16One, kBf16One},
         {kBf16Two, kBf16Four},
         {0, 0},
         {0, 1}};
  double out[4] = {9, 9, 9, 9};
  decodeAttention(c.problem(16, 1.0), out);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 2.0);
  EXPECT_EQ(out[3], 4.0);
}

TEST(DecodeAttentionReference, RelativeL2) {
  const std::uint16_t got[2] = {kBf16One, kBf16Two};
  const double exact[2] = {1.0, 2.0};
  EXPECT_EQ(relativeL2(Format::kBFloat16, 2, got, exact), 0.0);
  const double off[2] = {1.0, 2.5};  // ||(0, -0.5)|| / ||(1, 2.5)||
  EXPECT_NEAR(relativeL2(Format::kBFloat16, 2, got, off), 0.5 / std::sqrt(7.25), 1e-15);
  const std::uint16_t nan[2] = {kBf16NaN, kBf16One};
  EXPECT_TRUE(std::isnan(relativeL2(Format::kBFloat16, 2, nan, exact)));
}

TEST(DecodeAttentionReference, QueryTokensAreCausalOverTheLastKeysAndRowsWithoutKeysAreZero) {
  // Three query tokens of one sequence of 2 keys (values (1, 0) and (3, 0), equal scores): token 2
  // sees both keys (mean 2), token 1 only key 0 (1), token 0 none (zeros). q is [b][t][h][d].
  Case c{std::vector<std::uint16_t>(3 * 2, kBf16One),
         {kBf16One, kBf16One, kBf16One, kBf16One},
         {kBf16One, kBf16Zero, kBf16Three, kBf16Zero},
         {0},
         {2}};
  c.query_tokens = 3;
  double out[6] = {7, 7, 7, 7, 7, 7};
  decodeAttention(c.problem(16, 1.0), out);
  EXPECT_EQ(out[0], 0.0);  // token 0: no key
  EXPECT_EQ(out[1], 0.0);
  EXPECT_EQ(out[2], 1.0);  // token 1: key 0 only
  EXPECT_EQ(out[3], 0.0);
  EXPECT_NEAR(out[4], 2.0, 1e-15);  // token 2: both keys
  EXPECT_EQ(out[5], 0.0);
}

}  // namespace
}  // namespace kiln::decodeattn::reference
