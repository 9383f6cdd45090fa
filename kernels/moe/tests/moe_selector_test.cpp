// The moe selector on a fake variant table (the fp16 and bf16 variants of kiln.toml, or subsets):
// every admission error names the value and the limit, in selector.h's order; tokens == 0 is a
// no-op with no pointer checks; only the pointers (and the entries) of the chosen steps are
// checked; the planned grids follow launch.h (route ceil(T / 8) blocks of 256, align one block of
// 1024, fc1 (maxRowTiles, I / 64) and fc2 (maxRowTiles, ceil(H / 128)) blocks of 128 with 48 KiB of
// shared memory, finalize T blocks of 256); maxRowTiles bounds the row tiles of every routing (the
// GEMM grids are sized before the routing exists, on the host); the workspace layout is aligned,
// ordered, sized for its tensors and bound into the parameters; the device check comes last.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "moe/launch.h"
#include "moe/params.h"
#include "moe/runner/selector.h"
#include "support/fake_address.h"
#include "support/fixed_variant.h"

namespace kiln::moe {
namespace {

using kiln::fake::fixedVariant;

const char* const kAllEntries[] = {"kiln_moe_route", "kiln_moe_align", "kiln_moe_fc1",
                                   "kiln_moe_fc2", "kiln_moe_finalize"};
const char* const kEntriesReversed[] = {"kiln_moe_finalize", "kiln_moe_fc2", "kiln_moe_fc1",
                                        "kiln_moe_align", "kiln_moe_route"};
const char* const kNoFc2[] = {"kiln_moe_route", "kiln_moe_align", "kiln_moe_fc1",
                              "kiln_moe_finalize"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

// The bf16 variant (the one of validProblem()) lists its entries in reverse: they are found by
// name, not position.
const kiln_variant kBf16Variant{"moe_bf16", "moe", kEntriesReversed, 5, kImages, 2, 0};
const kiln_variant kFp16Variant{"moe_fp16", "moe", kAllEntries, 5, kImages, 2, 0};
const kiln_variant kNoFc2Bf16{"moe_bf16", "moe", kNoFc2, 4, kImages, 2, 0};

constexpr DType kBf16 = DType::kBFloat16;
constexpr DType kFp16 = DType::kFloat16;

// Both variants of kiln.toml, in the generated table's (name) order.
const VariantInfo kTable[] = {
    {"moe_bf16", kBf16, &fixedVariant<kBf16Variant>},
    {"moe_fp16", kFp16, &fixedVariant<kFp16Variant>},
};

// Step bit i runs this entry (selector.h's kEntries).
const char* const kStepEntries[] = {"kiln_moe_route", "kiln_moe_align", "kiln_moe_fc1",
                                    "kiln_moe_fc2", "kiln_moe_finalize"};

using fake::fakeAddress;

// A Qwen3-30B-A3B layer at 16 tokens: bf16, 128 experts, top 8, hidden 2048, intermediate 768,
// bf16 logits, no residual.
Problem validProblem() {
  Problem p;
  p.dtype = kBf16;
  p.tokens = 16;
  p.experts = 128;
  p.top_k = 8;
  p.hidden = 2048;
  p.intermediate = 768;
  p.x = fakeAddress<const void>(0x10000);
  p.logits = fakeAddress<const void>(0x20000);
  p.w1 = fakeAddress<const void>(0x30000);
  p.w2 = fakeAddress<const void>(0x40000);
  p.y = fakeAddress(0x50000);
  return p;
}

// Every non-empty contiguous run of Step bits: steps lo..hi.
std::vector<unsigned> contiguousSteps() {
  std::vector<unsigned> runs;
  for (int lo = 0; lo < kSteps; ++lo) {
    for (int hi = lo; hi < kSteps; ++hi) {
      runs.push_back(((1u << (hi + 1)) - 1u) & ~((1u << lo) - 1u));
    }
  }
  return runs;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Status fakeImageCheck(const kiln_variant& v, int sm) {
  if (sm == 80 || sm == 86 || sm == 90) return Status::Ok();
  return Status(
      StatusCode::kNoKernelImage,
      std::string(v.name) + ": artifact has sm_80, sm_90 only; device is sm_" + std::to_string(sm));
}

std::size_t alignUp256(std::size_t v) {
  return (v + 255) / 256 * 256;
}

// ---- The plan
// ------------------------------------------------------------------------------------

TEST(MoeSelector, PlanOfAQwen3Block) {
  const Problem p = validProblem();
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_NE(plan.info, nullptr);
  EXPECT_STREQ(plan.info->name, "moe_bf16");
  EXPECT_EQ(plan.variant, &kBf16Variant);
  EXPECT_FALSE(plan.no_op);
  EXPECT_EQ(plan.steps, static_cast<unsigned>(kAllSteps));
  for (int i = 0; i < kSteps; ++i) {
    ASSERT_GE(plan.entries[i], 0) << i;
    EXPECT_STREQ(plan.variant->entries[plan.entries[i]], kStepEntries[i]) << i;
    EXPECT_EQ(plan.entries[i], kSteps - 1 - i) << i;  // the bf16 variant lists them in reverse
  }
  // Hand-computed: T * k = 128 rows over 128 experts: maxRowTiles = 128 / 64 + min(128, 128) = 130.
  // route: ceil(16 / 8) = 2 blocks of 8 warps.
  EXPECT_EQ(plan.launches[0].grid.x, 2u);
  EXPECT_EQ(plan.launches[0].grid.y, 1u);
  EXPECT_EQ(plan.launches[0].grid.z, 1u);
  EXPECT_EQ(plan.launches[0].block.x, 256u);
  EXPECT_EQ(plan.launches[0].shared_bytes, 0u);
  // align: one block of 1024.
  EXPECT_EQ(plan.launches[1].grid.x, 1u);
  EXPECT_EQ(plan.launches[1].grid.y, 1u);
  EXPECT_EQ(plan.launches[1].block.x, 1024u);
  EXPECT_EQ(plan.launches[1].shared_bytes, 0u);
  // fc1: 130 row tiles x 768 / 64 = 12 column blocks.
  EXPECT_EQ(plan.launches[2].grid.x, 130u);
  EXPECT_EQ(plan.launches[2].grid.y, 12u);
  EXPECT_EQ(plan.launches[2].grid.z, 1u);
  EXPECT_EQ(plan.launches[2].block.x, 128u);
  EXPECT_EQ(plan.launches[2].shared_bytes, 49152u);  // 4 stages of (64 + 128) rows of 64 bytes
  // fc2: 130 row tiles x 2048 / 128 = 16 column blocks.
  EXPECT_EQ(plan.launches[3].grid.x, 130u);
  EXPECT_EQ(plan.launches[3].grid.y, 16u);
  EXPECT_EQ(plan.launches[3].grid.z, 1u);
  EXPECT_EQ(plan.launches[3].block.x, 128u);
  EXPECT_EQ(plan.launches[3].shared_bytes, 49152u);
  // finalize: one block of 256 per token.
  EXPECT_EQ(plan.launches[4].grid.x, 16u);
  EXPECT_EQ(plan.launches[4].grid.y, 1u);
  EXPECT_EQ(plan.launches[4].block.x, 256u);
  EXPECT_EQ(plan.launches[4].shared_bytes, 0u);
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(plan.launches[i].block.y, 1u) << i;
    EXPECT_EQ(plan.launches[i].block.z, 1u) << i;
    EXPECT_FALSE(plan.launches[i].programmatic_dependency) << i;
  }
  // The workspace, hand-computed: 128 rows, 129 offsets, each segment rounded up to 256 bytes.
  //   topk_ids        0       128 x 4 = 512
  //   topk_weights    512     512
  //   expert_offsets  1024    129 x 4 = 516 -> 1792
  //   tile_offsets    1792    516 -> 2560
  //   sorted_slots    2560    512
  //   act             3072    128 x 768 x 2 = 196608
  //   down            199680  128 x 2048 x 2 = 524288, ending at 723968
  EXPECT_EQ(plan.layout.topk_ids, 0u);
  EXPECT_EQ(plan.layout.topk_weights, 512u);
  EXPECT_EQ(plan.layout.expert_offsets, 1024u);
  EXPECT_EQ(plan.layout.tile_offsets, 1792u);
  EXPECT_EQ(plan.layout.sorted_slots, 2560u);
  EXPECT_EQ(plan.layout.act, 3072u);
  EXPECT_EQ(plan.layout.down, 199680u);
  EXPECT_EQ(plan.layout.bytes, 723968u);
  EXPECT_EQ(plan.workspace_bytes, 723968u);
  // The kernels' parameters; the workspace pointers wait for bindWorkspace().
  const MoeParams& params = plan.params;
  EXPECT_EQ(params.x, p.x);
  EXPECT_EQ(params.logits, p.logits);
  EXPECT_EQ(params.w1, p.w1);
  EXPECT_EQ(params.w2, p.w2);
  EXPECT_EQ(params.residual, nullptr);
  EXPECT_EQ(params.y, p.y);
  EXPECT_EQ(params.topk_ids, nullptr);
  EXPECT_EQ(params.topk_weights, nullptr);
  EXPECT_EQ(params.expert_offsets, nullptr);
  EXPECT_EQ(params.tile_offsets, nullptr);
  EXPECT_EQ(params.sorted_slots, nullptr);
  EXPECT_EQ(params.act, nullptr);
  EXPECT_EQ(params.down, nullptr);
  EXPECT_EQ(params.tokens, 16);
  EXPECT_EQ(params.experts, 128);
  EXPECT_EQ(params.top_k, 8);
  EXPECT_EQ(params.hidden, 2048);
  EXPECT_EQ(params.intermediate, 768);
  EXPECT_EQ(params.logits_fp32, 0);
  EXPECT_EQ(params.renormalize, 1);
  EXPECT_EQ(params.pad, 0);
}

TEST(MoeSelector, PlanOfASmallFp16BlockWithResidualAndFp32Logits) {
  // Mixtral-like routing on tiny shapes: 3 tokens, 8 experts, top 2, hidden 96 (a partial fc2
  // column block), intermediate 64, fp32 logits, a residual, no renormalisation.
  Problem p = validProblem();
  p.dtype = kFp16;
  p.tokens = 3;
  p.experts = 8;
  p.top_k = 2;
  p.hidden = 96;
  p.intermediate = 64;
  p.logits_fp32 = true;
  p.renormalize = false;
  p.residual = fakeAddress<const void>(0x60000);
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "moe_fp16");
  EXPECT_EQ(plan.variant, &kFp16Variant);
  for (int i = 0; i < kSteps; ++i) EXPECT_EQ(plan.entries[i], i) << i;
  // 6 rows over 8 experts: at most 6 experts have rows, one partial tile each: 0 + 6.
  EXPECT_EQ(plan.launches[0].grid.x, 1u);  // ceil(3 / 8)
  EXPECT_EQ(plan.launches[2].grid.x, 6u);
  EXPECT_EQ(plan.launches[2].grid.y, 1u);  // 64 / 64
  EXPECT_EQ(plan.launches[3].grid.x, 6u);
  EXPECT_EQ(plan.launches[3].grid.y, 1u);  // ceil(96 / 128)
  EXPECT_EQ(plan.launches[4].grid.x, 3u);
  // 6 rows: ids 24 bytes, weights 24, offsets 9 x 4 = 36 each, slots 24, act 6 x 64 x 2 = 768,
  // down 6 x 96 x 2 = 1152; every segment starts on 256 bytes, and the total is the end of the
  // last (3200) rounded up to 256.
  EXPECT_EQ(plan.layout.topk_ids, 0u);
  EXPECT_EQ(plan.layout.topk_weights, 256u);
  EXPECT_EQ(plan.layout.expert_offsets, 512u);
  EXPECT_EQ(plan.layout.tile_offsets, 768u);
  EXPECT_EQ(plan.layout.sorted_slots, 1024u);
  EXPECT_EQ(plan.layout.act, 1280u);
  EXPECT_EQ(plan.layout.down, 2048u);
  EXPECT_EQ(plan.layout.bytes, 3328u);
  EXPECT_EQ(plan.workspace_bytes, 3328u);
  EXPECT_EQ(plan.params.residual, p.residual);
  EXPECT_EQ(plan.params.logits_fp32, 1);
  EXPECT_EQ(plan.params.renormalize, 0);
  EXPECT_EQ(plan.params.tokens, 3);
  EXPECT_EQ(plan.params.experts, 8);
  EXPECT_EQ(plan.params.top_k, 2);
  EXPECT_EQ(plan.params.hidden, 96);
  EXPECT_EQ(plan.params.intermediate, 64);
}

TEST(MoeSelector, GridsFollowTheShapes) {
  // launch.h's formulas over a sweep of shapes: route ceil(T / 8) x 256, align 1 x 1024, fc1
  // (maxRowTiles(T k, E), I / 64) x 128, fc2 (maxRowTiles(T k, E), ceil(H / 128)) x 128, finalize
  // T x 256; both GEMMs with the 48 KiB of launch.h's four stages.
  ASSERT_EQ(kGemmSharedBytes, 48 * 1024);
  Plan plan;
  for (std::int64_t tokens : {1, 7, 8, 9, 63, 64, 65, 1000, 4096}) {
    for (int experts : {1, 8, 64, 128, 512}) {
      for (int top_k : {1, 2, 8, 16}) {
        if (top_k > experts) continue;
        for (std::int64_t hidden : {32, 96, 128, 160, 4096}) {
          for (std::int64_t inter : {64, 192, 768}) {
            Problem p = validProblem();
            p.tokens = tokens;
            p.experts = experts;
            p.top_k = top_k;
            p.hidden = hidden;
            p.intermediate = inter;
            const std::string at = std::to_string(tokens) + " tokens, " + std::to_string(experts) +
                                   " experts, top " + std::to_string(top_k) + ", " +
                                   std::to_string(hidden) + " x " + std::to_string(inter);
            const Status s = select(kTable, p, nullptr, &plan);
            ASSERT_TRUE(s.ok()) << at << ": " << s.toString();
            const std::int64_t rows = tokens * top_k;
            const std::int64_t partial = std::min<std::int64_t>(experts, rows);
            const auto tiles = static_cast<unsigned>(rows / 64 + partial);
            ASSERT_EQ(maxRowTiles(rows, experts), static_cast<std::int64_t>(tiles)) << at;
            EXPECT_EQ(plan.launches[0].grid.x, static_cast<unsigned>((tokens + 7) / 8)) << at;
            EXPECT_EQ(plan.launches[0].block.x, 256u) << at;
            EXPECT_EQ(plan.launches[1].grid.x, 1u) << at;
            EXPECT_EQ(plan.launches[1].block.x, 1024u) << at;
            EXPECT_EQ(plan.launches[2].grid.x, tiles) << at;
            EXPECT_EQ(plan.launches[2].grid.y, static_cast<unsigned>(inter / 64)) << at;
            EXPECT_EQ(plan.launches[3].grid.x, tiles) << at;
            EXPECT_EQ(plan.launches[3].grid.y, static_cast<unsigned>((hidden + 127) / 128)) << at;
            for (int i : {2, 3}) {
              EXPECT_EQ(plan.launches[i].block.x, 128u) << at;
              EXPECT_EQ(plan.launches[i].shared_bytes, 49152u) << at;
            }
            EXPECT_EQ(plan.launches[4].grid.x, static_cast<unsigned>(tokens)) << at;
            EXPECT_EQ(plan.launches[4].block.x, 256u) << at;
            for (int i = 0; i < kSteps; ++i) {
              EXPECT_EQ(plan.launches[i].grid.z, 1u) << at;
              EXPECT_GE(plan.launches[i].grid.x, 1u) << at;
            }
          }
        }
      }
    }
  }
}

TEST(MoeSelector, LimitsOfTheShapesAreAdmitted) {
  // The largest values of each limit, and the smallest.
  Plan plan;
  Problem p = validProblem();
  p.tokens = 1LL << 23;  // T k = 2^26 exactly
  p.top_k = 8;
  Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.launches[0].grid.x, (1u << 23) / 8u);
  EXPECT_EQ(plan.launches[2].grid.x, (1u << 20) + 128u);  // 2^26 / 64 + min(128, 2^26)
  EXPECT_EQ(plan.launches[4].grid.x, 1u << 23);
  EXPECT_EQ(plan.params.tokens, 1 << 23);
  p = validProblem();
  p.experts = 512;
  p.top_k = 16;
  p.hidden = 1LL << 20;
  p.intermediate = 1LL << 20;
  s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.launches[2].grid.y, 16384u);  // 2^20 / 64
  EXPECT_EQ(plan.launches[3].grid.y, 8192u);   // 2^20 / 128
  p = validProblem();
  p.tokens = 1;
  p.experts = 1;
  p.top_k = 1;
  p.hidden = 32;
  p.intermediate = 64;
  s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(plan.launches[i].grid.x, 1u) << i;
    EXPECT_EQ(plan.launches[i].grid.y, 1u) << i;
  }
  p.experts = 16;
  p.top_k = 16;  // k == E
  EXPECT_TRUE(select(kTable, p, nullptr, &plan).ok());
}

