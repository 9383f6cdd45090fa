// The w4a16 runner (runner.cpp, compiled here against the group header kiln build's code
// generation writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: run() plans the split of K for the stream's device and
// launches the GEMM, then the split-K reduction as its programmatic dependent; one split launches
// the GEMM alone; the workspace is sized for the largest device and checked before any launch;
// repack() launches its two kernels; an unsupported SM, an invalid problem and m == 0 launch
// nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/driver_api.h"
#include "kiln/runners/w4a16.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"
#include "w4a16/launch.h"
#include "w4a16/params.h"

namespace kiln::w4a16 {
namespace {

using fake::fakeAddress;

// The launches of the fake driver since its history was last cleared (fake::Driver::
// launchHistory), each with its parameter struct's bytes.
std::vector<fake::RecordedLaunch> launched() {
  return fake::g_driver->launchHistory();
}

// Records each launch's parameter struct and starts the history afresh.
void recordLaunches(fake::Driver& driver, std::size_t param_bytes) {
  driver.record_first_arg_bytes = param_bytes;
  driver.clearLaunchHistory();
}

GemmParams gemmParams(const fake::RecordedLaunch& r) {
  GemmParams p;
  EXPECT_EQ(r.first_arg.size(), sizeof(GemmParams));
  std::memcpy(static_cast<void*>(&p), r.first_arg.data(), sizeof(p));
  return p;
}

// A GEMV: bf16, one token, 4096 x 4096, symmetric, with a bias.
Problem validProblem() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.m = 1;
  p.n = 4096;
  p.k = 4096;
  p.y = fakeAddress(0x7f0000010000);
  p.x = fakeAddress<const void>(0x7f0000020000);
  p.weight = fakeAddress<const void>(0x7f0000030000);
  p.scales = fakeAddress<const void>(0x7f0000040000);
  p.bias = fakeAddress<const void>(0x7f0000060000);
  return p;
}

void* const kWorkspace = fakeAddress(0x7f0001000000);

// launch.h's split plan for a GEMV of validProblem()'s n 4096 (m 1: the tile of 8; 9..16: of 16)
// on `sms` SMs, and the workspace it needs: the expectations of these tests are about the runner's
// plumbing, so they follow launch.h's tuning (w4a16_selector_test.cpp pins its current numbers).
SplitPlan gemvPlan(int sms, std::int64_t m = 1, std::int64_t k = 4096) {
  return planSplits(m, 4096, k, tileConfig(m <= 8 ? 8 : 16), sms);
}
std::size_t gemvWorkspace(int sms, std::int64_t m = 1, std::int64_t k = 4096) {
  const int splits = gemvPlan(sms, m, k).splits;
  return splits > 1 ? static_cast<std::size_t>(splits) * static_cast<std::size_t>(m) * 4096u * 4u
                    : 0u;
}

// K long enough (448 chunks) that the split count follows the SM count rather than the
// kMinChunksPerSplit cap: the H200's plan needs less workspace than the largest device's.
constexpr std::int64_t kLongK = 28672;

TEST(W4a16Runner, GemvLaunchesTheGemmThenTheReductionAsItsDependent) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  // The workspace is sized for 256 SMs; the H200 runs its own plan for 132 (both 16 splits of 4
  // chunks on launch.h's current tuning).
  const std::size_t bytes = workspaceSize(p);
  EXPECT_EQ(bytes, gemvWorkspace(kMaxMultiprocessors));
  const SplitPlan split = gemvPlan(132);
  ASSERT_GT(split.splits, 1);
  const Status s = run(p, kWorkspace, bytes, stream);
  ASSERT_TRUE(s.ok()) << s.toString();

