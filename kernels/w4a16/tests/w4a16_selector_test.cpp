// The w4a16 selector on a fake variant table (the 16 variants of kiln.toml, or subsets): the tile
// follows m, the zero-point form follows zeros, every admission error names the value and the
// limit, the split of K follows launch.h's planSplits (no empty split, capped, one wave of the
// device's blocks, non-decreasing in the SM count, so a workspace sized for the most SMs fits every
// device), the launch plan and the kernel parameters match launch.h and params.h; the repack's
// admission and plan likewise. Where a test is about the selector's plumbing, the tuning choices
// (tile_n, warps, stages, blocks_per_sm) are read from tileConfig(); TileConfigurations,
// GemvPlanSplitsKAcrossTheDevice, PrefillPlanRunsOneSplit, SplitCountsOfHandComputedShapes and
// WorkspaceCheckNamesBothSizes pin launch.h's current tuning with hand-computed numbers.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/fake_address.h"
#include "support/fixed_variant.h"
#include "w4a16/launch.h"
#include "w4a16/params.h"
#include "w4a16/runner/selector.h"

namespace kiln::w4a16 {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_w4a16_gemm", "kiln_w4a16_reduce", "kiln_w4a16_repack_weights",
                                "kiln_w4a16_repack_scales"};
const char* const kEntriesReversed[] = {"kiln_w4a16_repack_scales", "kiln_w4a16_repack_weights",
                                        "kiln_w4a16_reduce", "kiln_w4a16_gemm"};