// ---- maxRowTiles
// ---------------------------------------------------------------------------------

// The most row tiles (sum over experts of ceil(count / 64)) any distribution of `rows` rows over
// `experts` experts makes, by exhausting the distributions: best[e][r], the most tiles of r rows
// over e experts, is the most over the first expert's count c of ceil(c / 64) + best[e - 1][r - c].
std::vector<std::vector<std::int64_t>> mostTiles(int max_experts, int max_rows) {
  std::vector<std::vector<std::int64_t>> best(
      static_cast<std::size_t>(max_experts) + 1,
      std::vector<std::int64_t>(static_cast<std::size_t>(max_rows) + 1, -1));
  best[0][0] = 0;  // no experts hold no rows
  for (int e = 1; e <= max_experts; ++e) {
    for (int r = 0; r <= max_rows; ++r) {
      for (int c = 0; c <= r; ++c) {
        const std::int64_t rest = best[e - 1][r - c];
        if (rest < 0) continue;
        best[e][r] = std::max(best[e][r], (c + kBlockM - 1) / kBlockM + rest);
      }
    }
  }
  return best;
}

TEST(MoeSelector, MaxRowTilesBoundsEveryRouting) {
  // Hand-computed values of the bound.
  EXPECT_EQ(maxRowTiles(0, 8), 0);
  EXPECT_EQ(maxRowTiles(1, 8), 1);
  EXPECT_EQ(maxRowTiles(6, 8), 6);
  EXPECT_EQ(maxRowTiles(63, 1), 1);
  EXPECT_EQ(maxRowTiles(64, 1), 2);  // a bound: one expert's 64 rows make one tile
  EXPECT_EQ(maxRowTiles(65, 1), 2);
  EXPECT_EQ(maxRowTiles(128, 128), 130);
  // Every distribution of up to 400 rows over up to 12 experts: no routing makes more tiles than
  // maxRowTiles, the blocks past a routing's count return at once, so the bound is all the GEMM
  // grids need.
  constexpr int kExperts = 12, kRows = 400;
  const auto best = mostTiles(kExperts, kRows);
  for (int e = 1; e <= kExperts; ++e) {
    for (int r = 0; r <= kRows; ++r) {
      ASSERT_GE(best[e][r], 0) << e << " " << r;
      EXPECT_GE(maxRowTiles(r, e), best[e][r]) << r << " rows over " << e << " experts";
      // And close: the most tiles are min(E, rows) experts of one row each and a tile for every
      // further 64 rows, so the bound is over by at most one tile per 64 experts, and one.
      EXPECT_LE(maxRowTiles(r, e) - best[e][r], e / kBlockM + 1)
          << r << " rows over " << e << " experts";
    }
  }
  // The recurrence itself, against an explicit enumeration of every distribution over three
  // experts.
  for (int r = 0; r <= 200; ++r) {
    std::int64_t most = 0;
    for (int a = 0; a <= r; ++a) {
      for (int b = 0; a + b <= r; ++b) {
        const int c = r - a - b;
        most =
            std::max<std::int64_t>(most, (a + kBlockM - 1) / kBlockM + (b + kBlockM - 1) / kBlockM +
                                             (c + kBlockM - 1) / kBlockM);
      }
    }
    EXPECT_EQ(best[3][r], most) << r;
  }
  // Large shapes, on the routings that make the most tiles: every expert but one holds
  // (64 m + 1) rows, the last the rest.
  for (std::int64_t rows : {1000LL, 4096LL, 65536LL, 1LL << 26}) {
    for (int experts : {1, 8, 128, 512}) {
      for (std::int64_t per = 1; per <= rows / experts; per += 64) {
        std::int64_t tiles = (experts - 1) * ((per + kBlockM - 1) / kBlockM);
        tiles += (rows - (experts - 1) * per + kBlockM - 1) / kBlockM;
        EXPECT_GE(maxRowTiles(rows, experts), tiles) << rows << " " << experts << " " << per;
        if (per > 4096) per += 64 * 1000;  // sample the long runs
      }
    }
  }
}

