// The decodeattn selector on a fake variant table: every admission error names the value and the
// limit, the split count follows the documented heuristic, the launch plan matches launch.h (the
// attention launch programmatic when overlap_launch asks, the merge always), and the workspace is
// sized from the problem and the SM count alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "decodeattn/launch.h"
#include "decodeattn/runner/selector.h"
#include "decodeattn/tests/valid_problem.h"
#include "support/fixed_variant.h"

namespace kiln::decodeattn {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_decodeattn", "kiln_decodeattn_rows32",
                                "kiln_decodeattn_merge"};
const char* const kEntriesReversed[] = {"kiln_decodeattn_merge", "kiln_decodeattn_rows32",
                                        "kiln_decodeattn"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

const kiln_variant kD128Bf16{
    "decodeattn_d128_bf16", "decodeattn", kEntriesReversed, 3, kImages, 2, 0};
const kiln_variant kD64Bf16{"decodeattn_d64_bf16", "decodeattn", kEntries, 3, kImages, 2, 0};
const kiln_variant kD128Fp16{"decodeattn_d128_fp16", "decodeattn", kEntries, 3, kImages, 2, 0};
const kiln_variant kNoMerge{"decodeattn_d64_fp16", "decodeattn", kEntries, 2, kImages, 2, 0};

const VariantInfo kTable[] = {
    {"decodeattn_d128_bf16", 128, DType::kBFloat16, &fixedVariant<kD128Bf16>},
    {"decodeattn_d64_bf16", 64, DType::kBFloat16, &fixedVariant<kD64Bf16>},
    {"decodeattn_d128_fp16", 128, DType::kFloat16, &fixedVariant<kD128Fp16>},
};

using fixtures::fakeAddress;
using fixtures::validProblem;

constexpr int kH200 = 132;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(DecodeAttentionSelector, PlansOneSplitWhenThePairsFillAWave) {
  Plan plan;
  const Status s = select(kTable, validProblem(), kH200, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "decodeattn_d128_bf16");
  EXPECT_FALSE(plan.no_op);
  // Entries are found by name, not position (this variant lists the merge first).
  EXPECT_STREQ(plan.variant->entries[plan.attention_entry], "kiln_decodeattn");
  EXPECT_STREQ(plan.variant->entries[plan.merge_entry], "kiln_decodeattn_merge");
  // 32 x 8 = 256 pairs >= 132 x 1 split-wave slots: 1 split.
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_EQ(plan.attention.grid.x, 1u);
  EXPECT_EQ(plan.attention.grid.y, 8u);
  EXPECT_EQ(plan.attention.grid.z, 32u);
  EXPECT_EQ(plan.attention.block.x, static_cast<unsigned>(kThreads));
  EXPECT_EQ(plan.attention.shared_bytes, static_cast<unsigned>(sharedBytes(128)));
  EXPECT_EQ(plan.attention.shared_bytes, 98304u);  // 4 warps x 3 stages x (K + V) x 16 x 256 B
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_FALSE(plan.attention.programmatic_dependency);  // overlap_launch is off by default
  EXPECT_EQ(plan.params.group_size, 4);
  EXPECT_EQ(plan.params.head_chunks, 1);
  EXPECT_EQ(plan.params.page_size_log2, 4);
  EXPECT_EQ(plan.params.num_splits, 1);
  EXPECT_EQ(plan.params.num_pages, 32 * 256);
  EXPECT_EQ(plan.params.max_pages_per_seq, 256);
  EXPECT_EQ(plan.params.partial_out, nullptr);
  EXPECT_FLOAT_EQ(plan.params.scale_log2, 0.08838834764831845f * 1.4426950408889634f);
}

// The cache strides the kernel walks, in elements, for both page layouts of the bench's shape
// (page 16, 8 KV heads, d128): NHD keeps a key's 8 heads together (2 KiB rows), HND a head's 16
// keys of a page together (4 KiB runs); a page is 16 x 8 x 128 elements either way.
TEST(DecodeAttentionSelector, CacheStridesFollowTheLayout) {
  Problem p = validProblem();
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.token_stride, 8 * 128);
  EXPECT_EQ(plan.params.head_stride, 128);
  EXPECT_EQ(plan.params.page_stride, 16 * 8 * 128);
  p.kv_layout = KvLayout::kHND;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.token_stride, 128);
  EXPECT_EQ(plan.params.head_stride, 16 * 128);
  EXPECT_EQ(plan.params.page_stride, 16 * 8 * 128);
  // The layout changes no other part of the plan.
  Plan nhd;
  p.kv_layout = KvLayout::kNHD;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &nhd).ok());
  EXPECT_EQ(nhd.num_splits, plan.num_splits);
  EXPECT_EQ(nhd.workspace_bytes, plan.workspace_bytes);
  EXPECT_EQ(nhd.attention.grid.y, plan.attention.grid.y);
}