  ASSERT_EQ(driver.launches.load(), 2);
  ASSERT_EQ(launched().size(), 2u);
  const fake::LaunchRecord gemm = launched()[0].launch;
  EXPECT_EQ(gemm.function, "kiln_w4a16_gemm");
  EXPECT_EQ(gemm.stream, stream);
  // grid (n / tile_n, ceil(m / tile_m), splits), block = threads, shared bytes: the m8 tile's.
  const TileConfig tile = tileConfig(8);
  EXPECT_TRUE(tile.gemv);
  EXPECT_EQ(gemm.grid[0], static_cast<unsigned>(4096 / tile.tile_n));
  EXPECT_EQ(gemm.grid[1], 1u);
  EXPECT_EQ(gemm.grid[2], static_cast<unsigned>(split.splits));
  EXPECT_EQ(gemm.block[0], static_cast<unsigned>(tile.threads));
  EXPECT_EQ(gemm.block[1], 1u);
  EXPECT_EQ(gemm.shared_bytes, static_cast<unsigned>(tile.shared_bytes));
  EXPECT_FALSE(gemm.programmatic);
  // The image of the m8 bf16 variant: its fake cubin names its four entries.
  EXPECT_EQ(gemm.image,
            "FAKECUBIN kiln_w4a16_gemm kiln_w4a16_reduce kiln_w4a16_repack_weights "
            "kiln_w4a16_repack_scales");

  const fake::LaunchRecord reduce = launched()[1].launch;
  EXPECT_EQ(reduce.function, "kiln_w4a16_reduce");
  EXPECT_EQ(reduce.stream, stream);
  EXPECT_EQ(reduce.grid[0], 2u);  // 4096 outputs / 8 per thread / 256 threads
  EXPECT_EQ(reduce.grid[1], 1u);
  EXPECT_EQ(reduce.grid[2], 1u);
  EXPECT_EQ(reduce.block[0], 256u);
  EXPECT_EQ(reduce.shared_bytes, 0u);
  EXPECT_TRUE(reduce.programmatic);  // sm_90 image: cuLaunchKernelEx, programmatic serialization

  // Both kernels get the same parameters, the partials in the caller's workspace.
  for (const fake::RecordedLaunch& r : launched()) {
    const GemmParams params = gemmParams(r);
    EXPECT_EQ(params.x, p.x);
    EXPECT_EQ(params.weight, p.weight);
    EXPECT_EQ(params.scales, p.scales);
    EXPECT_EQ(params.zeros, nullptr);
    EXPECT_EQ(params.bias, p.bias);
    EXPECT_EQ(params.y, p.y);
    EXPECT_EQ(params.partials, kWorkspace);
    EXPECT_EQ(params.m, 1);
    EXPECT_EQ(params.n, 4096);
    EXPECT_EQ(params.k, 4096);
    EXPECT_EQ(params.splits, split.splits);
    EXPECT_EQ(params.chunks_per_split, split.chunks_per_split);
  }
}

TEST(W4a16Runner, SixteenTokensRunTheGemvTileOf16) {
  // m 9..16: the m16 GEMV variant, one token tile, its own split plan.
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.m = 16;
  const TileConfig tile = tileConfig(16);
  const SplitPlan split = gemvPlan(132, 16);
  ASSERT_TRUE(tile.gemv);
  ASSERT_GT(split.splits, 1);
  ASSERT_TRUE(run(p, kWorkspace, workspaceSize(p), driver.makeStream(0)).ok());
  ASSERT_EQ(launched().size(), 2u);
  const fake::LaunchRecord gemm = launched()[0].launch;
  EXPECT_EQ(gemm.function, "kiln_w4a16_gemm");
  EXPECT_EQ(gemm.grid[0], static_cast<unsigned>(4096 / tile.tile_n));
  EXPECT_EQ(gemm.grid[1], 1u);
  EXPECT_EQ(gemm.grid[2], static_cast<unsigned>(split.splits));
  EXPECT_EQ(gemm.block[0], static_cast<unsigned>(tile.threads));
  EXPECT_EQ(gemm.shared_bytes, static_cast<unsigned>(tile.shared_bytes));
  EXPECT_EQ(gemmParams(launched()[0]).m, 16);
  EXPECT_EQ(gemmParams(launched()[0]).chunks_per_split, split.chunks_per_split);
  EXPECT_EQ(launched()[1].launch.function, "kiln_w4a16_reduce");
  EXPECT_EQ(launched()[1].launch.grid[0], 16u * 4096u / 8u / 256u);
  EXPECT_EQ(workspaceSize(p), gemvWorkspace(kMaxMultiprocessors, 16));
}

