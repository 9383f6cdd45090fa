// The gdn runner (runner.cpp, compiled here against the group header kiln build's code generation
// writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: each of the three problems launches its own entry on the
// caller's stream with the selector's grid; the commit passes its six arguments in the entry's
// order (the accepted counts as a device pointer: nothing is read on the host) and, once its
// module is loaded, launches inside a stream capture; a refused problem and batch 0 make no driver
// call; an SM the group is not built for is named.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gdn/launch.h"
#include "kiln/driver_api.h"
#include "kiln/groups/gdn.h"
#include "kiln/runners/gdn.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::gdn {
namespace {

using fake::fakeAddress;

// The commit's arguments as the launch saw them (its args die with runner.cpp's frame, so the
// launch entry of the driver table is wrapped to copy them while the call is made).
struct CommitArgsSeen {
  const void* cache = nullptr;
  void* state = nullptr;
  const void* slots = nullptr;
  const void* accepted = nullptr;
  std::int32_t tokens = 0, heads_v = 0;
};
DriverApi g_table;
std::vector<fake::LaunchRecord> g_launches;
std::vector<CommitArgsSeen> g_commit_args;

CUresult recordLaunch(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                      void** params, void** extra) {
  const CUresult r =
      g_table.launchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
  if (r != CUDA_SUCCESS) return r;
  g_launches.push_back(fake::g_driver->lastLaunch());
  if (g_launches.back().function == "kiln_gdn_mtp_commit") {
    CommitArgsSeen a;
    a.cache = *static_cast<const void* const*>(params[0]);
    a.state = *static_cast<void* const*>(params[1]);
    a.slots = *static_cast<const void* const*>(params[2]);
    a.accepted = *static_cast<const void* const*>(params[3]);
    a.tokens = *static_cast<const std::int32_t*>(params[4]);
    a.heads_v = *static_cast<const std::int32_t*>(params[5]);
    g_commit_args.push_back(a);
  }
  return r;
}

void recordLaunches(fake::Driver& driver) {
  g_table = driver.api();
  g_launches.clear();
  g_commit_args.clear();
  DriverApi table = g_table;
  table.launchKernel = &recordLaunch;
  driver.install(table);
}

// The commit of 8 sequences of 4 draft tokens, 32 value heads, into a pool of 64 slots: the cache
// ([8, 4, 32, 128, 128] floats, 64 MiB) and the pool (128 MiB) 1 TiB apart.
CommitProblem validCommit() {
  CommitProblem p;
  p.batch = 8;
  p.tokens = 4;
  p.heads_v = 32;
  p.num_slots = 64;
  p.cache = fakeAddress<const float>(std::uintptr_t{2} << 40);
  p.state = fakeAddress<float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  p.accepted = fakeAddress<const std::int32_t>(0x7f0000020000);
  return p;
}

Problem validDecode() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.batch = 8;
  p.heads_qk = 16;
  p.heads_v = 32;
  p.num_slots = 64;
  p.scale = 0.125f;
  p.q = p.k = p.v = fakeAddress<const void>(0x7f0000100000);
  p.g = p.beta = fakeAddress<const float>(0x7f0000200000);
  p.out = fakeAddress(0x7f0000300000);
  p.state = fakeAddress<float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  return p;
}

MtpProblem validMtp() {
  MtpProblem p;
  p.dtype = DType::kFloat16;
  p.batch = 8;
  p.tokens = 4;
  p.heads_qk = 16;
  p.heads_v = 32;
  p.num_slots = 64;
  p.scale = 0.125f;
  p.q = p.k = p.v = fakeAddress<const void>(0x7f0000100000);
  p.g = p.beta = fakeAddress<const float>(0x7f0000200000);
  p.out = fakeAddress(0x7f0000300000);
  p.state = fakeAddress<const float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  p.cache = fakeAddress<float>(std::uintptr_t{2} << 40);
  return p;
}

// The generated table has the commit: one variant, dtype fp32 (kiln.toml's), the mtp limit.
TEST(GdnRunner, TheGeneratedTableHasTheCommitVariant) {
  int commits = 0;
  for (const VariantInfo& v : generated::gdn::kVariants) {
    if (std::string(v.name) != "gdn_mtp_commit_dk128_dv128") continue;
    ++commits;
    EXPECT_EQ(v.dtype, DType::kFloat32);
    EXPECT_EQ(v.max_tokens, 8);
    EXPECT_FALSE(v.fused_gating);
    EXPECT_EQ(v.head_dim_k, 128);
    EXPECT_EQ(v.head_dim_v, 128);
  }
  EXPECT_EQ(commits, 1);
}

