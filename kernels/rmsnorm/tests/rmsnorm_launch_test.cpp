// launch.h: the launch shape that both the rmsnorm kernel (at compile time) and its runner (at run
// time) derive from hidden and the element size. Checked for every hidden size in kiln.toml.
#include <gtest/gtest.h>

#include "rmsnorm/launch.h"

namespace kiln::rmsnorm {
namespace {

struct Expected {
  int hidden, vectors_per_thread, threads_per_row, rows_per_block, threads_per_block;
};

TEST(RmsnormLaunch, ShapesOfTheBuiltHiddenSizes) {
  const Expected cases[] = {
      {1024, 4, 32, 4, 128},  {2048, 4, 64, 2, 128},  {2560, 5, 64, 2, 128},
      {3072, 4, 96, 1, 96},   {4096, 4, 128, 1, 128}, {5120, 4, 160, 1, 160},
      {7168, 4, 224, 1, 224}, {8192, 4, 256, 1, 256},
  };
  for (const Expected& e : cases) {
    const LaunchShape s = launchShape(e.hidden, 2);
    ASSERT_TRUE(s.valid) << e.hidden;
    EXPECT_EQ(s.vectors_per_row, e.hidden * 2 / 16) << e.hidden;
    EXPECT_EQ(s.vectors_per_thread, e.vectors_per_thread) << e.hidden;
    EXPECT_EQ(s.threads_per_row, e.threads_per_row) << e.hidden;
    EXPECT_EQ(s.warps_per_row, e.threads_per_row / 32) << e.hidden;
    EXPECT_EQ(s.rows_per_block, e.rows_per_block) << e.hidden;
    EXPECT_EQ(s.threads_per_block, e.threads_per_block) << e.hidden;
  }
}

TEST(RmsnormLaunch, InvariantsHoldForEveryMultipleOf256) {
  for (int hidden = 256; hidden <= 65536; hidden += 256) {
    for (int bytes : {2, 4}) {
      const LaunchShape s = launchShape(hidden, bytes);
      if (!s.valid) {
        // Every 16-bit row up to 8192 splits; longer rows whose vector count is 32 x a prime
        // above 32 (9472 = 256 x 37) cannot, and the kernel's static_assert says so.
        EXPECT_GT(hidden * bytes, 8192 * 2) << hidden << " x " << bytes;
        continue;
      }
      EXPECT_EQ(s.vectors_per_thread * s.threads_per_row, s.vectors_per_row) << hidden;
      EXPECT_EQ(s.threads_per_row % 32, 0) << hidden;
      EXPECT_EQ(s.threads_per_block % 32, 0) << hidden;
      EXPECT_LE(s.threads_per_block, 1024) << hidden;
      EXPECT_GE(s.vectors_per_thread, 1) << hidden;
      EXPECT_LE(s.vectors_per_thread, kMaxVectorsPerThread) << hidden;
      EXPECT_EQ(s.rows_per_block * s.threads_per_row, s.threads_per_block) << hidden;
    }
  }
}

TEST(RmsnormLaunch, ShortRowsShareABlock) {
  const LaunchShape s = launchShape(256, 2);  // 32 vectors: one warp, one vector per thread
  ASSERT_TRUE(s.valid);
  EXPECT_EQ(s.vectors_per_thread, 1);
  EXPECT_EQ(s.threads_per_row, 32);
  EXPECT_EQ(s.rows_per_block, 4);
}

TEST(RmsnormLaunch, SizesThatDoNotSplitIntoWarpsAreInvalid) {
  EXPECT_FALSE(launchShape(4000, 2).valid);  // 500 vectors: no multiple of 32 threads
  EXPECT_FALSE(launchShape(100, 2).valid);   // 200 bytes: not whole vectors
  EXPECT_FALSE(launchShape(128, 2).valid);   // 16 vectors: less than a warp
  EXPECT_FALSE(launchShape(0, 2).valid);
  EXPECT_FALSE(launchShape(-4096, 2).valid);
  EXPECT_FALSE(launchShape(4096, 0).valid);
}

TEST(RmsnormLaunch, BlocksForRowsRoundsUp) {
  const LaunchShape s = launchShape(1024, 2);
  EXPECT_EQ(blocksForRows(1, s), 1);
  EXPECT_EQ(blocksForRows(4, s), 1);
  EXPECT_EQ(blocksForRows(5, s), 2);
  EXPECT_EQ(blocksForRows(4096, s), 1024);
  EXPECT_EQ(blocksForRows(7, launchShape(4096, 2)), 7);
  EXPECT_EQ(blocksForRows(0, s), 0);
  EXPECT_EQ(blocksForRows(9223372036854775807LL, s), 2305843009213693952LL);  // no overflow
}

// The kernel evaluates the same function in constant expressions.
static_assert(launchShape(4096, 2).threads_per_block == 128);
static_assert(!launchShape(4000, 2).valid);

}  // namespace
}  // namespace kiln::rmsnorm