TEST(W4a16Runner, SplitFollowsTheStreamsDevice) {
  // An A100 (108 SMs): its own split plan (at K 28672 on launch.h's current tuning, 20 splits
  // against the H200's 24), and an sm_80 image, so the reduction is an ordinary launch
  // (programmatic launches need an sm_90 image).
  const SplitPlan a100 = gemvPlan(108, 1, kLongK);
  ASSERT_GT(a100.splits, 1);
  ASSERT_NE(a100.splits, gemvPlan(132, 1, kLongK).splits);
  fake::Driver driver({fake::a100()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.k = kLongK;
  p.zeros = fakeAddress<const void>(0x7f0000050000);
  p.dtype = DType::kFloat16;
  ASSERT_TRUE(run(p, kWorkspace, workspaceSize(p), driver.makeStream(0)).ok());
  ASSERT_EQ(launched().size(), 2u);
  EXPECT_EQ(launched()[0].launch.grid[2], static_cast<unsigned>(a100.splits));
  EXPECT_EQ(gemmParams(launched()[0]).splits, a100.splits);
  EXPECT_EQ(gemmParams(launched()[0]).chunks_per_split, a100.chunks_per_split);
  EXPECT_EQ(gemmParams(launched()[0]).zeros, p.zeros);
  EXPECT_EQ(launched()[1].launch.function, "kiln_w4a16_reduce");
  EXPECT_FALSE(launched()[1].launch.programmatic);
  // Exactly the workspace the A100's plan needs is enough.
  fake::g_driver->clearLaunchHistory();
  ASSERT_TRUE(run(p, kWorkspace, gemvWorkspace(108, 1, kLongK), driver.makeStream(0)).ok());
  EXPECT_EQ(launched().size(), 2u);
  EXPECT_FALSE(run(p, kWorkspace, gemvWorkspace(108, 1, kLongK) - 1, driver.makeStream(0)).ok());
  EXPECT_EQ(launched().size(), 2u);
}

TEST(W4a16Runner, OneSplitLaunchesOnlyTheGemm) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.splits = 1;
  EXPECT_EQ(workspaceSize(p), 0u);
  Status s = run(p, nullptr, 0, driver.makeStream(0));
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(launched().size(), 1u);
  EXPECT_EQ(launched()[0].launch.function, "kiln_w4a16_gemm");
  EXPECT_EQ(launched()[0].launch.grid[2], 1u);
  EXPECT_EQ(gemmParams(launched()[0]).partials, nullptr);
  EXPECT_EQ(gemmParams(launched()[0]).splits, 1);
  EXPECT_EQ(gemmParams(launched()[0]).chunks_per_split, 64);
}

TEST(W4a16Runner, PrefillRunsOneSplitOfTheLargestTile) {
  // 112 x 32 tiles fill the device: one split of the 128-token tile.
  const TileConfig tile = tileConfig(128);
  ASSERT_EQ(planSplits(4096, 14336, 4096, tile, 132).splits, 1);
  ASSERT_EQ(planSplits(4096, 14336, 4096, tile, kMaxMultiprocessors).splits, 1);
  ASSERT_GT(tile.shared_bytes, 48 * 1024);  // so that the opt-in below is needed
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.m = 4096;
  p.n = 14336;
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(launched().size(), 1u);
  EXPECT_EQ(launched()[0].launch.function, "kiln_w4a16_gemm");
  EXPECT_EQ(launched()[0].launch.grid[0], static_cast<unsigned>(14336 / tile.tile_n));
  EXPECT_EQ(launched()[0].launch.grid[1], 32u);
  EXPECT_EQ(launched()[0].launch.grid[2], 1u);
  EXPECT_EQ(launched()[0].launch.block[0], static_cast<unsigned>(tile.threads));
  EXPECT_EQ(launched()[0].launch.shared_bytes, static_cast<unsigned>(tile.shared_bytes));
  // Over 48 KiB: the runtime opted the function in to its shared memory.
  EXPECT_EQ(driver.functionSharedOptIn("kiln_w4a16_gemm"), tile.shared_bytes);
}

TEST(W4a16Runner, WorkspaceErrorsSurfaceFromRunBeforeAnyLaunch) {
  fake::Driver driver({fake::h200()});
  // The H200's plan, smaller than workspaceSize()'s for 256 SMs.
  Problem p = validProblem();
  p.k = kLongK;
  const std::string splits = std::to_string(gemvPlan(132, 1, kLongK).splits);
  const std::size_t needed = gemvWorkspace(132, 1, kLongK);
  ASSERT_GT(needed, 0u);
  ASSERT_LT(needed, workspaceSize(p));
  const std::string bytes = std::to_string(needed);
  const std::string short_bytes = std::to_string(needed - 1);
  Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "w4a16: the split-K plan (" + splits + " splits) needs a workspace of " +
                             bytes + " bytes; workspace is null");
  s = run(p, kWorkspace, needed - 1, driver.makeStream(0));
  EXPECT_EQ(s.message(), "w4a16: workspace of " + short_bytes + " bytes is smaller than the " +
                             bytes + " bytes the plan needs (" + splits + " splits)");
  s = run(p, fakeAddress(0x7f0001000004), 1 << 20, driver.makeStream(0));
  EXPECT_EQ(s.message(), "w4a16: pointer workspace (0x7f0001000004) is not 16-byte aligned");
  EXPECT_EQ(driver.launches.load(), 0);
  // The device's own plan fits in less than workspaceSize().
  EXPECT_TRUE(run(p, kWorkspace, needed, driver.makeStream(0)).ok());
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST(W4a16Runner, WorkspaceSizeIsPlannedForTheLargestDeviceUnlessToldTheSmCount) {
  Problem p = validProblem();
  EXPECT_EQ(workspaceSize(p), gemvWorkspace(kMaxMultiprocessors));
  EXPECT_GT(workspaceSize(p), 0u);
  p.multiprocessors = 132;
  EXPECT_EQ(workspaceSize(p), gemvWorkspace(132));
  EXPECT_LE(workspaceSize(p), gemvWorkspace(kMaxMultiprocessors));
  p.k = kLongK;
  EXPECT_EQ(workspaceSize(p), gemvWorkspace(132, 1, kLongK));
  EXPECT_LT(workspaceSize(p), gemvWorkspace(kMaxMultiprocessors, 1, kLongK));
  p.k = 4096;
  // One SM: its blocks_per_sm slots hold fewer blocks than the 4096 / tile_n tiles, so no split.
  ASSERT_LT(tileConfig(8).blocks_per_sm, 4096 / tileConfig(8).tile_n);
  p.multiprocessors = 1;
  EXPECT_EQ(workspaceSize(p), 0u);
  p.multiprocessors = 0;
  p.m = 12;  // the GEMV tile of 16
  ASSERT_GT(gemvPlan(kMaxMultiprocessors, 12).splits, 1);
  EXPECT_EQ(workspaceSize(p), gemvWorkspace(kMaxMultiprocessors, 12));
  // Shapes only: the tensors need not exist yet.
  p.x = nullptr;
  p.y = nullptr;
  EXPECT_EQ(workspaceSize(p), gemvWorkspace(kMaxMultiprocessors, 12));
  EXPECT_FALSE(canImplement(p).ok());
  // A problem the selector refuses needs none.
  p.k = 4000;
  EXPECT_EQ(workspaceSize(p), 0u);
  // A fixed split count needs the same on every device.
  p = validProblem();
  p.splits = 5;
  EXPECT_EQ(workspaceSize(p), 5u * 4096u * 4u);
}

TEST(W4a16Runner, FixedSmCountIsUsedOnTheDeviceToo) {
  // A workspace sized for 256 SMs, and the problem says 256: the H200 runs 256 SMs' plan (for
  // k 28672, 32 splits of 14 chunks now), more splits than its own 132 SMs' plan (16 of 28).
  const SplitPlan most = gemvPlan(kMaxMultiprocessors, 1, kLongK);
  ASSERT_GT(most.splits, gemvPlan(132, 1, kLongK).splits);
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.k = kLongK;
  p.multiprocessors = kMaxMultiprocessors;
  ASSERT_TRUE(run(p, kWorkspace, workspaceSize(p), driver.makeStream(0)).ok());
  ASSERT_EQ(launched().size(), 2u);
  EXPECT_EQ(launched()[0].launch.grid[2], static_cast<unsigned>(most.splits));
  EXPECT_EQ(gemmParams(launched()[1]).splits, most.splits);
  EXPECT_EQ(gemmParams(launched()[1]).chunks_per_split, most.chunks_per_split);
  // So a workspace sized for 132 SMs is too small for it.
  Problem h200 = p;
  h200.multiprocessors = 132;
  const Status s = run(p, kWorkspace, workspaceSize(h200), driver.makeStream(0));
  EXPECT_EQ(s.message(), "w4a16: workspace of " + std::to_string(gemvWorkspace(132, 1, kLongK)) +
                             " bytes is smaller than the " +
                             std::to_string(gemvWorkspace(kMaxMultiprocessors, 1, kLongK)) +
                             " bytes the plan needs (" + std::to_string(most.splits) + " splits)");
  EXPECT_EQ(launched().size(), 2u);
}

TEST(W4a16Runner, RepackLaunchesItsTwoKernels) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(RepackParams));
  CUstream stream = driver.makeStream(0);
  RepackProblem r;
  r.format = SourceFormat::kAwq;
  r.dtype = DType::kBFloat16;
  r.scales_dtype = DType::kFloat16;
  r.n = 4096;
  r.k = 11008;
  r.qweight = fakeAddress<const void>(0x7f0000100000);
  r.qzeros = fakeAddress<const void>(0x7f0000200000);
  r.src_scales = fakeAddress<const void>(0x7f0000300000);
  r.weight = fakeAddress(0x7f0000400000);
  r.scales = fakeAddress(0x7f0000500000);
  r.zeros = fakeAddress(0x7f0000600000);
  ASSERT_TRUE(canRepack(r).ok()) << canRepack(r).toString();
  const Status s = repack(r, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(launched().size(), 2u);
  const fake::LaunchRecord weights = launched()[0].launch;
  const fake::LaunchRecord scales = launched()[1].launch;
  EXPECT_EQ(weights.function, "kiln_w4a16_repack_weights");
  EXPECT_EQ(weights.grid[0], 22016u);  // 4096 x 11008 / 8 words, 256 per block
  EXPECT_EQ(weights.block[0], 256u);
  EXPECT_EQ(weights.stream, stream);
  EXPECT_EQ(scales.function, "kiln_w4a16_repack_scales");
  EXPECT_EQ(scales.grid[0], 1376u);  // 86 groups x 4096 scales, 256 per block
  EXPECT_EQ(scales.block[0], 256u);
  EXPECT_FALSE(scales.programmatic);
  for (const fake::RecordedLaunch& rec : launched()) {
    RepackParams params;
    ASSERT_EQ(rec.first_arg.size(), sizeof(RepackParams));
    std::memcpy(static_cast<void*>(&params), rec.first_arg.data(), sizeof(params));
    EXPECT_EQ(params.qweight, r.qweight);
    EXPECT_EQ(params.qzeros, r.qzeros);
    EXPECT_EQ(params.src_scales, r.src_scales);
    EXPECT_EQ(params.weight, r.weight);
    EXPECT_EQ(params.scales, r.scales);
    EXPECT_EQ(params.zeros, r.zeros);
    EXPECT_EQ(params.n, 4096);
    EXPECT_EQ(params.k, 11008);
    EXPECT_EQ(params.group_size, 128);
    EXPECT_EQ(params.format, kFormatAwq);
    EXPECT_EQ(params.src_scales_bf16, 0);
  }
  // Refused and empty repacks launch nothing.
  r.n = 8;
  EXPECT_EQ(repack(r, stream).message(), "w4a16: n 8 is not a multiple of 16");
  r.n = 0;
  EXPECT_TRUE(repack(r, stream).ok());
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST(W4a16Runner, UnsupportedSmsAreNamed) {
  const Problem p = validProblem();
  const Status s = canImplement(p, 75);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(),
            "w4a16_m8_g128_bf16: artifact has sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_110, "
            "sm_120 only; device is sm_75");
  for (int sm : {80, 86, 87, 89, 90, 100, 110, 120}) {
    EXPECT_TRUE(canImplement(p, sm).ok()) << sm;
  }
  Problem gemv16 = validProblem();
  gemv16.m = 12;
  EXPECT_EQ(canImplement(gemv16, 75).message().rfind("w4a16_m16_g128_bf16: ", 0), 0u)
      << canImplement(gemv16, 75).message();
  Problem prefill = validProblem();
  prefill.m = 1000;
  EXPECT_EQ(canImplement(prefill, 75).message().rfind("w4a16_m128_g128_bf16: ", 0), 0u)
      << canImplement(prefill, 75).message();
  // run() on such a device is refused before any launch.
  fake::Driver driver({fake::Device{"Tesla T4", 7, 5, 40, 65536}});
  const Status r = run(p, kWorkspace, workspaceSize(p), driver.makeStream(0));
  EXPECT_EQ(r.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(r.message(), s.message());
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.load_attempts.load(), 0);
}