// ---- Workspace
// -----------------------------------------------------------------------------------

TEST(MoeSelector, WorkspaceSegmentsAreAlignedOrderedAndSized) {
  for (std::int64_t tokens : {1, 3, 16, 100, 4097}) {
    for (int experts : {1, 7, 64, 512}) {
      for (int top_k : {1, 2, 8}) {
        if (top_k > experts) continue;
        for (std::int64_t hidden : {32, 96, 2048}) {
          for (std::int64_t inter : {64, 192, 768}) {
            Problem p = validProblem();
            p.tokens = tokens;
            p.experts = experts;
            p.top_k = top_k;
            p.hidden = hidden;
            p.intermediate = inter;
            const std::string at = std::to_string(tokens) + " tokens, " + std::to_string(experts) +
                                   " experts, top " + std::to_string(top_k) + ", " +
                                   std::to_string(hidden) + " x " + std::to_string(inter);
            Plan plan;
            ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok()) << at;
            const WorkspaceLayout& w = plan.layout;
            const auto rows = static_cast<std::size_t>(tokens * top_k);
            const auto offsets = static_cast<std::size_t>(experts) + 1;
            struct Segment {
              const char* name;
              std::size_t at, bytes;
            };
            const Segment segments[] = {
                {"topk_ids", w.topk_ids, rows * 4},
                {"topk_weights", w.topk_weights, rows * 4},
                {"expert_offsets", w.expert_offsets, offsets * 4},
                {"tile_offsets", w.tile_offsets, offsets * 4},
                {"sorted_slots", w.sorted_slots, rows * 4},
                {"act", w.act, rows * static_cast<std::size_t>(inter) * 2},
                {"down", w.down, rows * static_cast<std::size_t>(hidden) * 2},
            };
            EXPECT_EQ(segments[0].at, 0u) << at;
            for (std::size_t i = 0; i < std::size(segments); ++i) {
              EXPECT_EQ(segments[i].at % 256, 0u) << at << ": " << segments[i].name;
              if (i + 1 < std::size(segments)) {
                // Each next segment starts where this one ends, rounded up to 256: no overlap, no
                // gap beyond the alignment.
                EXPECT_EQ(segments[i + 1].at, alignUp256(segments[i].at + segments[i].bytes))
                    << at << ": " << segments[i].name << " -> " << segments[i + 1].name;
              }
            }
            const Segment& last = segments[std::size(segments) - 1];
            EXPECT_GE(w.bytes, last.at + last.bytes) << at;
            EXPECT_EQ(w.bytes, alignUp256(last.at + last.bytes)) << at;
            EXPECT_EQ(plan.workspace_bytes, w.bytes) << at;
            // layoutFor() is the same layout, from the shapes alone.
            const WorkspaceLayout alone = layoutFor(p);
            EXPECT_EQ(alone.topk_ids, w.topk_ids) << at;
            EXPECT_EQ(alone.topk_weights, w.topk_weights) << at;
            EXPECT_EQ(alone.expert_offsets, w.expert_offsets) << at;
            EXPECT_EQ(alone.tile_offsets, w.tile_offsets) << at;
            EXPECT_EQ(alone.sorted_slots, w.sorted_slots) << at;
            EXPECT_EQ(alone.act, w.act) << at;
            EXPECT_EQ(alone.down, w.down) << at;
            EXPECT_EQ(alone.bytes, w.bytes) << at;
          }
        }
      }
    }
  }
}