TEST(GdnRunner, CommitLaunchesItsEntryWithTheCountsOnTheDevice) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const CommitProblem p = validCommit();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 1u);
  const fake::LaunchRecord& launch = g_launches[0];
  EXPECT_EQ(launch.function, "kiln_gdn_mtp_commit");
  EXPECT_EQ(launch.image, "FAKECUBIN kiln_gdn_mtp_commit");
  EXPECT_EQ(launch.stream, stream);
  const LaunchShape shape = launchShape(128, 128, 32, 4, 1, 32, 8);
  EXPECT_EQ(launch.grid[0], shape.grid_x);
  EXPECT_EQ(launch.grid[1], 32u);
  EXPECT_EQ(launch.grid[2], 8u);
  EXPECT_EQ(launch.block[0], 32u);
  EXPECT_EQ(launch.block[1], 4u);
  EXPECT_EQ(launch.block[2], 1u);
  EXPECT_EQ(launch.shared_bytes, 0u);
  EXPECT_FALSE(launch.programmatic);
  ASSERT_EQ(g_commit_args.size(), 1u);
  const CommitArgsSeen& a = g_commit_args[0];
  EXPECT_EQ(a.cache, p.cache);
  EXPECT_EQ(a.state, p.state);
  EXPECT_EQ(a.slots, p.slots);
  EXPECT_EQ(a.accepted, p.accepted);  // a device pointer, passed as it is: no count is read here
  EXPECT_EQ(a.tokens, 4);
  EXPECT_EQ(a.heads_v, 32);
}

// Capture-safe: once the variant is loaded (a load during capture is refused, as for every
// group), the commit launches inside a capture like any kernel: its counts stay on the device.
TEST(GdnRunner, CommitLaunchesInsideACapture) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const CommitProblem p = validCommit();
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());  // loads the module, outside the capture
  driver.setCapturing(stream, true);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[1].function, "kiln_gdn_mtp_commit");
  EXPECT_EQ(g_launches[1].stream, stream);
}

TEST(GdnRunner, DecodeAndMtpLaunchTheirOwnEntries) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const Status d = run(validDecode(), nullptr, 0, stream);
  ASSERT_TRUE(d.ok()) << d.toString();
  const Status m = run(validMtp(), nullptr, 0, stream);
  ASSERT_TRUE(m.ok()) << m.toString();
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[0].function, "kiln_gdn_decode");
  EXPECT_EQ(g_launches[1].function, "kiln_gdn_decode_mtp");
  for (const fake::LaunchRecord& launch : g_launches) {
    EXPECT_EQ(launch.grid[1], 32u);
    EXPECT_EQ(launch.grid[2], 8u);
    EXPECT_EQ(launch.stream, stream);
  }
  EXPECT_TRUE(g_commit_args.empty());
}

TEST(GdnRunner, RefusedCommitsAndBatchZeroMakeNoDriverCall) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const int calls = driver.calls.load();
  CommitProblem bad = validCommit();
  bad.tokens = 9;
  const Status s = run(bad, nullptr, 0, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gdn: tokens 9 exceeds max_tokens 8 of gdn_mtp_commit_dk128_dv128");
  EXPECT_EQ(canImplement(bad).message(), s.message());
  bad = validCommit();
  bad.accepted = nullptr;
  EXPECT_EQ(run(bad, nullptr, 0, stream).message(), "gdn: accepted is null");
  CommitProblem empty = validCommit();
  empty.batch = 0;
  empty.cache = nullptr;
  EXPECT_TRUE(run(empty, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.calls.load(), calls);
  EXPECT_TRUE(g_launches.empty());
}

TEST(GdnRunner, AnSmTheGroupIsNotBuiltForIsNamed) {
  const Status s = canImplement(validCommit(), 75);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(),
            "gdn_mtp_commit_dk128_dv128: artifact has sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, "
            "sm_110, sm_120 only; device is sm_75");
}

}  // namespace
}  // namespace kiln::gdn
