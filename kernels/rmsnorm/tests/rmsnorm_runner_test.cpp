// The rmsnorm runner (runner.cpp, compiled here against the group header kiln build's code
// generation writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: run() launches the plain or the fused entry with the
// selector's plan on the caller's stream, one launch and no other work; overlap_launch makes it a
// programmatic dependent launch where the image is sm_90 or newer, and an ordinary one below;
// zero rows launch nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "kiln/groups/rmsnorm.h"
#include "kiln/runners/rmsnorm.h"
#include "rmsnorm/launch.h"
#include "rmsnorm/params.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::rmsnorm {
namespace {

using fake::paramsOf;

void* fakeAddress(std::uintptr_t a) {
  return reinterpret_cast<void*>(a);
}

// Qwen3-8B's decode of 8 tokens: hidden 4096, bf16, plain RMSNorm.
Problem validProblem() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.rows = 8;
  p.hidden = 4096;
  p.eps = 1e-6f;
  p.out = fakeAddress(0x7f0000010000);
  p.x = fakeAddress(0x7f1000000000);
  p.weight = fakeAddress(0x7f2000000000);
  return p;
}

TEST(RmsnormRunner, TheGeneratedTableHasEveryVariantWithBothEntries) {
  namespace generated = ::kiln::generated::rmsnorm;
  ASSERT_EQ(std::size(generated::kVariants), 16u);  // 8 hidden sizes x fp16, bf16
  for (const auto& v : generated::kVariants) {
    const kiln_variant* variant = v.variant();
    ASSERT_NE(variant, nullptr);
    ASSERT_EQ(variant->num_entries, 2);
    EXPECT_STREQ(variant->entries[0], "kiln_rmsnorm");
    EXPECT_STREQ(variant->entries[1], "kiln_add_rmsnorm");
  }
  EXPECT_EQ(std::size(generated::kSupportedSms), 8u);
}

TEST(RmsnormRunner, LaunchesThePlanOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(RmsnormParams);
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  ASSERT_TRUE(canImplement(p, 90).ok()) << canImplement(p, 90).toString();
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_rmsnorm");
  EXPECT_EQ(launch.stream, stream);
  const LaunchShape shape = launchShape(4096, 2);
  EXPECT_EQ(launch.grid[0], static_cast<unsigned>(blocksForRows(8, shape)));
  EXPECT_EQ(launch.block[0], static_cast<unsigned>(shape.threads_per_block));
  EXPECT_EQ(launch.shared_bytes, 0u);
  EXPECT_FALSE(launch.programmatic);
  const RmsnormParams params = paramsOf<RmsnormParams>(driver.lastLaunchFirstArg());
  EXPECT_EQ(params.out, p.out);
  EXPECT_EQ(params.x, p.x);
  EXPECT_EQ(params.residual, nullptr);
  EXPECT_EQ(params.weight, p.weight);
  EXPECT_EQ(params.rows, 8);
  EXPECT_FLOAT_EQ(params.eps, 1e-6f);
}

// Both entries: overlap_launch on an sm_90 image is a programmatic launch (cuLaunchKernelEx,
// programmatic stream serialization); off (the default) an ordinary one.
TEST(RmsnormRunner, OverlapLaunchIsProgrammaticOnAnSm90Image) {
  for (bool fused : {false, true}) {
    fake::Driver driver({fake::h200()});
    CUstream stream = driver.makeStream(0);
    Problem p = validProblem();
    if (fused) p.residual = fakeAddress(0x7f3000000000);
    const char* entry = fused ? "kiln_add_rmsnorm" : "kiln_rmsnorm";
    ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
    EXPECT_EQ(driver.lastLaunch().function, entry);
    EXPECT_FALSE(driver.lastLaunch().programmatic);
    p.overlap_launch = true;
    ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
    EXPECT_EQ(driver.lastLaunch().function, entry);
    EXPECT_TRUE(driver.lastLaunch().programmatic) << entry;
    EXPECT_EQ(driver.lastLaunch().stream, stream);
    p.overlap_launch = false;
    ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
    EXPECT_FALSE(driver.lastLaunch().programmatic) << entry;
    EXPECT_EQ(driver.launches.load(), 3);
  }
}

TEST(RmsnormRunner, OverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  // An A100 runs the sm_80 image: no programmatic launch there (kiln/runtime.h).
  for (bool fused : {false, true}) {
    fake::Driver driver({fake::a100()});
    CUstream stream = driver.makeStream(0);
    Problem p = validProblem();
    p.dtype = DType::kFloat16;
    if (fused) p.residual = fakeAddress(0x7f3000000000);
    p.overlap_launch = true;
    const Status s = run(p, nullptr, 0, stream);
    ASSERT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(driver.lastLaunch().function, fused ? "kiln_add_rmsnorm" : "kiln_rmsnorm");
    EXPECT_FALSE(driver.lastLaunch().programmatic);
    EXPECT_EQ(driver.launches.load(), 1);
  }
}

TEST(RmsnormRunner, ZeroRowsTouchNothing) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  Problem p;
  p.hidden = 4096;
  p.overlap_launch = true;
  EXPECT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.calls.load(), 0);
}

}  // namespace
}  // namespace kiln::rmsnorm