TEST(MoeSelector, WorkspaceDoesNotDependOnTheStepsOrTheDtype) {
  // Every step's plan holds the whole layout, so a caller running the steps one by one passes the
  // same workspace to each.
  Plan all;
  ASSERT_TRUE(select(kTable, validProblem(), nullptr, &all).ok());
  for (unsigned steps : contiguousSteps()) {
    Problem p = validProblem();
    p.steps = steps;
    Plan plan;
    ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok()) << steps;
    EXPECT_EQ(plan.workspace_bytes, all.workspace_bytes) << steps;
    EXPECT_EQ(plan.layout.down, all.layout.down) << steps;
    EXPECT_EQ(plan.steps, steps);
    p.dtype = kFp16;
    ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok()) << steps;
    EXPECT_EQ(plan.workspace_bytes, all.workspace_bytes) << steps;
  }
}

TEST(MoeSelector, BindWorkspaceNamesBothSizesAndPointsTheParamsAtTheLayout) {
  Plan plan;
  ASSERT_TRUE(select(kTable, validProblem(), nullptr, &plan).ok());
  ASSERT_EQ(plan.workspace_bytes, 723968u);  // PlanOfAQwen3Block's hand-computed size
  Status s = bindWorkspace(&plan, nullptr, 1 << 30);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "moe: the block needs a workspace of 723968 bytes (workspaceSize()); workspace is null");
  s = bindWorkspace(&plan, fakeAddress(0x100000), 723967);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "moe: workspace of 723967 bytes is smaller than the 723968 bytes the block needs");
  s = bindWorkspace(&plan, fakeAddress(0x100008), 723968);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "moe: pointer workspace (0x100008) is not 16-byte aligned");
  // A refused workspace leaves the parameters unbound.
  EXPECT_EQ(plan.params.topk_ids, nullptr);
  EXPECT_EQ(plan.params.down, nullptr);

  // Exactly the size is enough, and so is more; the parameters point at the layout's offsets.
  const std::uintptr_t base = 0x7f0001000000;
  for (std::size_t bytes : {std::size_t{723968}, std::size_t{1} << 30}) {
    s = bindWorkspace(&plan, fakeAddress(base), bytes);
    ASSERT_TRUE(s.ok()) << s.toString();
    const MoeParams& p = plan.params;
    EXPECT_EQ(p.topk_ids, fakeAddress<std::int32_t>(base + 0));
    EXPECT_EQ(p.topk_weights, fakeAddress<float>(base + 512));
    EXPECT_EQ(p.expert_offsets, fakeAddress<std::int32_t>(base + 1024));
    EXPECT_EQ(p.tile_offsets, fakeAddress<std::int32_t>(base + 1792));
    EXPECT_EQ(p.sorted_slots, fakeAddress<std::int32_t>(base + 2560));
    EXPECT_EQ(p.act, fakeAddress(base + 3072));
    EXPECT_EQ(p.down, fakeAddress(base + 199680));
    // The caller's tensors are untouched.
    EXPECT_EQ(p.x, validProblem().x);
    EXPECT_EQ(p.y, validProblem().y);
  }
  // A 16-byte aligned base is enough (the segments keep their 256-byte offsets from it).
  ASSERT_TRUE(bindWorkspace(&plan, fakeAddress(base + 16), 723968).ok());
  EXPECT_EQ(plan.params.topk_weights, fakeAddress<float>(base + 16 + 512));
  EXPECT_EQ(plan.params.down, fakeAddress(base + 16 + 199680));
}

