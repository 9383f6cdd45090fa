// The decodeattn runner (runner.cpp, compiled here against the group header kiln build's code
// generation writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: run() launches the attention kernel (and, for a split
// problem, the merge) on the caller's stream; overlap_launch makes the attention launch, the first
// of a run, a programmatic dependent launch where the image is sm_90 or newer, while the merge is
// a programmatic dependent of the attention kernel either way; below sm_90 no launch is
// programmatic.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "decodeattn/launch.h"
#include "decodeattn/params.h"
#include "decodeattn/tests/valid_problem.h"
#include "kiln/runners/decodeattn.h"
#include "runtime/fake_driver.h"

namespace kiln::decodeattn {
namespace {

using fixtures::fakeAddress;

// validProblem() of valid_problem.h at device-like addresses: one split on an H200.
Problem validProblem() {
  return fixtures::validProblem(0x7f0000000000);
}

// One sequence of 32768 keys: 16 splits on an H200's 132 SMs, then the merge.
Problem splitProblem() {
  Problem p = validProblem();
  p.batch = 1;
  p.num_pages = 2048;
  p.max_pages_per_seq = 2048;
  return p;
}

void* const kWorkspace = fakeAddress(0x7f0001000000);

TEST(DecodeAttentionRunner, OneSplitIsOneAttentionLaunchOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  ASSERT_TRUE(canImplement(p, 90).ok()) << canImplement(p, 90).toString();
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_decodeattn");
  EXPECT_EQ(launch.stream, stream);
  EXPECT_EQ(launch.grid[0], 1u);
  EXPECT_EQ(launch.grid[1], 8u);
  EXPECT_EQ(launch.grid[2], 32u);
  EXPECT_EQ(launch.block[0], static_cast<unsigned>(kThreads));
  EXPECT_EQ(launch.shared_bytes, static_cast<unsigned>(sharedBytes(128)));
  EXPECT_FALSE(launch.programmatic);  // overlap_launch is off by default
}

TEST(DecodeAttentionRunner, OverlapLaunchIsProgrammaticOnAnSm90Image) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  p.overlap_launch = true;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.launches.load(), 1);
  EXPECT_EQ(driver.lastLaunch().function, "kiln_decodeattn");
  EXPECT_TRUE(driver.lastLaunch().programmatic);  // cuLaunchKernelEx, programmatic serialization
  EXPECT_EQ(driver.lastLaunch().stream, stream);
  p.overlap_launch = false;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST(DecodeAttentionRunner, SplitRunsAttentionThenAProgrammaticMerge) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  for (bool overlap : {false, true}) {
    Problem p = splitProblem();
    p.overlap_launch = overlap;
    const std::size_t bytes = workspaceSize(p);
    ASSERT_GT(bytes, 0u);
    driver.clearLaunchHistory();
    const Status s = run(p, kWorkspace, bytes, stream);
    ASSERT_TRUE(s.ok()) << s.toString();
    const std::vector<fake::RecordedLaunch> history = driver.launchHistory();
    ASSERT_EQ(history.size(), 2u) << overlap;
    EXPECT_EQ(history[0].launch.function, "kiln_decodeattn");
    EXPECT_EQ(history[0].launch.grid[0], 16u);  // splits
    EXPECT_EQ(history[0].launch.programmatic, overlap);
    EXPECT_EQ(history[1].launch.function, "kiln_decodeattn_merge");
    EXPECT_EQ(history[1].launch.grid[0], 32u);  // one block per (sequence, query head) row
    EXPECT_TRUE(history[1].launch.programmatic) << overlap;  // a dependent of the attention
    EXPECT_EQ(history[1].launch.stream, stream);
  }
}

TEST(DecodeAttentionRunner, OverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  // An A100 runs the sm_80 image: no programmatic launch there (kiln/runtime.h), neither the
  // attention's nor the merge's.
  fake::Driver driver({fake::a100()});
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  p.overlap_launch = true;
  p.batch = 128;  // 1024 pairs fill a wave of the A100's 108 SMs: one split
  p.num_pages = 128 * 256;
  Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.launches.load(), 1);
  EXPECT_EQ(driver.lastLaunch().function, "kiln_decodeattn");
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  p = splitProblem();
  p.overlap_launch = true;
  driver.clearLaunchHistory();
  s = run(p, kWorkspace, workspaceSize(p), stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  const std::vector<fake::RecordedLaunch> history = driver.launchHistory();
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].launch.function, "kiln_decodeattn");
  EXPECT_FALSE(history[0].launch.programmatic);
  EXPECT_EQ(history[1].launch.function, "kiln_decodeattn_merge");
  EXPECT_FALSE(history[1].launch.programmatic);
}

TEST(DecodeAttentionRunner, ZeroBatchLaunchesNothing) {
  fake::Driver driver({fake::h200()});
  Problem p;
  p.head_dim = 128;
  p.overlap_launch = true;
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.launches.load(), 0);
}

}  // namespace
}  // namespace kiln::decodeattn