TEST(DecodeAttentionSelector, LaunchShapeConstants) {
  EXPECT_EQ(blocksPerSm(128, 1), 2);  // 96 KiB + 1 KiB per block in 228 KiB
  EXPECT_EQ(blocksPerSm(64, 1), 4);   // 48 KiB: 4 by shared memory, capped at 4 by registers
  EXPECT_EQ(blocksPerSm(128, 2), 2);
  EXPECT_EQ(blocksPerSm(64, 2), 3);  // two row tiles: 3 by registers
  for (int row_tiles = 1; row_tiles <= kMaxRowTiles; ++row_tiles) {
    EXPECT_LE(combineBytesPerWarp(128, row_tiles), kStages * stageBytes(128));
    EXPECT_LE(combineBytesPerWarp(64, row_tiles), kStages * stageBytes(64));
  }
  EXPECT_LE(sharedBytes(128), 99 * 1024);  // the smallest opt-in limit (sm_86 / sm_89 / sm_120)
}

TEST(DecodeAttentionSelector, SplitCountsOfTheBenchmarkRows) {
  // (batch, keys) rows of kernels/decodeattn/bench/decodeattn_vs_torch.py on an H200, GQA 32/8,
  // d128.
  EXPECT_EQ(chooseSplits(1 * 8, 32768, kH200, 128), 16);  // 132 slots (one per SM) / 8 pairs
  EXPECT_EQ(chooseSplits(8 * 8, 8192, kH200, 128), 2);
  EXPECT_EQ(chooseSplits(32 * 8, 4096, kH200, 128), 1);
  EXPECT_EQ(chooseSplits(64 * 8, 2048, kH200, 128), 1);
  EXPECT_EQ(chooseSplits(256 * 8, 1024, kH200, 128), 1);
}

TEST(DecodeAttentionSelector, SplitCountIsBoundedByKeysAndMaximum) {
  EXPECT_EQ(chooseSplits(1, 256, kH200, 128), 1);  // 256 keys: one kMinKeysPerSplit
  EXPECT_EQ(chooseSplits(1, 257, kH200, 128), 2);
  EXPECT_EQ(chooseSplits(1, 1, kH200, 128), 1);
  EXPECT_EQ(chooseSplits(1, 1 << 30, kH200, 128), kMaxSplits);
  EXPECT_EQ(chooseSplits(1, 1 << 30, 2, 128), 2);  // 2 SMs, one slot each
  EXPECT_EQ(chooseSplits(1, 1 << 30, 1, 128), 1);  // 1 SM: no second slot to split into
  EXPECT_EQ(chooseSplits(4, 1 << 20, 16, 64), 8);  // Orin, d64: 16 SMs x 2 slots / 4 pairs
}