// ---- Admission
// -----------------------------------------------------------------------------------

struct BadCase {
  const char* what;
  void (*mutate)(Problem&);
  const char* message;  // the expected message after "moe: "
};

TEST(MoeSelector, InvalidProblemsNameTheValueAndTheLimit) {
  const BadCase cases[] = {
      {"steps 0", [](Problem& p) { p.steps = 0; },
       "steps 0 is not a non-empty set of Step bits (1..31)"},
      {"steps 32", [](Problem& p) { p.steps = 32; },
       "steps 32 is not a non-empty set of Step bits (1..31)"},
      {"steps 33", [](Problem& p) { p.steps = kRoute | 32u; },
       "steps 33 is not a non-empty set of Step bits (1..31)"},
      {"steps route + fc1", [](Problem& p) { p.steps = kRoute | kFc1; },
       "steps 5 are not a contiguous run of Step bits (each step reads what the one before it "
       "wrote)"},
      {"steps align + fc2", [](Problem& p) { p.steps = kAlign | kFc2; },
       "steps 10 are not a contiguous run of Step bits (each step reads what the one before it "
       "wrote)"},
      {"steps route + finalize", [](Problem& p) { p.steps = kRoute | kFinalize; },
       "steps 17 are not a contiguous run of Step bits (each step reads what the one before it "
       "wrote)"},
      {"steps all but fc1", [](Problem& p) { p.steps = kAllSteps & ~kFc1; },
       "steps 27 are not a contiguous run of Step bits (each step reads what the one before it "
       "wrote)"},
      {"tokens -1", [](Problem& p) { p.tokens = -1; }, "tokens -1 is negative"},
      {"experts 0", [](Problem& p) { p.experts = 0; }, "experts 0 is outside 1..512"},
      {"experts -4", [](Problem& p) { p.experts = -4; }, "experts -4 is outside 1..512"},
      {"experts 513", [](Problem& p) { p.experts = 513; }, "experts 513 is outside 1..512"},
      {"top_k 0", [](Problem& p) { p.top_k = 0; }, "top_k 0 is outside 1..16"},
      {"top_k -1", [](Problem& p) { p.top_k = -1; }, "top_k -1 is outside 1..16"},
      {"top_k 17", [](Problem& p) { p.top_k = 17; }, "top_k 17 is outside 1..16"},
      {"top_k over experts",
       [](Problem& p) {
         p.experts = 8;
         p.top_k = 9;
       },
       "top_k 9 exceeds experts 8"},
      {"rows over 2^26",
       [](Problem& p) {
         p.tokens = (1LL << 23) + 1;
         p.top_k = 8;
       },
       "tokens 8388609 * top_k 8 exceeds the limit of 67108864 expert rows"},
      {"rows over 2^26 at top 1",
       [](Problem& p) {
         p.tokens = (1LL << 26) + 1;
         p.top_k = 1;
       },
       "tokens 67108865 * top_k 1 exceeds the limit of 67108864 expert rows"},
      {"hidden 0", [](Problem& p) { p.hidden = 0; }, "hidden 0 is outside 1..1048576"},
      {"hidden -32", [](Problem& p) { p.hidden = -32; }, "hidden -32 is outside 1..1048576"},
      {"hidden over 2^20", [](Problem& p) { p.hidden = (1LL << 20) + 32; },
       "hidden 1048608 is outside 1..1048576"},
      {"hidden 100", [](Problem& p) { p.hidden = 100; },
       "hidden 100 is not a multiple of 32 (the GEMM's K step)"},
      {"hidden 16", [](Problem& p) { p.hidden = 16; },
       "hidden 16 is not a multiple of 32 (the GEMM's K step)"},
      {"intermediate 0", [](Problem& p) { p.intermediate = 0; },
       "intermediate 0 is outside 1..1048576"},
      {"intermediate -64", [](Problem& p) { p.intermediate = -64; },
       "intermediate -64 is outside 1..1048576"},
      {"intermediate over 2^20", [](Problem& p) { p.intermediate = (1LL << 20) + 64; },
       "intermediate 1048640 is outside 1..1048576"},
      {"intermediate 700", [](Problem& p) { p.intermediate = 700; },
       "intermediate 700 is not a multiple of the tile 64"},
      {"intermediate 32", [](Problem& p) { p.intermediate = 32; },
       "intermediate 32 is not a multiple of the tile 64"},
      {"null logits", [](Problem& p) { p.logits = nullptr; }, "logits is null"},
      {"null x", [](Problem& p) { p.x = nullptr; }, "x is null"},
      {"null w1", [](Problem& p) { p.w1 = nullptr; }, "w1 is null"},
      {"null w2", [](Problem& p) { p.w2 = nullptr; }, "w2 is null"},
      {"null y", [](Problem& p) { p.y = nullptr; }, "y is null"},
      // logits: the alignment of their element, 2 bytes of the dtype or 4 of fp32.
      {"misaligned logits", [](Problem& p) { p.logits = fakeAddress<const void>(0x20001); },
       "pointer logits (0x20001) is not 2-byte aligned"},
      {"misaligned fp32 logits",
       [](Problem& p) {
         p.logits_fp32 = true;
         p.logits = fakeAddress<const void>(0x20002);
       },
       "pointer logits (0x20002) is not 4-byte aligned"},
      {"misaligned x", [](Problem& p) { p.x = fakeAddress<const void>(0x10008); },
       "pointer x (0x10008) is not 16-byte aligned"},
      {"misaligned w1", [](Problem& p) { p.w1 = fakeAddress<const void>(0x30004); },
       "pointer w1 (0x30004) is not 16-byte aligned"},
      {"misaligned w2", [](Problem& p) { p.w2 = fakeAddress<const void>(0x40002); },
       "pointer w2 (0x40002) is not 16-byte aligned"},
      {"misaligned y", [](Problem& p) { p.y = fakeAddress(0x50001); },
       "pointer y (0x50001) is not 16-byte aligned"},
      {"misaligned residual", [](Problem& p) { p.residual = fakeAddress<const void>(0x60008); },
       "pointer residual (0x60008) is not 16-byte aligned"},
      {"dtype 7", [](Problem& p) { p.dtype = static_cast<DType>(7); },
       "dtype 7 is not a DType value (fp16, bf16 or fp32)"},
  };
  for (const BadCase& c : cases) {
    Problem p = validProblem();
    c.mutate(p);
    Plan plan;
    const Status s = select(kTable, p, nullptr, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s.toString();
    EXPECT_EQ(s.message(), std::string("moe: ") + c.message) << c.what;
  }
}

TEST(MoeSelector, TheFirstFailureInSelectorOrderIsReported) {
  // selector.h's order: dtype, steps, tokens, experts, top_k, T k, hidden, intermediate, entries,
  // pointers, device. Each problem below breaks two checks; the earlier one is named.
  Plan plan;
  Problem p = validProblem();
  p.steps = 0;
  p.tokens = -1;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(),
            "moe: steps 0 is not a non-empty set of Step bits (1..31)");
  p = validProblem();
  p.tokens = -1;
  p.experts = 0;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "moe: tokens -1 is negative");
  p = validProblem();
  p.experts = 0;
  p.top_k = 0;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "moe: experts 0 is outside 1..512");
  p = validProblem();
  p.top_k = 17;
  p.hidden = 100;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "moe: top_k 17 is outside 1..16");
  p = validProblem();
  p.hidden = 100;
  p.intermediate = 700;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(),
            "moe: hidden 100 is not a multiple of 32 (the GEMM's K step)");
  p = validProblem();
  p.intermediate = 700;
  p.x = nullptr;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(),
            "moe: intermediate 700 is not a multiple of the tile 64");
  // Among the pointers: logits, x, w1, w2, y, residual.
  p = validProblem();
  p.y = nullptr;
  p.logits = nullptr;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "moe: logits is null");
  p.logits = validProblem().logits;
  p.w2 = nullptr;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "moe: w2 is null");
  // The build comes before the shapes: an unbuilt dtype is named whatever else is wrong.
  const VariantInfo bf16_only[] = {{"moe_bf16", kBf16, &fixedVariant<kBf16Variant>}};
  p = validProblem();
  p.dtype = kFp16;
  p.experts = 0;
  EXPECT_EQ(select(bf16_only, p, nullptr, &plan).code(), StatusCode::kNotSupported);
}