TEST(W4a16Runner, InvalidProblemIsRefusedAsCanImplementSays) {
  fake::Driver driver({fake::h200()});
  Problem p = validProblem();
  p.k = 4000;
  const Status s = run(p, kWorkspace, 1 << 20, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "w4a16: k 4000 is not a multiple of 64");
  EXPECT_EQ(canImplement(p).message(), s.message());
  p = validProblem();
  p.group_size = 64;
  EXPECT_EQ(run(p, kWorkspace, 1 << 20, driver.makeStream(0)).message(),
            "w4a16: group_size 64 is not built for bf16; built for bf16: 128");
  // n off the tile: every built tile is 128 features wide.
  p = validProblem();
  p.n = 4032;
  EXPECT_EQ(
      run(p, kWorkspace, 1 << 20, driver.makeStream(0)).message(),
      "w4a16: n 4032 is not a multiple of 128 (tile_n of w4a16_m8_g128_bf16, chosen for m 1)");
  p.m = 12;
  EXPECT_EQ(canImplement(p).message(),
            "w4a16: n 4032 is not a multiple of 128 (tile_n of w4a16_m16_g128_bf16, chosen for m "
            "12)");
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(W4a16Runner, ZeroTokensTouchNothing) {
  fake::Driver driver({fake::h200()});
  Problem p;
  p.dtype = DType::kBFloat16;
  p.n = 4096;
  p.k = 4096;
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.attribute_queries.load(), 0);
  EXPECT_EQ(driver.stream_context_queries.load(), 0);
}

}  // namespace
}  // namespace kiln::w4a16