TEST(DecodeAttentionSelector, SplitCountNeverDecreasesWithMoreMultiprocessors) {
  for (long long pairs : {1LL, 3LL, 8LL, 64LL, 200LL, 1000LL}) {
    for (long long keys : {1LL, 300LL, 4096LL, 32768LL}) {
      for (int d : {64, 128}) {
        int previous = 0;
        for (int sms = 1; sms <= kMaxMultiprocessors; ++sms) {
          const int s = chooseSplits(pairs, keys, sms, d);
          EXPECT_GE(s, previous) << pairs << " pairs, " << keys << " keys, " << sms << " SMs";
          EXPECT_GE(s, 1);
          EXPECT_LE(s, kMaxSplits);
          previous = s;
        }
      }
    }
  }
}

TEST(DecodeAttentionSelector, SplitPlanSizesWorkspaceAndMerge) {
  Problem p = validProblem();
  p.batch = 1;
  p.max_pages_per_seq = 2048;  // 32768 keys
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.num_splits, 16);
  EXPECT_EQ(plan.attention.grid.x, 16u);
  EXPECT_EQ(plan.merge.grid.x, 32u);  // one block per (sequence, query head) row
  EXPECT_EQ(plan.merge.block.x, static_cast<unsigned>(kMergeThreads));
  EXPECT_TRUE(plan.merge.programmatic_dependency);  // waits for the attention grid on the device
  EXPECT_FALSE(plan.attention.programmatic_dependency);
  const std::size_t out_bytes = 32u * 16u * 128u * 4u;  // 262144, a multiple of 256
  EXPECT_EQ(plan.lse_offset, out_bytes);
  EXPECT_EQ(plan.workspace_bytes, out_bytes + 2048u);  // 32 x 16 x 4 = 2048
  // A hint of the real maximum length shortens the split count.
  p.max_seq_len = 1000;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.num_splits, 4);  // ceil(1000 / 256)
}

// overlap_launch makes the attention launch, the first of a run, programmatic; the merge is a
// programmatic dependent of the attention kernel either way.
TEST(DecodeAttentionSelector, OverlapLaunchMakesTheAttentionLaunchProgrammatic) {
  Problem p = validProblem();
  p.overlap_launch = true;
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_TRUE(plan.attention.programmatic_dependency);
  EXPECT_EQ(plan.attention.grid.z, 32u);  // nothing else of the plan changes
  EXPECT_EQ(plan.workspace_bytes, 0u);
  // Split: the attention launch follows overlap_launch, the merge stays programmatic.
  p.batch = 1;
  p.max_pages_per_seq = 2048;  // 32768 keys
  for (bool overlap : {true, false}) {
    p.overlap_launch = overlap;
    ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
    EXPECT_EQ(plan.num_splits, 16);
    EXPECT_EQ(plan.attention.programmatic_dependency, overlap);
    EXPECT_TRUE(plan.merge.programmatic_dependency);
    EXPECT_EQ(plan.workspace_bytes, 32u * 16u * 128u * 4u + 2048u);
  }
  // The 32-row entry alike (GQA 8 x 4 tokens = 32 rows of a KV head).
  p = validProblem();
  p.q_heads = 64;
  p.query_tokens = 4;
  p.overlap_launch = true;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_STREQ(plan.variant->entries[plan.attention_entry], "kiln_decodeattn_rows32");
  EXPECT_TRUE(plan.attention.programmatic_dependency);
}