TEST(MoeSelector, UnbuiltDtypeNamesWhatIsBuilt) {
  const VariantInfo bf16_only[] = {{"moe_bf16", kBf16, &fixedVariant<kBf16Variant>}};
  Problem p = validProblem();
  p.dtype = kFp16;
  Plan plan;
  Status s = select(bf16_only, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "moe: dtype fp16 is not built; built dtypes: bf16");
  s = select(std::span<const VariantInfo>{}, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "moe: dtype fp16 is not built; built dtypes: none");
  const VariantInfo fp16_only[] = {{"moe_fp16", kFp16, &fixedVariant<kFp16Variant>}};
  s = select(fp16_only, validProblem(), nullptr, &plan);
  EXPECT_EQ(s.message(), "moe: dtype bf16 is not built; built dtypes: fp16");
  ASSERT_TRUE(select(fp16_only, p, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "moe_fp16");
  // A zero-token problem of an unbuilt dtype is refused too.
  p.tokens = 0;
  EXPECT_EQ(select(bf16_only, p, nullptr, &plan).code(), StatusCode::kNotSupported);
}

TEST(MoeSelector, AlignedPointersAreAdmitted) {
  // The least alignment each pointer needs: logits their element (2 bytes of bf16, 4 of fp32),
  // the rest 16 bytes; the residual is optional.
  Plan plan;
  Problem p = validProblem();
  p.logits = fakeAddress<const void>(0x20002);
  EXPECT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.logits, p.logits);
  p.logits_fp32 = true;
  EXPECT_FALSE(select(kTable, p, nullptr, &plan).ok());
  p.logits = fakeAddress<const void>(0x20004);
  EXPECT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.logits_fp32, 1);
  p = validProblem();
  p.x = fakeAddress<const void>(0x10010);
  p.w1 = fakeAddress<const void>(0x30010);
  p.w2 = fakeAddress<const void>(0x40010);
  p.y = fakeAddress(0x50010);
  p.residual = fakeAddress<const void>(0x60010);
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.params.residual, p.residual);
}

