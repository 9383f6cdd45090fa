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
#include "w4a16/launch.h"
#include "w4a16/params.h"

namespace kiln::w4a16 {
namespace {

template <typename T = void>
T* fakeAddress(std::uintptr_t a) {
  return reinterpret_cast<T*>(a);
}

// Every launch, in order: the fake driver keeps the last one only, so its table's two launch
// entries are wrapped to copy each record (and the parameter bytes) as it is made.
struct Recorded {
  fake::LaunchRecord launch;
  std::vector<unsigned char> params;
};
DriverApi g_table;
std::vector<Recorded> g_launches;

void record(CUresult result) {
  if (result != CUDA_SUCCESS) return;
  g_launches.push_back(
      Recorded{fake::g_driver->lastLaunch(), fake::g_driver->lastLaunchFirstArg()});
}
CUresult recordLaunch(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                      void** params, void** extra) {
  const CUresult r =
      g_table.launchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
  record(r);
  return r;
}
CUresult recordLaunchEx(const CUlaunchConfig* config, CUfunction function, void** params,
                        void** extra) {
  const CUresult r = g_table.launchKernelEx(config, function, params, extra);
  record(r);
  return r;
}

// The fake driver with the recording launches installed (before any launch, as install() needs).
void recordLaunches(fake::Driver& driver, std::size_t param_bytes) {
  driver.record_first_arg_bytes = param_bytes;
  g_table = driver.api();
  g_launches.clear();
  DriverApi table = g_table;
  table.launchKernel = &recordLaunch;
  table.launchKernelEx = &recordLaunchEx;
  driver.install(table);
}

GemmParams gemmParams(const Recorded& r) {
  GemmParams p;
  EXPECT_EQ(r.params.size(), sizeof(GemmParams));
  std::memcpy(static_cast<void*>(&p), r.params.data(), sizeof(p));
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

TEST(W4a16Runner, GemvLaunchesTheGemmThenTheReductionAsItsDependent) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  // Sized for 256 SMs: 16 splits of 4 chunks; the H200's 132 SMs take 8 splits of 8.
  const std::size_t bytes = workspaceSize(p);
  EXPECT_EQ(bytes, 16u * 4096u * 4u);
  const Status s = run(p, kWorkspace, bytes, stream);
  ASSERT_TRUE(s.ok()) << s.toString();

  ASSERT_EQ(driver.launches.load(), 2);
  ASSERT_EQ(g_launches.size(), 2u);
  const fake::LaunchRecord& gemm = g_launches[0].launch;
  EXPECT_EQ(gemm.function, "kiln_w4a16_gemm");
  EXPECT_EQ(gemm.stream, stream);
  EXPECT_EQ(gemm.grid[0], 64u);  // 4096 / tile_n 64
  EXPECT_EQ(gemm.grid[1], 1u);
  EXPECT_EQ(gemm.grid[2], 8u);
  EXPECT_EQ(gemm.block[0], 128u);
  EXPECT_EQ(gemm.block[1], 1u);
  EXPECT_EQ(gemm.shared_bytes, static_cast<unsigned>(tileConfig(16).shared_bytes));
  EXPECT_FALSE(gemm.programmatic);
  // The image of the m16 bf16 variant: its fake cubin names its four entries.
  EXPECT_EQ(gemm.image,
            "FAKECUBIN kiln_w4a16_gemm kiln_w4a16_reduce kiln_w4a16_repack_weights "
            "kiln_w4a16_repack_scales");

  const fake::LaunchRecord& reduce = g_launches[1].launch;
  EXPECT_EQ(reduce.function, "kiln_w4a16_reduce");
  EXPECT_EQ(reduce.stream, stream);
  EXPECT_EQ(reduce.grid[0], 2u);  // 4096 outputs / 8 per thread / 256 threads
  EXPECT_EQ(reduce.grid[1], 1u);
  EXPECT_EQ(reduce.grid[2], 1u);
  EXPECT_EQ(reduce.block[0], 256u);
  EXPECT_EQ(reduce.shared_bytes, 0u);
  EXPECT_TRUE(reduce.programmatic);  // sm_90 image: cuLaunchKernelEx, programmatic serialization

  // Both kernels get the same parameters, the partials in the caller's workspace.
  for (const Recorded& r : g_launches) {
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
    EXPECT_EQ(params.splits, 8);
    EXPECT_EQ(params.chunks_per_split, 8);
  }
}

TEST(W4a16Runner, SplitFollowsTheStreamsDevice) {
  // An A100 (108 SMs): ceil(432 / 64) = 7 splits of 10 chunks, and an sm_80 image, so the
  // reduction is an ordinary launch (programmatic launches need an sm_90 image).
  fake::Driver driver({fake::a100()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.zeros = fakeAddress<const void>(0x7f0000050000);
  p.dtype = DType::kFloat16;
  ASSERT_TRUE(run(p, kWorkspace, workspaceSize(p), driver.makeStream(0)).ok());
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[0].launch.grid[2], 7u);
  EXPECT_EQ(gemmParams(g_launches[0]).chunks_per_split, 10);
  EXPECT_EQ(gemmParams(g_launches[0]).zeros, p.zeros);
  EXPECT_EQ(g_launches[1].launch.function, "kiln_w4a16_reduce");
  EXPECT_FALSE(g_launches[1].launch.programmatic);
  // Exactly the workspace the A100's plan needs is enough.
  g_launches.clear();
  ASSERT_TRUE(run(p, kWorkspace, 7u * 4096u * 4u, driver.makeStream(0)).ok());
  EXPECT_EQ(g_launches.size(), 2u);
}

TEST(W4a16Runner, OneSplitLaunchesOnlyTheGemm) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.splits = 1;
  EXPECT_EQ(workspaceSize(p), 0u);
  Status s = run(p, nullptr, 0, driver.makeStream(0));
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(g_launches[0].launch.function, "kiln_w4a16_gemm");
  EXPECT_EQ(g_launches[0].launch.grid[2], 1u);
  EXPECT_EQ(gemmParams(g_launches[0]).partials, nullptr);
  EXPECT_EQ(gemmParams(g_launches[0]).splits, 1);
  EXPECT_EQ(gemmParams(g_launches[0]).chunks_per_split, 64);
}

TEST(W4a16Runner, PrefillRunsOneSplitOfTheLargestTile) {
  // 112 x 32 tiles fill the device: one split of the 128-token tile.
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.m = 4096;
  p.n = 14336;
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(g_launches[0].launch.function, "kiln_w4a16_gemm");
  EXPECT_EQ(g_launches[0].launch.grid[0], 112u);
  EXPECT_EQ(g_launches[0].launch.grid[1], 32u);
  EXPECT_EQ(g_launches[0].launch.grid[2], 1u);
  EXPECT_EQ(g_launches[0].launch.block[0], 256u);
  EXPECT_EQ(g_launches[0].launch.shared_bytes, static_cast<unsigned>(tileConfig(128).shared_bytes));
  // Over 48 KiB: the runtime opted the function in to its shared memory.
  EXPECT_EQ(driver.functionSharedOptIn("kiln_w4a16_gemm"), tileConfig(128).shared_bytes);
}

TEST(W4a16Runner, WorkspaceErrorsSurfaceFromRunBeforeAnyLaunch) {
  fake::Driver driver({fake::h200()});
  const Problem p = validProblem();
  Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "w4a16: the split-K plan (8 splits) needs a workspace of 131072 bytes; workspace is "
            "null");
  s = run(p, kWorkspace, 131071, driver.makeStream(0));
  EXPECT_EQ(s.message(),
            "w4a16: workspace of 131071 bytes is smaller than the 131072 bytes the plan needs (8 "
            "splits)");
  s = run(p, fakeAddress(0x7f0001000004), 1 << 20, driver.makeStream(0));
  EXPECT_EQ(s.message(), "w4a16: pointer workspace (0x7f0001000004) is not 16-byte aligned");
  EXPECT_EQ(driver.launches.load(), 0);
  // The device's own plan (8 splits) fits in less than workspaceSize()'s 16.
  EXPECT_TRUE(run(p, kWorkspace, 131072, driver.makeStream(0)).ok());
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST(W4a16Runner, WorkspaceSizeIsPlannedForTheLargestDeviceUnlessToldTheSmCount) {
  Problem p = validProblem();
  EXPECT_EQ(workspaceSize(p), 16u * 4096u * 4u);  // kMaxMultiprocessors: 1024 / 64 tiles
  p.multiprocessors = 132;
  EXPECT_EQ(workspaceSize(p), 8u * 4096u * 4u);
  p.multiprocessors = 16;  // 64 slots for 64 tiles: no split
  EXPECT_EQ(workspaceSize(p), 0u);
  p.multiprocessors = 0;
  p.m = 12;
  EXPECT_EQ(workspaceSize(p), 16u * 12u * 4096u * 4u);
  // Shapes only: the tensors need not exist yet.
  p.x = nullptr;
  p.y = nullptr;
  EXPECT_EQ(workspaceSize(p), 16u * 12u * 4096u * 4u);
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
  // A workspace sized for 256 SMs, and the problem says 256: the H200 runs 16 splits.
  fake::Driver driver({fake::h200()});
  recordLaunches(driver, sizeof(GemmParams));
  Problem p = validProblem();
  p.multiprocessors = kMaxMultiprocessors;
  ASSERT_TRUE(run(p, kWorkspace, workspaceSize(p), driver.makeStream(0)).ok());
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[0].launch.grid[2], 16u);
  EXPECT_EQ(gemmParams(g_launches[1]).splits, 16);
  EXPECT_EQ(gemmParams(g_launches[1]).chunks_per_split, 4);
  // So a workspace sized for 132 SMs is too small for it.
  Problem h200 = p;
  h200.multiprocessors = 132;
  const Status s = run(p, kWorkspace, workspaceSize(h200), driver.makeStream(0));
  EXPECT_EQ(s.message(),
            "w4a16: workspace of 131072 bytes is smaller than the 262144 bytes the plan needs (16 "
            "splits)");
  EXPECT_EQ(g_launches.size(), 2u);
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
  ASSERT_EQ(g_launches.size(), 2u);
  const fake::LaunchRecord& weights = g_launches[0].launch;
  const fake::LaunchRecord& scales = g_launches[1].launch;
  EXPECT_EQ(weights.function, "kiln_w4a16_repack_weights");
  EXPECT_EQ(weights.grid[0], 22016u);  // 4096 x 11008 / 8 words, 256 per block
  EXPECT_EQ(weights.block[0], 256u);
  EXPECT_EQ(weights.stream, stream);
  EXPECT_EQ(scales.function, "kiln_w4a16_repack_scales");
  EXPECT_EQ(scales.grid[0], 1376u);  // 86 groups x 4096 scales, 256 per block
  EXPECT_EQ(scales.block[0], 256u);
  EXPECT_FALSE(scales.programmatic);
  for (const Recorded& rec : g_launches) {
    RepackParams params;
    ASSERT_EQ(rec.params.size(), sizeof(RepackParams));
    std::memcpy(static_cast<void*>(&params), rec.params.data(), sizeof(params));
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
            "w4a16_m16_g128_bf16: artifact has sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_110, "
            "sm_120 only; device is sm_75");
  for (int sm : {80, 86, 87, 89, 90, 100, 110, 120}) {
    EXPECT_TRUE(canImplement(p, sm).ok()) << sm;
  }
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