// The benchmark's 1 x 32768 row: it sizes the workspace with multiprocessors = 0 (planned for
// kMaxMultiprocessors), run() re-plans for the device's 132 SMs and places the partials by that
// plan's own lse_offset. The buffer must hold the 132-SM layout, and both layouts follow the
// [rows, splits, head_dim] / [rows, splits] formula of params.h for their own split count.
TEST(DecodeAttentionSelector, BenchRowWorkspaceForMaxSmsHoldsTheDevicePlan) {
  Problem p = validProblem();
  p.batch = 1;
  p.num_pages = 2048;
  p.max_pages_per_seq = 2048;  // 32768 keys, no spare entry (as the benchmark builds it)
  p.max_seq_len = 32768;
  Plan host, device;
  ASSERT_TRUE(select(kTable, p, kMaxMultiprocessors, nullptr, &host).ok());
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &device).ok());
  EXPECT_EQ(host.num_splits, 32);  // 256 slots / 8 pairs
  EXPECT_EQ(device.num_splits, 16);
  for (const Plan* plan : {&host, &device}) {
    const std::size_t partial_rows = 32u * static_cast<std::size_t>(plan->num_splits);
    EXPECT_EQ(plan->params.num_splits, plan->num_splits);
    EXPECT_EQ(plan->attention.grid.x, static_cast<unsigned>(plan->num_splits));
    EXPECT_EQ(plan->lse_offset, (partial_rows * 128u * 4u + 255u) / 256u * 256u);
    EXPECT_EQ(plan->workspace_bytes, plan->lse_offset + (partial_rows * 4u + 255u) / 256u * 256u);
  }
  EXPECT_GE(host.workspace_bytes, device.workspace_bytes);
  EXPECT_TRUE(checkWorkspace(device, fakeAddress(0x1000), host.workspace_bytes).ok());
}

TEST(DecodeAttentionSelector, WorkspaceCheckNamesBothSizes) {
  Problem p = validProblem();
  p.batch = 1;
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  ASSERT_GT(plan.workspace_bytes, 0u);
  const Status small = checkWorkspace(plan, fakeAddress(0x1000), plan.workspace_bytes - 1);
  EXPECT_EQ(small.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(small.message(), std::to_string(plan.workspace_bytes - 1) + " bytes"))
      << small.message();
  EXPECT_TRUE(contains(small.message(), std::to_string(plan.workspace_bytes))) << small.message();
  const Status misaligned = checkWorkspace(plan, fakeAddress(0x1008), plan.workspace_bytes);
  EXPECT_TRUE(contains(misaligned.message(), "pointer workspace (0x1008) is not 16-byte aligned"))
      << misaligned.message();
  EXPECT_TRUE(checkWorkspace(plan, fakeAddress(0x1000), plan.workspace_bytes).ok());
  EXPECT_EQ(checkWorkspace(plan, nullptr, plan.workspace_bytes).code(),
            StatusCode::kInvalidArgument);
  p.batch = 32;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_TRUE(checkWorkspace(plan, nullptr, 0).ok());  // one split: no workspace
}

TEST(DecodeAttentionSelector, LargeGqaGroupsTakeSeveralHeadChunks) {
  Problem p = validProblem();
  p.q_heads = 40;
  p.kv_heads = 1;  // MQA with 40 query heads: more than one 16-row tile, so chunks of 32, 8
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.group_size, 40);
  EXPECT_EQ(plan.row_tiles, 2);
  EXPECT_STREQ(plan.variant->entries[plan.attention_entry], "kiln_decodeattn_rows32");
  EXPECT_EQ(plan.params.head_chunks, 2);
  EXPECT_EQ(plan.attention.grid.y, 2u);
  p.q_heads = 16;  // one tile exactly: the 16-row entry
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.row_tiles, 1);
  EXPECT_STREQ(plan.variant->entries[plan.attention_entry], "kiln_decodeattn");
  EXPECT_EQ(plan.params.head_chunks, 1);
  p.q_heads = 17;  // one row more: one chunk of 32
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.row_tiles, 2);
  EXPECT_EQ(plan.params.head_chunks, 1);
  p.q_heads = 65;  // chunks of 32, 32, 1
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.head_chunks, 3);
}