TEST(MoeSelector, OnlyThePointersOfTheChosenStepsAreChecked) {
  // The caller's tensors each step touches: route logits; align none (it reads and writes the
  // workspace); fc1 x and w1; fc2 w2; finalize y and the optional residual.
  struct Use {
    const char* name;
    unsigned step;
    void (*clear)(Problem&);
    void (*misalign)(Problem&);
  };
  const Use uses[] = {
      {"logits", kRoute, [](Problem& p) { p.logits = nullptr; },
       [](Problem& p) { p.logits = fakeAddress<const void>(0x20001); }},
      {"x", kFc1, [](Problem& p) { p.x = nullptr; },
       [](Problem& p) { p.x = fakeAddress<const void>(0x10008); }},
      {"w1", kFc1, [](Problem& p) { p.w1 = nullptr; },
       [](Problem& p) { p.w1 = fakeAddress<const void>(0x30008); }},
      {"w2", kFc2, [](Problem& p) { p.w2 = nullptr; },
       [](Problem& p) { p.w2 = fakeAddress<const void>(0x40008); }},
      {"y", kFinalize, [](Problem& p) { p.y = nullptr; },
       [](Problem& p) { p.y = fakeAddress(0x50008); }},
      {"residual", kFinalize, nullptr,
       [](Problem& p) { p.residual = fakeAddress<const void>(0x60008); }},
  };
  for (unsigned steps : contiguousSteps()) {
    // Every pointer the steps do not use null (or misaligned): admitted.
    Problem bare = validProblem();
    bare.steps = steps;
    for (const Use& u : uses) {
      if ((steps & u.step) != 0) continue;
      if (u.clear != nullptr) u.clear(bare);
    }
    Plan plan;
    Status s = select(kTable, bare, nullptr, &plan);
    EXPECT_TRUE(s.ok()) << "steps " << steps << ": " << s.toString();
    Problem crooked = validProblem();
    crooked.steps = steps;
    for (const Use& u : uses) {
      if ((steps & u.step) == 0) u.misalign(crooked);
    }
    s = select(kTable, crooked, nullptr, &plan);
    EXPECT_TRUE(s.ok()) << "steps " << steps << ": " << s.toString();
    // Every pointer they use, null or misaligned: refused, naming it.
    for (const Use& u : uses) {
      if ((steps & u.step) == 0) continue;
      if (u.clear != nullptr) {
        Problem p = validProblem();
        p.steps = steps;
        u.clear(p);
        EXPECT_EQ(select(kTable, p, nullptr, &plan).message(),
                  std::string("moe: ") + u.name + " is null")
            << "steps " << steps;
      }
      Problem p = validProblem();
      p.steps = steps;
      u.misalign(p);
      s = select(kTable, p, nullptr, &plan);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "steps " << steps << " " << u.name;
      EXPECT_TRUE(contains(s.message(), std::string("moe: pointer ") + u.name + " ("))
          << "steps " << steps << ": " << s.message();
    }
  }
  // The align step alone needs no caller pointer at all.
  Problem align;
  align.dtype = kBf16;
  align.tokens = 16;
  align.experts = 128;
  align.top_k = 8;
  align.hidden = 2048;
  align.intermediate = 768;
  align.steps = kAlign;
  Plan plan;
  const Status s = select(kTable, align, nullptr, &plan);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.workspace_bytes, 723968u);
}

TEST(MoeSelector, OnlyTheEntriesOfTheChosenStepsAreNeeded) {
  // A variant without the fc2 kernel runs the steps before it, and is refused (kInternal, naming
  // the entry) for any run of steps that includes it.
  const VariantInfo table[] = {{"moe_bf16", kBf16, &fixedVariant<kNoFc2Bf16>}};
  Plan plan;
  for (unsigned steps : contiguousSteps()) {
    Problem p = validProblem();
    p.steps = steps;
    const Status s = select(table, p, nullptr, &plan);
    if ((steps & kFc2) != 0) {
      EXPECT_EQ(s.code(), StatusCode::kInternal) << steps;
      EXPECT_EQ(s.message(), "moe: variant moe_bf16 has no entry kernel kiln_moe_fc2") << steps;
    } else {
      ASSERT_TRUE(s.ok()) << steps << ": " << s.toString();
      EXPECT_EQ(plan.variant, &kNoFc2Bf16);
      EXPECT_EQ(plan.entries[3], -1) << steps;
      for (int i = 0; i < kSteps; ++i) {
        if ((steps & (1u << i)) == 0) {
          EXPECT_EQ(plan.entries[i], -1) << steps << " " << i;
        } else {
          EXPECT_STREQ(kNoFc2Bf16.entries[plan.entries[i]], kStepEntries[i]) << steps << " " << i;
        }
      }
    }
  }
  const VariantInfo no_table[] = {{"moe_bf16", kBf16, nullptr}};
  Status s = select(no_table, validProblem(), nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "moe: variant moe_bf16 has no variant table");
  s = select(kTable, validProblem(), nullptr, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "moe: select without a plan");
}

// ---- tokens == 0 and skipped pointer checks
// ------------------------------------------------------