const char* const kGemmOnly[] = {"kiln_w4a16_gemm"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

// The m8 bf16 variant (the GEMV one of validProblem()) lists its entries in reverse: they are
// found by name, not position.
const kiln_variant kM8Bf16{"w4a16_m8_g128_bf16", "w4a16", kEntriesReversed, 4, kImages, 2, 0};
const kiln_variant kM8Fp16{"w4a16_m8_g128_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM8ZpBf16{"w4a16_m8_g128_zp_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM8ZpFp16{"w4a16_m8_g128_zp_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM16Bf16{"w4a16_m16_g128_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM64Bf16{"w4a16_m64_g128_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM128Bf16{"w4a16_m128_g128_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM16Fp16{"w4a16_m16_g128_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM64Fp16{"w4a16_m64_g128_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM128Fp16{"w4a16_m128_g128_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM16ZpBf16{"w4a16_m16_g128_zp_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM64ZpBf16{"w4a16_m64_g128_zp_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM128ZpBf16{"w4a16_m128_g128_zp_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM16ZpFp16{"w4a16_m16_g128_zp_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM64ZpFp16{"w4a16_m64_g128_zp_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM128ZpFp16{"w4a16_m128_g128_zp_fp16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kM16G256Bf16{"w4a16_m16_g256_bf16", "w4a16", kEntries, 4, kImages, 2, 0};
const kiln_variant kGemmOnlyBf16{"w4a16_m16_g128_bf16", "w4a16", kGemmOnly, 1, kImages, 2, 0};

constexpr DType kBf16 = DType::kBFloat16;
constexpr DType kFp16 = DType::kFloat16;

// Every variant of kiln.toml, in the generated table's (name) order.
const VariantInfo kTable[] = {
    {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
    {"w4a16_m128_g128_fp16", 128, 128, false, kFp16, &fixedVariant<kM128Fp16>},
    {"w4a16_m128_g128_zp_bf16", 128, 128, true, kBf16, &fixedVariant<kM128ZpBf16>},
    {"w4a16_m128_g128_zp_fp16", 128, 128, true, kFp16, &fixedVariant<kM128ZpFp16>},
    {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>},
    {"w4a16_m16_g128_fp16", 16, 128, false, kFp16, &fixedVariant<kM16Fp16>},
    {"w4a16_m16_g128_zp_bf16", 16, 128, true, kBf16, &fixedVariant<kM16ZpBf16>},
    {"w4a16_m16_g128_zp_fp16", 16, 128, true, kFp16, &fixedVariant<kM16ZpFp16>},
    {"w4a16_m64_g128_bf16", 64, 128, false, kBf16, &fixedVariant<kM64Bf16>},
    {"w4a16_m64_g128_fp16", 64, 128, false, kFp16, &fixedVariant<kM64Fp16>},
    {"w4a16_m64_g128_zp_bf16", 64, 128, true, kBf16, &fixedVariant<kM64ZpBf16>},
    {"w4a16_m64_g128_zp_fp16", 64, 128, true, kFp16, &fixedVariant<kM64ZpFp16>},
    {"w4a16_m8_g128_bf16", 8, 128, false, kBf16, &fixedVariant<kM8Bf16>},
    {"w4a16_m8_g128_fp16", 8, 128, false, kFp16, &fixedVariant<kM8Fp16>},
    {"w4a16_m8_g128_zp_bf16", 8, 128, true, kBf16, &fixedVariant<kM8ZpBf16>},
    {"w4a16_m8_g128_zp_fp16", 8, 128, true, kFp16, &fixedVariant<kM8ZpFp16>},
};

// The built tiles, and the one the selector picks for m on the full table: the smallest >= m.
constexpr int kTiles[] = {8, 16, 64, 128};
int tileFor(long long m) {
  for (int t : kTiles) {
    if (m <= t) return t;
  }
  return 128;
}

using fake::fakeAddress;

// A GEMV: bf16, one token, 4096 x 4096, symmetric, no bias.
Problem validProblem() {
  Problem p;
  p.dtype = kBf16;
  p.m = 1;
  p.n = 4096;
  p.k = 4096;
  p.group_size = 128;
  p.y = fakeAddress(0x10000);
  p.x = fakeAddress<const void>(0x20000);
  p.weight = fakeAddress<const void>(0x30000);
  p.scales = fakeAddress<const void>(0x40000);
  return p;
}

constexpr int kH200 = 132;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

Status fakeImageCheck(const kiln_variant& v, int sm) {
  if (sm == 80 || sm == 86 || sm == 90) return Status::Ok();
  return Status(
      StatusCode::kNoKernelImage,
      std::string(v.name) + ": artifact has sm_80, sm_90 only; device is sm_" + std::to_string(sm));
}

// ---- Tiles and the plan
// --------------------------------------------------------------------------

TEST(W4a16Selector, TileConfigurations) {
  // launch.h's tiles as tuned now. Every tile is 128 features (4 warps along them, 2 row tiles of
  // 16 each), so n is a multiple of 128 for every m.
  //    8, 16: the GEMV kernel, 4 x 1 warps, each a ring of chunk slots of 2 row tiles x 32 lanes
  //           x (16 weight + 4 scale + 4 zero-point bytes) = 1536: tile 8 4 slots (4 x 4 x 1536 =
  //           24576 bytes), 6 blocks per SM; tile 16 8 slots (49152 bytes), 4 blocks per SM
  //   64: tiled, 4 x 1 warps, 4 stages of 4096 (8 packed tiles) + 9216 (64 rows of 144) + 512
  //       (128 scales and zero points) bytes = 55296, 2 blocks per SM
  //  128: tiled, 4 x 2 warps, 4 stages of 4096 + 18432 + 512 bytes = 92160, 1 block per SM
  struct Want {
    int tile_m;
    bool gemv;
    int warps_n, warps_m, stages, blocks_per_sm, threads, shared_bytes;
  };
  const Want wants[] = {
      {8, true, 4, 1, 4, 6, 128, 24576},
      {16, true, 4, 1, 8, 4, 128, 49152},
      {64, false, 4, 1, 4, 2, 128, 55296},
      {128, false, 4, 2, 4, 1, 256, 92160},
  };
  for (const Want& w : wants) {
    const TileConfig t = tileConfig(w.tile_m);
    ASSERT_TRUE(t.valid) << w.tile_m;
    EXPECT_EQ(t.tile_m, w.tile_m);
    EXPECT_EQ(t.gemv, w.gemv) << w.tile_m;
    EXPECT_EQ(t.tile_n, 128) << w.tile_m;
    EXPECT_EQ(t.warps_n, w.warps_n) << w.tile_m;
    EXPECT_EQ(t.warps_m, w.warps_m) << w.tile_m;
    EXPECT_EQ(t.stages, w.stages) << w.tile_m;
    EXPECT_EQ(t.blocks_per_sm, w.blocks_per_sm) << w.tile_m;
    EXPECT_EQ(t.threads, w.threads) << w.tile_m;
    EXPECT_EQ(t.shared_bytes, w.shared_bytes) << w.tile_m;
  }
  // What holds of any tuning: the warps cover the tile exactly, the tiled kernel's stages are the
  // packed weights, x and the scales of one chunk, the GEMV kernel's shared memory is its warps'
  // rings of chunk slots, and every tile fits the smallest opt-in limit (sm_86 / 89 / 120).
  for (int tile_m : kTiles) {
    const TileConfig t = tileConfig(tile_m);
    ASSERT_TRUE(t.valid) << tile_m;
    EXPECT_EQ(t.gemv, tile_m <= 16) << tile_m;
    EXPECT_EQ(t.threads, t.warps_n * t.warps_m * kWarp) << tile_m;
    EXPECT_EQ(t.warps_n * t.row_tiles_per_warp * kTileRows, t.tile_n) << tile_m;
    EXPECT_EQ(t.warps_m * t.token_tiles_per_warp * 8, t.tile_m) << tile_m;
    EXPECT_GE(t.stages, 1) << tile_m;
    EXPECT_GE(t.blocks_per_sm, 1) << tile_m;
    EXPECT_EQ(t.tile_n % kTileRows, 0) << tile_m;
    if (t.gemv) {
      EXPECT_EQ(t.stage_bytes, 0) << tile_m;
      EXPECT_EQ(t.warp_slot_bytes, t.row_tiles_per_warp * kWarp * (16 + 4 + 4)) << tile_m;
      EXPECT_EQ(t.shared_bytes, t.threads / kWarp * t.stages * t.warp_slot_bytes) << tile_m;
    } else {
      EXPECT_EQ(t.warp_slot_bytes, 0) << tile_m;
      EXPECT_EQ(t.weight_stage_bytes, t.tile_n / kTileRows * kPackedTileBytes) << tile_m;
      EXPECT_EQ(t.x_stage_bytes, t.tile_m * kXRowPitch) << tile_m;
      EXPECT_EQ(t.scale_stage_bytes, 2 * t.tile_n * 2) << tile_m;
      EXPECT_EQ(t.shared_bytes,
                t.stages * (t.weight_stage_bytes + t.x_stage_bytes + t.scale_stage_bytes))
          << tile_m;
    }
    EXPECT_LE(t.shared_bytes, 99 * 1024) << tile_m;
  }
  EXPECT_FALSE(tileConfig(32).valid);
  EXPECT_FALSE(tileConfig(0).valid);
  EXPECT_FALSE(tileConfig(4).valid);
}

TEST(W4a16Selector, GemvPlanSplitsKAcrossTheDevice) {
  Plan plan;
  const Problem p = validProblem();
  const Status s = select(kTable, p, kH200, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "w4a16_m8_g128_bf16");
  EXPECT_EQ(plan.variant, &kM8Bf16);
  EXPECT_FALSE(plan.no_op);
  EXPECT_STREQ(plan.variant->entries[plan.gemm_entry], "kiln_w4a16_gemm");
  EXPECT_STREQ(plan.variant->entries[plan.reduce_entry], "kiln_w4a16_reduce");
  EXPECT_EQ(plan.tile.tile_m, 8);
  EXPECT_TRUE(plan.tile.gemv);
  // Hand-computed on launch.h's current tuning: 4096 / 128 = 32 column tiles x 1 token tile; 132
  // SMs x 6 blocks = 792 slots, floor(792 / 32) = 24 splits, capped at min(32, 64 chunks / 4 =
  // 16): 16 splits of 4 chunks. One wave: 32 x 16 = 512 blocks <= 792.
  EXPECT_EQ(plan.split.splits, 16);
  EXPECT_EQ(plan.split.chunks_per_split, 4);
  EXPECT_EQ(plan.workspace_bytes, 16u * 1u * 4096u * 4u);
  EXPECT_EQ(plan.gemm.grid.x, 32u);
  EXPECT_EQ(plan.gemm.grid.y, 1u);
  EXPECT_EQ(plan.gemm.grid.z, 16u);
  EXPECT_EQ(plan.gemm.block.x, 128u);
  EXPECT_EQ(plan.gemm.block.y, 1u);
  EXPECT_EQ(plan.gemm.shared_bytes, 24576u);  // 4 warps' rings of 4 slots of 1536 bytes
  EXPECT_FALSE(plan.gemm.programmatic_dependency);
  // The reduction: 4096 outputs / 8 per thread / 256 threads.
  EXPECT_EQ(plan.reduce.grid.x, 2u);
  EXPECT_EQ(plan.reduce.grid.y, 1u);
  EXPECT_EQ(plan.reduce.block.x, 256u);
  EXPECT_EQ(plan.reduce.shared_bytes, 0u);
  EXPECT_TRUE(plan.reduce.programmatic_dependency);
  // The kernel's parameters.
  EXPECT_EQ(plan.params.x, p.x);
  EXPECT_EQ(plan.params.weight, p.weight);
  EXPECT_EQ(plan.params.scales, p.scales);
  EXPECT_EQ(plan.params.zeros, nullptr);
  EXPECT_EQ(plan.params.bias, nullptr);
  EXPECT_EQ(plan.params.y, p.y);
  EXPECT_EQ(plan.params.partials, nullptr);  // run() sets it to the workspace
  EXPECT_EQ(plan.params.m, 1);
  EXPECT_EQ(plan.params.n, 4096);
  EXPECT_EQ(plan.params.k, 4096);
  EXPECT_EQ(plan.params.chunks_per_split, 4);
  EXPECT_EQ(plan.params.splits, 16);
}

TEST(W4a16Selector, PrefillPlanRunsOneSplit) {
  Problem p = validProblem();
  p.m = 2048;
  p.n = 14336;
  p.bias = fakeAddress<const void>(0x60000);
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "w4a16_m128_g128_bf16");
  EXPECT_FALSE(plan.tile.gemv);
  // 14336 / 128 = 112 x 2048 / 128 = 16 tiles = 1792 blocks, more than 132 SMs x 1 slot: one split.
  EXPECT_EQ(plan.split.splits, 1);
  EXPECT_EQ(plan.split.chunks_per_split, 64);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.gemm.grid.x, 112u);
  EXPECT_EQ(plan.gemm.grid.y, 16u);
  EXPECT_EQ(plan.gemm.grid.z, 1u);
  EXPECT_EQ(plan.gemm.block.x, 256u);
  EXPECT_EQ(plan.gemm.shared_bytes, 92160u);
  EXPECT_EQ(plan.params.bias, p.bias);
  EXPECT_EQ(plan.params.m, 2048);
  EXPECT_EQ(plan.params.splits, 1);
  EXPECT_EQ(plan.params.chunks_per_split, 64);
  EXPECT_EQ(plan.reduce.grid.x, 2048u * 14336u / 8u / 256u);
}

TEST(W4a16Selector, TileFollowsM) {
  for (std::int64_t m = 1; m <= 300; ++m) {
    Problem p = validProblem();
    p.m = m;
    Plan plan;
    const Status s = select(kTable, p, kH200, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << m << ": " << s.toString();
    const int want = m <= 8 ? 8 : m <= 16 ? 16 : m <= 64 ? 64 : 128;
    ASSERT_EQ(tileFor(m), want);
    const TileConfig tile = tileConfig(want);
    EXPECT_EQ(plan.info->tile_m, want) << "m " << m;
    EXPECT_EQ(plan.tile.tile_m, want) << "m " << m;
    EXPECT_EQ(plan.tile.gemv, want <= 16) << "m " << m;
    // grid = (n / tile_n, ceil(m / tile_m), splits), block = threads, the tile's shared bytes.
    const SplitPlan split = planSplits(m, 4096, 4096, tile, kH200);
    EXPECT_EQ(plan.split.splits, split.splits) << "m " << m;
    EXPECT_EQ(plan.split.chunks_per_split, split.chunks_per_split) << "m " << m;
    EXPECT_EQ(plan.gemm.grid.x, static_cast<unsigned>(4096 / tile.tile_n)) << "m " << m;
    EXPECT_EQ(plan.gemm.grid.y, static_cast<unsigned>((m + want - 1) / want)) << "m " << m;
    EXPECT_EQ(plan.gemm.grid.z, static_cast<unsigned>(split.splits)) << "m " << m;
    EXPECT_EQ(plan.gemm.block.x, static_cast<unsigned>(tile.threads)) << "m " << m;
    EXPECT_EQ(plan.gemm.block.y, 1u) << "m " << m;
    EXPECT_EQ(plan.gemm.shared_bytes, static_cast<unsigned>(tile.shared_bytes)) << "m " << m;
  }
}

TEST(W4a16Selector, TileFromASubsetOfTheTiles) {
  const VariantInfo no64[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>},
      {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
  };
  Problem p = validProblem();
  p.m = 40;
  Plan plan;
  ASSERT_TRUE(select(no64, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 128);
  EXPECT_EQ(plan.gemm.grid.y, 1u);
  p.m = 16;
  ASSERT_TRUE(select(no64, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 16);
  p.m = 1;  // no m8 built (an artifact from before it): the GEMV tile of 16
  ASSERT_TRUE(select(no64, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 16);
  EXPECT_TRUE(plan.tile.gemv);

  const VariantInfo only16[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>}};
  p.m = 1000;  // past every built tile: the largest, in 63 token tiles
  ASSERT_TRUE(select(only16, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 16);
  EXPECT_EQ(plan.gemm.grid.y, 63u);
  EXPECT_EQ(plan.gemm.grid.x, static_cast<unsigned>(4096 / tileConfig(16).tile_n));

  const VariantInfo m8_and_128[] = {
      {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
      {"w4a16_m8_g128_bf16", 8, 128, false, kBf16, &fixedVariant<kM8Bf16>},
  };
  p.m = 8;
  ASSERT_TRUE(select(m8_and_128, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 8);
  p.m = 9;
  ASSERT_TRUE(select(m8_and_128, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 128);
  EXPECT_FALSE(plan.tile.gemv);
  const VariantInfo only8[] = {
      {"w4a16_m8_g128_bf16", 8, 128, false, kBf16, &fixedVariant<kM8Bf16>}};
  p.m = 17;  // the only tile, in 3 token tiles
  ASSERT_TRUE(select(only8, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 8);
  EXPECT_EQ(plan.gemm.grid.y, 3u);

  const VariantInfo no16[] = {
      {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
      {"w4a16_m64_g128_bf16", 64, 128, false, kBf16, &fixedVariant<kM64Bf16>},
  };
  p.m = 1;
  ASSERT_TRUE(select(no16, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 64);
  EXPECT_FALSE(plan.tile.gemv);
}

TEST(W4a16Selector, ZeroPointFormFollowsZeros) {
  Problem p = validProblem();
  p.zeros = fakeAddress<const void>(0x50000);
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "w4a16_m8_g128_zp_bf16");
  EXPECT_TRUE(plan.info->zero_point);
  EXPECT_EQ(plan.params.zeros, p.zeros);
  p.m = 12;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "w4a16_m16_g128_zp_bf16");
  p.dtype = kFp16;
  p.m = 100;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "w4a16_m128_g128_zp_fp16");
  p.zeros = nullptr;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "w4a16_m128_g128_fp16");
  EXPECT_FALSE(plan.info->zero_point);
  EXPECT_EQ(plan.params.zeros, nullptr);
}

TEST(W4a16Selector, UnbuiltZeroPointFormNamesWhatIsBuilt) {
  const VariantInfo symmetric[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>},
      {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
  };
  Problem p = validProblem();
  p.zeros = fakeAddress<const void>(0x50000);
  Plan plan;
  Status s = select(symmetric, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(),
            "w4a16: zero points (zeros != null) are not built for bf16 group_size 128; the "
            "artifact has the symmetric variants only");
  // The build is checked before the shapes (selector.h's order): a negative m does not hide it.
  p.m = -1;
  EXPECT_EQ(select(symmetric, p, kH200, nullptr, &plan).code(), StatusCode::kNotSupported);
  const VariantInfo zero_point[] = {
      {"w4a16_m16_g128_zp_bf16", 16, 128, true, kBf16, &fixedVariant<kM16ZpBf16>}};
  p.zeros = nullptr;
  s = select(zero_point, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(),
            "w4a16: symmetric weights (zeros == null) are not built for bf16 group_size 128; the "
            "artifact has the zero-point variants only");
}

TEST(W4a16Selector, UnbuiltDtypeAndGroupSizeNameWhatIsBuilt) {
  const VariantInfo bf16_only[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>},
      {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
  };
  Problem p = validProblem();
  p.dtype = kFp16;
  Plan plan;
  Status s = select(bf16_only, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "w4a16: dtype fp16 is not built; built dtypes: bf16");
  s = select(std::span<const VariantInfo>{}, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.message(), "w4a16: dtype fp16 is not built; built dtypes: none");
  p.dtype = static_cast<DType>(7);
  s = select(kTable, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "w4a16: dtype 7 is not a DType value (fp16, bf16 or fp32)");

  // Each built group size is named once, although the table has a row per tile and form.
  p = validProblem();
  p.group_size = 64;
  s = select(kTable, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "w4a16: group_size 64 is not built for bf16; built for bf16: 128");
  const VariantInfo two_groups[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>},
      {"w4a16_m16_g128_fp16", 16, 128, false, kFp16, &fixedVariant<kM16Fp16>},
      {"w4a16_m128_g128_bf16", 128, 128, false, kBf16, &fixedVariant<kM128Bf16>},
      {"w4a16_m16_g256_bf16", 16, 256, false, kBf16, &fixedVariant<kM16G256Bf16>},
  };
  s = select(two_groups, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.message(), "w4a16: group_size 64 is not built for bf16; built for bf16: 128, 256");
  p.group_size = 256;
  s = select(two_groups, p, kH200, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "w4a16_m16_g256_bf16");
  p.k = 4096 + 128;
  s = select(two_groups, p, kH200, nullptr, &plan);
  EXPECT_EQ(s.message(), "w4a16: k 4224 is not a multiple of group_size 256");
}

struct BadCase {
  const char* what;
  void (*mutate)(Problem&);
  const char* message;  // the expected message after "w4a16: "
};

TEST(W4a16Selector, InvalidProblemsNameTheValueAndTheLimit) {
  const BadCase cases[] = {
      {"negative m", [](Problem& p) { p.m = -1; }, "m -1 is negative"},
      {"k 0", [](Problem& p) { p.k = 0; }, "k 0 is outside 1..1073741824"},
      {"k negative", [](Problem& p) { p.k = -128; }, "k -128 is outside 1..1073741824"},
      {"k huge", [](Problem& p) { p.k = (1LL << 30) + 128; },
       "k 1073741952 is outside 1..1073741824"},
      {"k 4000", [](Problem& p) { p.k = 4000; }, "k 4000 is not a multiple of 64"},
      {"k 4160", [](Problem& p) { p.k = 4160; }, "k 4160 is not a multiple of group_size 128"},
      {"n 0", [](Problem& p) { p.n = 0; }, "n 0 is outside 1..1073741824"},
      {"n negative", [](Problem& p) { p.n = -64; }, "n -64 is outside 1..1073741824"},
      {"n huge", [](Problem& p) { p.n = (1LL << 30) + 128; },
       "n 1073741952 is outside 1..1073741824"},
      {"n 4000 on tile 8", [](Problem& p) { p.n = 4000; },
       "n 4000 is not a multiple of 128 (tile_n of w4a16_m8_g128_bf16, chosen for m 1)"},
      {"n 96 on tile 8", [](Problem& p) { p.n = 96; },
       "n 96 is not a multiple of 128 (tile_n of w4a16_m8_g128_bf16, chosen for m 1)"},
      {"n 64 on tile 8", [](Problem& p) { p.n = 64; },
       "n 64 is not a multiple of 128 (tile_n of w4a16_m8_g128_bf16, chosen for m 1)"},
      {"n 4032 on tile 8",
       [](Problem& p) {
         p.m = 8;
         p.n = 4032;
       },
       "n 4032 is not a multiple of 128 (tile_n of w4a16_m8_g128_bf16, chosen for m 8)"},
      {"n 4032 on tile 16",
       [](Problem& p) {
         p.m = 9;
         p.n = 4032;
       },
       "n 4032 is not a multiple of 128 (tile_n of w4a16_m16_g128_bf16, chosen for m 9)"},
      {"n 4032 on tile 64",
       [](Problem& p) {
         p.m = 17;
         p.n = 4032;
       },
       "n 4032 is not a multiple of 128 (tile_n of w4a16_m64_g128_bf16, chosen for m 17)"},
      {"n 4032 on tile 128",
       [](Problem& p) {
         p.m = 65;
         p.n = 4032;
       },
       "n 4032 is not a multiple of 128 (tile_n of w4a16_m128_g128_bf16, chosen for m 65)"},
      {"m grid", [](Problem& p) { p.m = 65535LL * 128 + 1; },
       "m 8388481 exceeds the limit 8388480 of w4a16_m128_g128_bf16"},
      {"splits -1", [](Problem& p) { p.splits = -1; },
       "splits -1 is outside 0..32 (0: planned for the device)"},
      {"splits 33", [](Problem& p) { p.splits = 33; },
       "splits 33 is outside 0..32 (0: planned for the device)"},
      {"null x", [](Problem& p) { p.x = nullptr; }, "x is null"},
      {"null weight", [](Problem& p) { p.weight = nullptr; }, "weight is null"},
      {"null scales", [](Problem& p) { p.scales = nullptr; }, "scales is null"},
      {"null y", [](Problem& p) { p.y = nullptr; }, "y is null"},
      {"misaligned x", [](Problem& p) { p.x = fakeAddress<const void>(0x20008); },
       "pointer x (0x20008) is not 16-byte aligned"},
      {"misaligned weight", [](Problem& p) { p.weight = fakeAddress<const void>(0x30004); },
       "pointer weight (0x30004) is not 16-byte aligned"},
      {"misaligned scales", [](Problem& p) { p.scales = fakeAddress<const void>(0x40002); },
       "pointer scales (0x40002) is not 16-byte aligned"},
      {"misaligned zeros", [](Problem& p) { p.zeros = fakeAddress<const void>(0x50001); },
       "pointer zeros (0x50001) is not 16-byte aligned"},
      {"misaligned bias", [](Problem& p) { p.bias = fakeAddress<const void>(0x60008); },
       "pointer bias (0x60008) is not 16-byte aligned"},
      {"misaligned y", [](Problem& p) { p.y = fakeAddress(0x1000c); },
       "pointer y (0x1000c) is not 16-byte aligned"},
  };
  for (const BadCase& c : cases) {
    Problem p = validProblem();
    c.mutate(p);
    Plan plan;
    const Status s = select(kTable, p, kH200, nullptr, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s.toString();
    EXPECT_EQ(s.message(), std::string("w4a16: ") + c.message) << c.what;
  }
}

TEST(W4a16Selector, SmallestAdmittedShapes) {
  Problem p = validProblem();
  p.k = 128;
  Plan plan;
  for (std::int64_t m : {1, 16, 64, 128}) {  // one tile of each tile_m
    p.m = m;
    p.n = tileConfig(tileFor(m)).tile_n;  // one tile_n
    ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok()) << m;
    EXPECT_EQ(plan.info->tile_m, tileFor(m));
    EXPECT_EQ(plan.gemm.grid.x, 1u) << m;
    EXPECT_EQ(plan.gemm.grid.y, 1u) << m;
    EXPECT_EQ(plan.split.splits, 1) << m;  // 2 chunks: fewer than two splits of 4
    EXPECT_EQ(plan.split.chunks_per_split, 2) << m;
    EXPECT_EQ(plan.workspace_bytes, 0u) << m;
    // m x n / 8 vectors, 256 per block, rounded up: one block for m 1 (16 vectors).
    EXPECT_EQ(plan.reduce.grid.x, static_cast<unsigned>((m * p.n / 8 + 255) / 256)) << m;
  }
  // n 128: the smallest n of every tile now.
  p.m = 1;
  p.n = 128;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.gemm.grid.x, 1u);
}

TEST(W4a16Selector, MissingEntriesAndBadMultiprocessorsAreInternal) {
  const VariantInfo table[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kGemmOnlyBf16>}};
  Plan plan;
  Status s = select(table, validProblem(), kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            "w4a16: variant w4a16_m16_g128_bf16 has no entry kernel kiln_w4a16_reduce");
  const VariantInfo no_table[] = {{"w4a16_m16_g128_bf16", 16, 128, false, kBf16, nullptr}};
  s = select(no_table, validProblem(), kH200, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(contains(s.message(), "has no variant table")) << s.message();
  s = select(kTable, validProblem(), 0, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "w4a16: planned for 0 multiprocessors");
  EXPECT_EQ(select(kTable, validProblem(), kH200, nullptr, nullptr).code(), StatusCode::kInternal);
}

// ---- m == 0 and pointer checks
// -------------------------------------------------------------------

TEST(W4a16Selector, ZeroTokensIsANoOpWithoutPointers) {
  Problem p;
  p.dtype = kBf16;
  p.n = 4096;
  p.k = 4096;  // m 0 and no pointers
  Plan plan;
  Status s = select(kTable, p, kH200, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  for (int sms : {1, kH200, kMaxMultiprocessors}) {
    s = select(kTable, p, sms, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << sms << ": " << s.toString();
    EXPECT_EQ(plan.workspace_bytes, 0u);
  }
  p.splits = 4;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_TRUE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  // The shapes are still checked.
  p.k = 100;
  EXPECT_EQ(select(kTable, p, kH200, nullptr, &plan).message(),
            "w4a16: k 100 is not a multiple of 64");
  // m == 0 plans no split; planSplits itself is total there.
  for (int tile_m : kTiles) {
    const SplitPlan none = planSplits(0, 4096, 4096, tileConfig(tile_m), kH200);
    EXPECT_EQ(none.splits, 1) << tile_m;
    EXPECT_EQ(none.chunks_per_split, 64) << tile_m;
  }
}

TEST(W4a16Selector, SkippedPointerChecksPlanTheSame) {
  Problem p = validProblem();
  Plan checked;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &checked).ok());
  p.x = nullptr;
  p.weight = nullptr;
  p.scales = nullptr;
  p.y = fakeAddress(0x10002);
  Plan skipped;
  const Status s = select(kTable, p, kH200, nullptr, &skipped, PointerChecks::kSkip);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(skipped.workspace_bytes, checked.workspace_bytes);
  EXPECT_EQ(skipped.split.splits, checked.split.splits);
  EXPECT_EQ(skipped.gemm.grid.z, checked.gemm.grid.z);
  // Admission still refuses them.
  EXPECT_EQ(select(kTable, p, kH200, nullptr, &skipped).message(), "w4a16: x is null");
}

// ---- Split planning
// ------------------------------------------------------------------------------

TEST(W4a16Selector, SplitCountsOfHandComputedShapes) {
  // On launch.h's current tuning: tile_n 128 everywhere; 6 blocks per SM for tile 8, 4 for 16, 2
  // for 64, 1 for 128. slots = SMs x blocks_per_sm, tiles = n / 128 x ceil(m / tile_m); splits =
  // floor(slots / tiles) clamped to [1, min(32, chunks / 4)], then ceil(chunks / splits) chunks
  // each and the ceil(chunks / that) splits they need.
  const TileConfig t8 = tileConfig(8), t16 = tileConfig(16), t64 = tileConfig(64),
                   t128 = tileConfig(128);
  struct Case {
    long long m, n, k;
    const TileConfig* tile;
    int sms, splits, per;
  };
  const Case cases[] = {
      // 32 tiles, 792 slots: 24, capped at 64 chunks / 4 = 16 splits of the minimum 4 chunks
      {1, 4096, 4096, &t8, 132, 16, 4},
      {1, 4096, 4096, &t8, 256, 16, 4},
      // tile 16 (4 blocks per SM) on an A100: 432 slots: 13 splits of ceil(64 / 13) = 5 chunks
      // (12 x 5 + 4)
      {12, 4096, 4096, &t16, 108, 13, 5},
      // 400 slots: 12 splits of ceil(64 / 12) = 6 chunks, trimmed to 11 (10 x 6 + 4)
      {12, 4096, 4096, &t16, 100, 11, 6},
      {1, 4096, 4096, &t8, 1, 1, 64},  // 6 slots, 32 tiles
      {1, 4096, 4096, &t8, 5, 1, 64},  // 30 slots, 32 tiles
      // 60 slots: one split, as a second one would spill 4 blocks of it into a second wave
      {1, 4096, 4096, &t8, 10, 1, 64},
      {1, 4096, 4096, &t8, 11, 2, 32},         // 66 slots: two splits fit
      {1, 4096, 4096, &t8, 16, 3, 22},         // 96 slots: three splits of 22, 22, 20
      {8, 4096, 4096, &t8, 132, 16, 4},        // the 8 tokens share one tile
      {12, 4096, 4096, &t16, 132, 16, 4},      // the other GEMV tile: 528 slots
      {40, 4096, 4096, &t64, 132, 8, 8},       // 32 tiles, 264 slots
      {100, 4096, 4096, &t128, 132, 4, 16},    // 32 tiles, 132 slots
      {200, 4096, 4096, &t128, 132, 2, 32},    // 64 tiles
      {2048, 14336, 4096, &t128, 132, 1, 64},  // 1792 tiles: more than one wave already
      // 112 tiles: floor(792 / 112) = 7 splits of ceil(64 / 7) = 10 chunks (6 x 10 + 4); on an
      // A100 floor(648 / 112) = 5 of ceil(64 / 5) = 13 (4 x 13 + 12)
      {1, 14336, 4096, &t8, 132, 7, 10},
      {1, 14336, 4096, &t8, 108, 5, 13},
      // 172 chunks: floor(792 / 32) = 24 splits of ceil(172 / 24) = 8 (21 x 8 + 4), 22 of them
      {1, 4096, 11008, &t8, 132, 22, 8},
      {1, 4096, 128, &t8, 132, 1, 2},     // 2 chunks: no split of 4
      {1, 4096, 512, &t8, 132, 2, 4},     // 8 chunks: at most 2 splits of 4
      {1, 128, 28672, &t8, 256, 32, 14},  // 1 tile, 1536 slots, 448 chunks: capped at 32
  };
  for (const Case& c : cases) {
    const SplitPlan plan = planSplits(c.m, c.n, c.k, *c.tile, c.sms);
    EXPECT_EQ(plan.splits, c.splits) << c.m << " x " << c.n << " x " << c.k << " on " << c.sms;
    EXPECT_EQ(plan.chunks_per_split, c.per)
        << c.m << " x " << c.n << " x " << c.k << " on " << c.sms;
  }
}

TEST(W4a16Selector, SplitPlanInvariantsOverASweep) {
  // Every tile with every m (planSplits takes any), not only the one the selector would choose.
  for (int tile_m : kTiles) {
    const TileConfig tile = tileConfig(tile_m);
    ASSERT_TRUE(tile.valid) << tile_m;
    for (long long m : {1LL, 7LL, 8LL, 9LL, 16LL, 17LL, 64LL, 100LL, 1000LL, 5000LL}) {
      for (long long n : {128LL, 1024LL, 4096LL, 14336LL}) {
        const long long tiles = (n / tile.tile_n) * ((m + tile_m - 1) / tile_m);
        for (long long k : {64LL, 128LL, 192LL, 256LL, 640LL, 4096LL, 11008LL, 28672LL}) {
          const long long chunks = k / kChunkK;
          SplitPlan previous;
          for (int sms = 1; sms <= kMaxMultiprocessors; ++sms) {
            const SplitPlan p = planSplits(m, n, k, tile, sms);
            const long long slots = static_cast<long long>(sms) * tile.blocks_per_sm;
            const std::string at = "tile " + std::to_string(tile_m) + ": " + std::to_string(m) +
                                   " x " + std::to_string(n) + " x " + std::to_string(k) + " on " +
                                   std::to_string(sms);
            ASSERT_GE(p.splits, 1) << at;
            ASSERT_LE(p.splits, kMaxSplits) << at;
            // Every chunk is in a split, and no split is empty.
            ASSERT_GE(static_cast<long long>(p.splits) * p.chunks_per_split, chunks) << at;
            ASSERT_LT(static_cast<long long>(p.splits - 1) * p.chunks_per_split, chunks) << at;
            if (chunks >= kMinChunksPerSplit) {
              ASSERT_GE(p.chunks_per_split, kMinChunksPerSplit) << at;
            } else {
              ASSERT_EQ(p.splits, 1) << at;
            }
            // One wave: the blocks of every split fit the device's slots at once.
            if (p.splits > 1) {
              ASSERT_LE(tiles * p.splits, slots) << at;
            }
            // As fine as allowed: one chunk fewer per split would need more splits than one wave
            // holds, than kMaxSplits, or than kMinChunksPerSplit chunks each allow.
            if (p.chunks_per_split > 1) {
              const long long finer = (chunks + p.chunks_per_split - 2) / (p.chunks_per_split - 1);
              ASSERT_TRUE(tiles * finer > slots || finer > kMaxSplits ||
                          finer > chunks / kMinChunksPerSplit)
                  << at << ": " << p.splits << " splits of " << p.chunks_per_split;
            }
            if (sms > 1) {
              ASSERT_GE(p.splits, previous.splits) << at;
            }
            previous = p;
          }
        }
      }
    }
  }
}

TEST(W4a16Selector, WorkspaceIsThePartialsOfTheSplitPlan) {
  Problem p = validProblem();
  Plan plan;
  ASSERT_TRUE(select(kTable, p, kMaxMultiprocessors, nullptr, &plan).ok());
  EXPECT_EQ(plan.split.splits, 16);  // 64 chunks / 4: every tuning with >= 16 splits' slots
  EXPECT_EQ(plan.workspace_bytes, 16u * 4096u * 4u);
  Plan device;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &device).ok());
  EXPECT_LE(device.workspace_bytes, plan.workspace_bytes);
  p.m = 12;  // the GEMV tile of 16: 12 tokens' partials
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.info->tile_m, 16);
  const SplitPlan split12 = planSplits(12, 4096, 4096, tileConfig(16), kH200);
  ASSERT_GT(split12.splits, 1);
  EXPECT_EQ(plan.split.splits, split12.splits);
  EXPECT_EQ(plan.workspace_bytes, static_cast<std::size_t>(split12.splits) * 12u * 4096u * 4u);
  // Workspace is splits * m * n * 4 whenever K is split, else 0, over many shapes and SM counts.
  for (std::int64_t m : {1, 5, 16, 40, 64, 200, 4096}) {
    for (std::int64_t k : {128, 1024, 4096, 14336}) {
      for (int sms : {1, 16, 108, 132, 256}) {
        p.m = m;
        p.k = k;
        ASSERT_TRUE(select(kTable, p, sms, nullptr, &plan).ok());
        const std::size_t want = plan.split.splits > 1
                                     ? static_cast<std::size_t>(plan.split.splits) *
                                           static_cast<std::size_t>(m) * 4096u * 4u
                                     : 0u;
        EXPECT_EQ(plan.workspace_bytes, want) << m << " x " << k << " on " << sms;
        EXPECT_EQ(plan.gemm.grid.z, static_cast<unsigned>(plan.split.splits));
        EXPECT_EQ(plan.params.splits, plan.split.splits);
        EXPECT_EQ(plan.params.chunks_per_split, plan.split.chunks_per_split);
      }
    }
  }
}

TEST(W4a16Selector, FixedSplitCounts) {
  Problem p = validProblem();  // 64 chunks
  p.splits = 7;
  Plan plan;
  for (int sms : {1, kH200, kMaxMultiprocessors}) {  // the SM count no longer matters
    ASSERT_TRUE(select(kTable, p, sms, nullptr, &plan).ok());
    EXPECT_EQ(plan.split.chunks_per_split, 10);  // ceil(64 / 7)
    EXPECT_EQ(plan.split.splits, 7);             // 6 x 10 + 4
    EXPECT_EQ(plan.gemm.grid.z, 7u);
    EXPECT_EQ(plan.workspace_bytes, 7u * 4096u * 4u);
  }
  p.splits = 1;
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.split.splits, 1);
  EXPECT_EQ(plan.split.chunks_per_split, 64);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  p.splits = 32;
  p.k = 128;  // 2 chunks: more splits than chunks clamp to one chunk each
  ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok());
  EXPECT_EQ(plan.split.splits, 2);
  EXPECT_EQ(plan.split.chunks_per_split, 1);
  EXPECT_EQ(plan.workspace_bytes, 2u * 4096u * 4u);
  // Every fixed count: no more splits than asked or than chunks, none empty.
  for (std::int64_t k : {128, 256, 384, 640, 4096, 4224}) {
    for (int splits = 1; splits <= kMaxSplits; ++splits) {
      p.k = k;
      p.splits = splits;
      ASSERT_TRUE(select(kTable, p, kH200, nullptr, &plan).ok()) << k << " " << splits;
      const std::int64_t chunks = k / 64;
      EXPECT_LE(plan.split.splits, splits);
      EXPECT_LE(plan.split.splits, chunks);
      EXPECT_GE(static_cast<std::int64_t>(plan.split.splits) * plan.split.chunks_per_split, chunks);
      EXPECT_LT(static_cast<std::int64_t>(plan.split.splits - 1) * plan.split.chunks_per_split,
                chunks);
      if (splits <= chunks && chunks % splits == 0) {
        EXPECT_EQ(plan.split.splits, splits) << k << " " << splits;
      }
    }
  }
}

TEST(W4a16Selector, WorkspaceCheckNamesBothSizes) {
  Plan plan;
  ASSERT_TRUE(select(kTable, validProblem(), kH200, nullptr, &plan).ok());
  // The GEMV plan of GemvPlanSplitsKAcrossTheDevice: splits x 4096 x 4 bytes.
  ASSERT_GT(plan.split.splits, 1);
  const std::size_t need = plan.workspace_bytes;
  ASSERT_EQ(need, static_cast<std::size_t>(plan.split.splits) * 4096u * 4u);
  const std::string splits = std::to_string(plan.split.splits);
  const std::string bytes = std::to_string(need);
  Status s = checkWorkspace(plan, nullptr, 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "w4a16: the split-K plan (" + splits + " splits) needs a workspace of " +
                             bytes + " bytes; workspace is null");
  s = checkWorkspace(plan, fakeAddress(0x1000), need - 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "w4a16: workspace of " + std::to_string(need - 1) +
                             " bytes is smaller than the " + bytes + " bytes the plan needs (" +
                             splits + " splits)");
  s = checkWorkspace(plan, fakeAddress(0x1008), need);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "w4a16: pointer workspace (0x1008) is not 16-byte aligned");
  EXPECT_TRUE(checkWorkspace(plan, fakeAddress(0x1000), need).ok());
  EXPECT_TRUE(checkWorkspace(plan, fakeAddress(0x1000), need + (1 << 20)).ok());
  // A fixed plan, spelled out: 5 splits of 4096 x 4 bytes.
  Problem five = validProblem();
  five.splits = 5;
  ASSERT_TRUE(select(kTable, five, kH200, nullptr, &plan).ok());
  EXPECT_EQ(checkWorkspace(plan, fakeAddress(0x1000), 81919).message(),
            "w4a16: workspace of 81919 bytes is smaller than the 81920 bytes the plan needs (5 "
            "splits)");
  Problem one = validProblem();
  one.splits = 1;
  ASSERT_TRUE(select(kTable, one, kH200, nullptr, &plan).ok());
  EXPECT_TRUE(checkWorkspace(plan, nullptr, 0).ok());  // one split: no workspace
}

// ---- The device
// ----------------------------------------------------------------------------------

TEST(W4a16Selector, DeviceCheckComesLastAndCarriesTheImageStatus) {
  int calls = 0;
  const DeviceQuery orin{87, [&](const kiln_variant& v, int sm) {
                           ++calls;
                           return fakeImageCheck(v, sm);
                         }};
  Plan plan;
  Problem bad = validProblem();
  bad.x = nullptr;
  EXPECT_EQ(select(kTable, bad, kH200, &orin, &plan).code(), StatusCode::kInvalidArgument);
  bad = validProblem();
  bad.k = 4000;
  EXPECT_EQ(select(kTable, bad, kH200, &orin, &plan).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 0);
  Status s = select(kTable, validProblem(), kH200, &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(), "w4a16_m8_g128_bf16: artifact has sm_80, sm_90 only; device is sm_87");
  EXPECT_EQ(calls, 1);
  // The checked variant is the chosen one.
  Problem big = validProblem();
  big.m = 500;
  s = select(kTable, big, kH200, &orin, &plan);
  EXPECT_TRUE(contains(s.message(), "w4a16_m128_g128_bf16: ")) << s.message();
  // A no-op is checked too.
  Problem none = validProblem();
  none.m = 0;
  EXPECT_EQ(select(kTable, none, kH200, &orin, &plan).code(), StatusCode::kNoKernelImage);
  const DeviceQuery a10{86, &fakeImageCheck};
  EXPECT_TRUE(select(kTable, validProblem(), 72, &a10, &plan).ok());
  // checkDevice alone gives the same verdict on a host plan.
  Plan host;
  ASSERT_TRUE(select(kTable, validProblem(), kH200, nullptr, &host).ok());
  EXPECT_EQ(checkDevice(host, orin).message(),
            "w4a16_m8_g128_bf16: artifact has sm_80, sm_90 only; device is sm_87");
  EXPECT_TRUE(checkDevice(host, a10).ok());
  const DeviceQuery no_check{90, nullptr};
  EXPECT_EQ(checkDevice(host, no_check).code(), StatusCode::kInternal);
}

// ---- Repack
// --------------------------------------------------------------------------------------

RepackProblem validRepack() {
  RepackProblem r;
  r.format = SourceFormat::kGptq;
  r.dtype = kBf16;
  r.scales_dtype = kFp16;
  r.n = 4096;
  r.k = 4096;
  r.group_size = 128;
  r.qweight = fakeAddress<const void>(0x100000);
  r.src_scales = fakeAddress<const void>(0x200000);
  r.weight = fakeAddress(0x300000);
  r.scales = fakeAddress(0x400000);
  return r;
}

TEST(W4a16Selector, RepackPlan) {
  RepackProblem r = validRepack();
  RepackPlan plan;
  Status s = selectRepack(kTable, r, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_FALSE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  ASSERT_NE(plan.info, nullptr);
  EXPECT_EQ(plan.info->dtype, kBf16);
  EXPECT_EQ(plan.info->group_size, 128);
  EXPECT_STREQ(plan.variant->entries[plan.weights_entry], "kiln_w4a16_repack_weights");
  EXPECT_STREQ(plan.variant->entries[plan.scales_entry], "kiln_w4a16_repack_scales");
  // 4096 x 4096 / 8 = 2097152 words, 32 x 4096 scales; one thread each, 256 per block.
  EXPECT_EQ(plan.weights.grid.x, 8192u);
  EXPECT_EQ(plan.weights.grid.y, 1u);
  EXPECT_EQ(plan.weights.block.x, 256u);
  EXPECT_EQ(plan.scales.grid.x, 512u);
  EXPECT_EQ(plan.scales.block.x, 256u);
  EXPECT_EQ(plan.weights.shared_bytes, 0u);
  EXPECT_EQ(plan.params.qweight, r.qweight);
  EXPECT_EQ(plan.params.qzeros, nullptr);
  EXPECT_EQ(plan.params.src_scales, r.src_scales);
  EXPECT_EQ(plan.params.weight, r.weight);
  EXPECT_EQ(plan.params.scales, r.scales);
  EXPECT_EQ(plan.params.zeros, nullptr);
  EXPECT_EQ(plan.params.n, 4096);
  EXPECT_EQ(plan.params.k, 4096);
  EXPECT_EQ(plan.params.group_size, 128);
  EXPECT_EQ(plan.params.format, kFormatGptq);
  EXPECT_EQ(plan.params.src_scales_bf16, 0);

  // AWQ with zero points and bf16 checkpoint scales, fp16 model.
  r.format = SourceFormat::kAwq;
  r.dtype = kFp16;
  r.scales_dtype = kBf16;
  r.qzeros = fakeAddress<const void>(0x500000);
  r.zeros = fakeAddress(0x600000);
  s = selectRepack(kTable, r, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.info->dtype, kFp16);
  EXPECT_EQ(plan.params.format, kFormatAwq);
  EXPECT_EQ(plan.params.src_scales_bf16, 1);
  EXPECT_EQ(plan.params.qzeros, r.qzeros);
  EXPECT_EQ(plan.params.zeros, r.zeros);

  // Without qzeros no zero points are written, even with an output for them.
  r.qzeros = nullptr;
  ASSERT_TRUE(selectRepack(kTable, r, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.zeros, nullptr);
}

TEST(W4a16Selector, RepackGridsRoundUp) {
  struct Case {
    std::int64_t n, k;
    unsigned weight_blocks, scale_blocks;
  };
  const Case cases[] = {
      {16, 128, 1, 1},             // 256 words, 16 scales
      {48, 128, 3, 1},             // 768 words, 48 scales
      {16, 384, 3, 1},             // 768 words, 3 x 16 scales
      {272, 128, 17, 2},           // 4352 words, 272 scales
      {4096, 11008, 22016, 1376},  // 5636096 words, 86 x 4096 scales
  };
  for (const Case& c : cases) {
    RepackProblem r = validRepack();
    r.n = c.n;
    r.k = c.k;
    RepackPlan plan;
    const Status s = selectRepack(kTable, r, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << c.n << " x " << c.k << ": " << s.toString();
    EXPECT_EQ(plan.weights.grid.x, c.weight_blocks) << c.n << " x " << c.k;
    EXPECT_EQ(plan.scales.grid.x, c.scale_blocks) << c.n << " x " << c.k;
  }
}

struct BadRepack {
  const char* what;
  void (*mutate)(RepackProblem&);
  const char* message;  // the expected message after "w4a16: "
  StatusCode code = StatusCode::kInvalidArgument;
};

TEST(W4a16Selector, InvalidRepacksNameTheValueAndTheLimit) {
  const BadRepack cases[] = {
      {"format", [](RepackProblem& r) { r.format = static_cast<SourceFormat>(2); },
       "format 2 is not a SourceFormat (0 GPTQ, 1 AWQ)"},
      {"dtype", [](RepackProblem& r) { r.dtype = static_cast<DType>(7); },
       "dtype 7 is not a DType value (fp16, bf16 or fp32)"},
      {"scales dtype", [](RepackProblem& r) { r.scales_dtype = static_cast<DType>(9); },
       "scales_dtype 9 is not a scales dtype (fp16 or bf16)"},
      {"scales dtype fp32", [](RepackProblem& r) { r.scales_dtype = DType::kFloat32; },
       "scales_dtype fp32 is not a scales dtype (fp16 or bf16)"},
      {"group", [](RepackProblem& r) { r.group_size = 64; },
       "group_size 64 is not built for bf16; built for bf16: 128", StatusCode::kNotSupported},
      {"n negative", [](RepackProblem& r) { r.n = -16; }, "n -16 is negative"},
      {"n 8", [](RepackProblem& r) { r.n = 8; }, "n 8 is not a multiple of 16"},
      {"n 4104", [](RepackProblem& r) { r.n = 4104; }, "n 4104 is not a multiple of 16"},
      {"n huge", [](RepackProblem& r) { r.n = (1LL << 30) + 16; },
       "n 1073741840 is outside 1..1073741824"},
      {"k 0", [](RepackProblem& r) { r.k = 0; }, "k 0 is outside 1..1073741824"},
      {"k 100", [](RepackProblem& r) { r.k = 100; }, "k 100 is not a multiple of 64"},
      {"k 192", [](RepackProblem& r) { r.k = 192; }, "k 192 is not a multiple of group_size 128"},
      {"qzeros without zeros",
       [](RepackProblem& r) { r.qzeros = fakeAddress<const void>(0x500000); }, "zeros is null"},
      {"null qweight", [](RepackProblem& r) { r.qweight = nullptr; }, "qweight is null"},
      {"null src_scales", [](RepackProblem& r) { r.src_scales = nullptr; }, "src_scales is null"},
      {"null weight", [](RepackProblem& r) { r.weight = nullptr; }, "weight is null"},
      {"null scales", [](RepackProblem& r) { r.scales = nullptr; }, "scales is null"},
      {"misaligned qweight",
       [](RepackProblem& r) { r.qweight = fakeAddress<const void>(0x100004); },
       "pointer qweight (0x100004) is not 16-byte aligned"},
      {"misaligned qzeros",
       [](RepackProblem& r) {
         r.qzeros = fakeAddress<const void>(0x500008);
         r.zeros = fakeAddress(0x600000);
       },
       "pointer qzeros (0x500008) is not 16-byte aligned"},
      {"misaligned src_scales",
       [](RepackProblem& r) { r.src_scales = fakeAddress<const void>(0x200002); },
       "pointer src_scales (0x200002) is not 16-byte aligned"},
      {"misaligned weight", [](RepackProblem& r) { r.weight = fakeAddress(0x300001); },
       "pointer weight (0x300001) is not 16-byte aligned"},
      {"misaligned scales", [](RepackProblem& r) { r.scales = fakeAddress(0x400008); },
       "pointer scales (0x400008) is not 16-byte aligned"},
      {"misaligned zeros",
       [](RepackProblem& r) {
         r.qzeros = fakeAddress<const void>(0x500000);
         r.zeros = fakeAddress(0x600004);
       },
       "pointer zeros (0x600004) is not 16-byte aligned"},
  };
  for (const BadRepack& c : cases) {
    RepackProblem r = validRepack();
    c.mutate(r);
    RepackPlan plan;
    const Status s = selectRepack(kTable, r, nullptr, &plan);
    EXPECT_EQ(s.code(), c.code) << c.what << ": " << s.toString();
    EXPECT_EQ(s.message(), std::string("w4a16: ") + c.message) << c.what;
  }
  const VariantInfo bf16_only[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kM16Bf16>}};
  RepackProblem r = validRepack();
  r.dtype = kFp16;
  RepackPlan plan;
  const Status s = selectRepack(bf16_only, r, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "w4a16: dtype fp16 is not built; built dtypes: bf16");
  const VariantInfo gemm_only[] = {
      {"w4a16_m16_g128_bf16", 16, 128, false, kBf16, &fixedVariant<kGemmOnlyBf16>}};
  EXPECT_EQ(selectRepack(gemm_only, validRepack(), nullptr, &plan).message(),
            "w4a16: variant w4a16_m16_g128_bf16 has no entry kernel kiln_w4a16_repack_weights");
}

TEST(W4a16Selector, RepackOfNothingAndWithoutPointerChecks) {
  RepackProblem r;
  r.dtype = kBf16;  // n 0, nothing else set
  RepackPlan plan;
  Status s = selectRepack(kTable, r, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  r = validRepack();
  r.qweight = nullptr;
  r.weight = nullptr;
  s = selectRepack(kTable, r, nullptr, &plan, PointerChecks::kSkip);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_FALSE(plan.no_op);
  EXPECT_EQ(plan.weights.grid.x, 8192u);
  EXPECT_EQ(selectRepack(kTable, r, nullptr, &plan).message(), "w4a16: qweight is null");
}

TEST(W4a16Selector, RepackDeviceCheck) {
  const DeviceQuery orin{87, &fakeImageCheck};
  const DeviceQuery a100{80, &fakeImageCheck};
  RepackPlan plan;
  const Status s = selectRepack(kTable, validRepack(), &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_TRUE(contains(s.message(), "device is sm_87")) << s.message();
  EXPECT_TRUE(selectRepack(kTable, validRepack(), &a100, &plan).ok());
}

}  // namespace
}  // namespace kiln::w4a16