// Multi-token decoding: the rows of a KV head are its group's heads x the query tokens, in chunks
// of 16 (one mma tile) or, past 16, of 32; the merge and the partials have one row per (sequence,
// token, query head).
TEST(DecodeAttentionSelector, QueryTokensMultiplyTheRowsOfEachKvHead) {
  Problem p = validProblem();  // GQA 4
  p.batch = 1;
  p.max_pages_per_seq = 2048;  // 32768 keys: split
  Plan one, four, eight;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &one).ok());
  p.query_tokens = 4;  // 4 x 4 = 16 rows: still one chunk, the same grid and splits
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &four).ok());
  EXPECT_EQ(four.params.query_tokens, 4);
  EXPECT_EQ(four.row_tiles, 1);
  EXPECT_EQ(four.params.head_chunks, 1);
  EXPECT_EQ(four.attention.grid.y, one.attention.grid.y);
  EXPECT_EQ(four.num_splits, one.num_splits);
  EXPECT_EQ(four.merge.grid.x, 4u * 32u);  // (token, query head) rows
  EXPECT_EQ(four.lse_offset, 4u * one.lse_offset);
  p.query_tokens = 8;  // 32 rows: one chunk of two row tiles, the grid of T = 1
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &eight).ok());
  EXPECT_EQ(eight.row_tiles, 2);
  EXPECT_STREQ(eight.variant->entries[eight.attention_entry], "kiln_decodeattn_rows32");
  EXPECT_EQ(eight.params.head_chunks, 1);
  EXPECT_EQ(eight.attention.grid.y, one.attention.grid.y);
  EXPECT_EQ(eight.num_splits, one.num_splits);  // 8 blocks, 16 splits: one block per SM
  EXPECT_EQ(eight.attention.shared_bytes, one.attention.shared_bytes);
  EXPECT_EQ(eight.merge.grid.x, 8u * 32u);
}

TEST(DecodeAttentionSelector, UnbuiltHeadDimNamesValueAndBuiltDims) {
  Problem p = validProblem();
  p.head_dim = 96;
  Plan plan;
  const Status s = select(kTable, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "decodeattn: head_dim 96 is not built for bf16; built for bf16: 128, 64");
}

TEST(DecodeAttentionSelector, UnbuiltDtypeNamesBuiltDtypes) {
  const VariantInfo bf16_only[] = {
      {"decodeattn_d128_bf16", 128, DType::kBFloat16, &fixedVariant<kD128Bf16>}};
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  Plan plan;
  const Status s = select(bf16_only, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "decodeattn: dtype fp16 is not built; built dtypes: bf16");
  const Status none = select(std::span<const VariantInfo>{}, p, kH200, nullptr, &plan);
  EXPECT_TRUE(contains(none.message(), "built dtypes: none")) << none.message();
}

TEST(DecodeAttentionSelector, OutOfRangeDtype) {
  Problem p = validProblem();
  p.dtype = static_cast<DType>(7);
  Plan plan;
  const Status s = select(kTable, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "dtype 7")) << s.message();
}