TEST(MoeSelector, ZeroTokensIsANoOpWithoutPointers) {
  Problem p;
  p.dtype = kBf16;
  p.experts = 128;
  p.top_k = 8;
  p.hidden = 2048;
  p.intermediate = 768;  // tokens 0 and no pointers
  Plan plan;
  Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.layout.bytes, 0u);
  EXPECT_EQ(plan.layout.down, 0u);
  EXPECT_STREQ(plan.info->name, "moe_bf16");
  // Misaligned pointers are not checked either.
  p.x = fakeAddress<const void>(0x10001);
  p.logits = fakeAddress<const void>(0x20001);
  EXPECT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_TRUE(plan.no_op);
  // Every run of steps is a no-op.
  for (unsigned steps : contiguousSteps()) {
    p.steps = steps;
    s = select(kTable, p, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << steps << ": " << s.toString();
    EXPECT_TRUE(plan.no_op);
  }
  // The shapes and the steps are still checked.
  p.steps = kAllSteps;
  p.intermediate = 700;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(),
            "moe: intermediate 700 is not a multiple of the tile 64");
  p.intermediate = 768;
  p.top_k = 0;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "moe: top_k 0 is outside 1..16");
  p.top_k = 8;
  p.steps = kRoute | kFc1;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).code(), StatusCode::kInvalidArgument);
  // And the entries: a no-op of a variant without its kernels is refused as a launch would be.
  const VariantInfo table[] = {{"moe_bf16", kBf16, &fixedVariant<kNoFc2Bf16>}};
  p.steps = kAllSteps;
  EXPECT_EQ(select(table, p, nullptr, &plan).message(),
            "moe: variant moe_bf16 has no entry kernel kiln_moe_fc2");
}

TEST(MoeSelector, SkippedPointerChecksPlanTheSame) {
  Problem p = validProblem();
  Plan checked;
  ASSERT_TRUE(select(kTable, p, nullptr, &checked).ok());
  p.x = nullptr;
  p.logits = fakeAddress<const void>(0x20001);
  p.w1 = nullptr;
  p.w2 = nullptr;
  p.y = fakeAddress(0x50002);
  Plan skipped;
  const Status s = select(kTable, p, nullptr, &skipped, PointerChecks::kSkip);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(skipped.workspace_bytes, checked.workspace_bytes);
  EXPECT_EQ(skipped.layout.act, checked.layout.act);
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_EQ(skipped.launches[i].grid.x, checked.launches[i].grid.x) << i;
    EXPECT_EQ(skipped.launches[i].grid.y, checked.launches[i].grid.y) << i;
    EXPECT_EQ(skipped.entries[i], checked.entries[i]) << i;
  }
  // Admission still refuses them.
  EXPECT_EQ(select(kTable, p, nullptr, &skipped).message(),
            "moe: pointer logits (0x20001) is not 2-byte aligned");
}

// ---- The device
// ----------------------------------------------------------------------------------

TEST(MoeSelector, DeviceCheckComesLastAndCarriesTheImageStatus) {
  int calls = 0;
  const DeviceQuery orin{87, [&](const kiln_variant& v, int sm) {
                           ++calls;
                           return fakeImageCheck(v, sm);
                         }};
  Plan plan;
  // Refused problems are refused for what they are, without asking the device.
  Problem bad = validProblem();
  bad.x = nullptr;
  EXPECT_EQ(select(kTable, bad, &orin, &plan).message(), "moe: x is null");
  bad = validProblem();
  bad.top_k = 9;
  bad.experts = 8;
  EXPECT_EQ(select(kTable, bad, &orin, &plan).message(), "moe: top_k 9 exceeds experts 8");
  bad = validProblem();
  bad.steps = kRoute | kFc1;
  EXPECT_EQ(select(kTable, bad, &orin, &plan).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 0);
  // An admitted one gets the image check's own status, for the chosen variant.
  Status s = select(kTable, validProblem(), &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(), "moe_bf16: artifact has sm_80, sm_90 only; device is sm_87");
  EXPECT_EQ(calls, 1);
  Problem fp16 = validProblem();
  fp16.dtype = kFp16;
  s = select(kTable, fp16, &orin, &plan);
  EXPECT_EQ(s.message(), "moe_fp16: artifact has sm_80, sm_90 only; device is sm_87");
  EXPECT_EQ(calls, 2);
  // Any run of steps is checked.
  Problem one_step = validProblem();
  one_step.steps = kFc2;
  EXPECT_EQ(select(kTable, one_step, &orin, &plan).code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(calls, 3);
  // A device with an image admits it.
  const DeviceQuery a10{86, &fakeImageCheck};
  s = select(kTable, validProblem(), &a10, &plan);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.launches[2].grid.x, 130u);  // and plans as without a device
  // A query without an image check is the runner's mistake.
  const DeviceQuery no_check{90, nullptr};
  s = select(kTable, validProblem(), &no_check, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "moe: no image check for device sm_90");
}

TEST(MoeSelector, ZeroTokensAreCheckedAgainstTheDeviceToo) {
  // selector.h: "last, `device` (when given) has an image of the variant", and
  // canImplement(problem, device_sm) promises an image for the device: a no-op answers for the
  // device as every other group's selector does (rmsnorm, decodeattn, fmha, w4a16), or a caller
  // that asks canImplement(problem, sm) with an empty batch is told yes on a device the artifact
  // cannot run at all.
  int calls = 0;
  const DeviceQuery orin{87, [&](const kiln_variant& v, int sm) {
                           ++calls;
                           return fakeImageCheck(v, sm);
                         }};
  Problem none = validProblem();
  none.tokens = 0;
  Plan plan;
  const Status s = select(kTable, none, &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage) << s.toString();
  EXPECT_EQ(s.message(), "moe_bf16: artifact has sm_80, sm_90 only; device is sm_87");
  EXPECT_EQ(calls, 1);
  const DeviceQuery a10{86, &fakeImageCheck};
  EXPECT_TRUE(select(kTable, none, &a10, &plan).ok());
  EXPECT_TRUE(plan.no_op);
}

TEST(MoeSelector, OverflowingTokensTimesTopKIsRefused) {
  // tokens is an int64 of the public Problem: tokens * top_k must be refused for any tokens, not
  // only for those whose product fits in 64 bits. (2^62 + 1) * 4 = 2^64 + 4, which wraps to 4 in a
  // 64-bit product, and must not be admitted as 4 rows.
  Problem p = validProblem();
  p.tokens = (1LL << 62) + 1;
  p.top_k = 4;
  Plan plan;
  Status s = select(kTable, p, nullptr, &plan, PointerChecks::kSkip);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
  EXPECT_EQ(s.message().rfind("moe: tokens ", 0), 0u) << s.message();
  p.tokens = INT64_MAX;
  p.top_k = 16;
  s = select(kTable, p, nullptr, &plan, PointerChecks::kSkip);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
  EXPECT_EQ(s.message().rfind("moe: tokens ", 0), 0u) << s.message();
}

}  // namespace
}  // namespace kiln::moe