TEST(DecodeAttentionSelector, MissingMergeEntryIsInternal) {
  const VariantInfo table[] = {
      {"decodeattn_d64_fp16", 64, DType::kFloat16, &fixedVariant<kNoMerge>}};
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  p.head_dim = 64;
  Plan plan;
  const Status s = select(table, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(contains(s.message(), "kiln_decodeattn_merge")) << s.message();
}

TEST(DecodeAttentionSelector, ZeroBatchIsANoOpWithoutPointers) {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.head_dim = 128;
  p.batch = 0;  // nothing else set: heads, pages and pointers are not checked
  Plan plan;
  const Status s = select(kTable, p, kH200, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  p.overlap_launch = true;  // a no-op launches nothing, programmatic or not
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_TRUE(plan.no_op);
}

struct BadCase {
  const char* what;
  void (*mutate)(Problem&);
  const char* message;  // a substring of the expected message
};

TEST(DecodeAttentionSelector, InvalidProblemsNameTheValueAndTheLimit) {
  const BadCase cases[] = {
      {"negative batch", [](Problem& p) { p.batch = -1; }, "batch -1 is negative"},
      {"zero kv heads", [](Problem& p) { p.kv_heads = 0; }, "kv_heads 0 is not positive"},
      {"ratio", [](Problem& p) { p.q_heads = 30; },
       "q_heads 30 is not a positive multiple of kv_heads 8"},
      {"zero q heads", [](Problem& p) { p.q_heads = 0; },
       "q_heads 0 is not a positive multiple of kv_heads 8"},
      {"page 24", [](Problem& p) { p.page_size = 24; },
       "page_size 24 is not a power of two in 16..256"},
      {"page 8", [](Problem& p) { p.page_size = 8; }, "page_size 8 is not a power of two"},
      {"page 512", [](Problem& p) { p.page_size = 512; }, "page_size 512 is not a power of two"},
      {"layout", [](Problem& p) { p.kv_layout = static_cast<KvLayout>(2); },
       "kv_layout 2 is not a KvLayout value (kNHD or kHND)"},
      {"no pages", [](Problem& p) { p.num_pages = 0; }, "num_pages 0 is not positive"},
      {"no table", [](Problem& p) { p.max_pages_per_seq = 0; },
       "max_pages_per_seq 0 is not positive"},
      {"capacity", [](Problem& p) { p.max_pages_per_seq = (1 << 26) + 1; },
       "max_pages_per_seq * page_size = 1073741840 keys exceeds the limit 1073741824"},
      {"max_seq_len", [](Problem& p) { p.max_seq_len = -2; }, "max_seq_len -2 is negative"},
      {"no query token", [](Problem& p) { p.query_tokens = 0; }, "query_tokens 0 is not in 1..8"},
      {"9 query tokens", [](Problem& p) { p.query_tokens = 9; }, "query_tokens 9 is not in 1..8"},
      {"multiprocessors", [](Problem& p) { p.multiprocessors = -1; },
       "multiprocessors -1 is negative"},
      {"scale nan", [](Problem& p) { p.scale = std::numeric_limits<float>::quiet_NaN(); },
       "is not finite"},
      {"scale inf", [](Problem& p) { p.scale = std::numeric_limits<float>::infinity(); },
       "is not finite"},
      {"null out", [](Problem& p) { p.out = nullptr; }, "out is null"},
      {"null q", [](Problem& p) { p.q = nullptr; }, "q is null"},
      {"null k", [](Problem& p) { p.k_cache = nullptr; }, "k_cache is null"},
      {"null v", [](Problem& p) { p.v_cache = nullptr; }, "v_cache is null"},
      {"null table", [](Problem& p) { p.page_table = nullptr; }, "page_table is null"},
      {"null lens", [](Problem& p) { p.seq_lens = nullptr; }, "seq_lens is null"},
      {"misaligned q", [](Problem& p) { p.q = fakeAddress(0x20002); },
       "pointer q (0x20002) is not 16-byte aligned"},
      {"misaligned out", [](Problem& p) { p.out = fakeAddress(0x10008); },
       "pointer out (0x10008) is not 16-byte aligned"},
      {"misaligned k", [](Problem& p) { p.k_cache = fakeAddress(0x30004); },
       "pointer k_cache (0x30004) is not 16-byte aligned"},
      {"misaligned v", [](Problem& p) { p.v_cache = fakeAddress(0x40001); },
       "pointer v_cache (0x40001) is not 16-byte aligned"},
      {"misaligned table",
       [](Problem& p) { p.page_table = fakeAddress<const std::int32_t>(0x50002); },
       "pointer page_table (0x50002) is not 4-byte aligned"},
      {"misaligned lens", [](Problem& p) { p.seq_lens = fakeAddress<const std::int32_t>(0x60001); },
       "pointer seq_lens (0x60001) is not 4-byte aligned"},
      {"batch grid", [](Problem& p) { p.batch = 65536; }, "batch 65536 exceeds the limit 65535"},
      {"head grid",
       [](Problem& p) {
         p.kv_heads = 40000;
         p.q_heads = 40000 * 33;  // 2 chunks of 32 rows per kv head
       },
       "kv_heads * ceil(q_heads / kv_heads * query_tokens / 32) = 80000 exceeds the limit 65535"},
      {"head rows past int",
       [](Problem& p) {
         p.kv_heads = 1;
         p.q_heads = 1 << 30;
         p.query_tokens = 8;  // 2^33 rows of one KV head: counted without overflowing
       },
       "kv_heads * ceil(q_heads / kv_heads * query_tokens / 32) = 268435456 exceeds the limit "
       "65535"},
      {"merge grid",
       [](Problem& p) {
         p.batch = 65535;
         p.q_heads = 8 * 4097;  // 129 head chunks of 32 rows per KV head: 1032 head blocks
       },
       "batch * query_tokens * q_heads = 2147975160 exceeds the limit 2147483647"},
      {"cache size",
       [](Problem& p) {
         p.num_pages = 2147483647;  // 2^31 - 1 pages of 256 keys x 65535 heads x 128 dims
         p.page_size = 256;
         p.kv_heads = 65535;
         p.q_heads = 65535;
       },
       "elements exceeds the limit 2^62"},
  };
  for (const BadCase& c : cases) {
    Problem p = validProblem();
    c.mutate(p);
    Plan plan;
    const Status s = select(kTable, p, kH200, nullptr, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s.toString();
    EXPECT_TRUE(contains(s.message(), c.message)) << c.what << ": " << s.message();
    EXPECT_TRUE(contains(s.message(), "decodeattn: ")) << c.what << ": " << s.message();
  }
}

TEST(DecodeAttentionSelector, AcceptsEveryAdmittedPageSize) {
  for (int page_size : {16, 32, 64, 128, 256}) {
    Problem p = validProblem();
    p.page_size = page_size;
    Plan plan;
    const Status s = select(kTable, p, kH200, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << page_size << ": " << s.toString();
    EXPECT_EQ(1 << plan.params.page_size_log2, page_size);
  }
}

TEST(DecodeAttentionSelector, DeviceCheckComesLastAndCarriesTheImageStatus) {
  int calls = 0;
  const DeviceQuery device{87, [&](const kiln_variant& v, int sm) {
                             ++calls;
                             return Status(StatusCode::kNoKernelImage,
                                           std::string(v.name) +
                                               ": artifact has sm_80, sm_90; device is sm_" +
                                               std::to_string(sm));
                           }};
  Plan plan;
  Problem bad = validProblem();
  bad.q = nullptr;
  EXPECT_EQ(select(kTable, bad, kH200, &device, &plan).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 0);
  const Status s = select(kTable, validProblem(), kH200, &device, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_TRUE(contains(s.message(), "device is sm_87")) << s.message();
  EXPECT_EQ(calls, 1);
  const DeviceQuery ok{90, [](const kiln_variant&, int) { return Status::Ok(); }};
  EXPECT_TRUE(select(kTable, validProblem(), kH200, &ok, &plan).ok());
}

// workspaceSize() is asked before the tensors exist: sizing depends on shapes only, while run()
// and canImplement() still refuse the same null pointers.
TEST(DecodeAttentionSelector, WorkspaceSizingIgnoresPointersButAdmissionDoesNot) {
  Problem p = validProblem();
  p.batch = 1;  // 8 pairs on 132 SMs: split, so a workspace is needed
  p.max_pages_per_seq = 2048;
  p.num_pages = 2048;
  p.out = nullptr;
  p.q = nullptr;
  Plan sized;
  const Status s = select(kTable, p, kH200, nullptr, &sized, PointerChecks::kSkip);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_GT(sized.num_splits, 1);
  EXPECT_GT(sized.workspace_bytes, 0u);
  Plan admitted;
  const Status refused = select(kTable, p, kH200, nullptr, &admitted);
  EXPECT_FALSE(refused.ok());
  EXPECT_TRUE(contains(refused.message(), "out")) << refused.message();
}

}  // namespace
}  // namespace kiln::decodeattn
