// The qkrope runner (runner.cpp, compiled here against the group header kiln build's code
// generation writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: run() launches the selector's plan on the caller's
// stream with the parameters it planned; overlap_launch makes it a programmatic dependent launch
// where the image is sm_90 or newer; a device the artifact has no image for, an invalid problem
// and zero tokens launch nothing; a thread with no current context runs in the stream's.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kiln/runners/qkrope.h"
#include "qkrope/launch.h"
#include "qkrope/params.h"
#include "qkrope/rope.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::qkrope {
namespace {

using fake::fakeAddress;

// Qwen3-32B's attention input in a prefill of 4096 tokens: 64 q / 8 kv heads of 128, HND pages
// of 64, QK norm, theta 1e6, contiguous K / V too.
Problem validProblem() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 4096;
  p.q_heads = 64;
  p.kv_heads = 8;
  p.head_dim = 128;
  p.rope_theta = 1e6f;
  p.qk_norm = true;
  p.eps = 1e-6f;
  p.page_size = 64;
  p.kv_layout = KvLayout::kHND;
  p.num_pages = 300;
  p.qkv = fakeAddress(0x7f0000010000);
  p.positions = fakeAddress<const std::int64_t>(0x7f0000020000);
  p.slot_mapping = fakeAddress<const std::int64_t>(0x7f0000030000);
  p.q_norm_weight = fakeAddress(0x7f0000040000);
  p.k_norm_weight = fakeAddress(0x7f0000050000);
  p.q_out = fakeAddress(0x7f0000060000);
  p.k_cache = fakeAddress(0x7f0000070000);
  p.v_cache = fakeAddress(0x7f0000080000);
  p.k_out = fakeAddress(0x7f0000090000);
  p.v_out = fakeAddress(0x7f00000a0000);
  return p;
}

QkRopeParams lastParams(fake::Driver& driver) {
  QkRopeParams params;
  const std::vector<unsigned char> bytes = driver.lastLaunchFirstArg();
  EXPECT_EQ(bytes.size(), sizeof(params));
  std::memcpy(static_cast<void*>(&params), bytes.data(), sizeof(params));
  return params;
}

TEST(QkropeRunner, RunLaunchesThePlanOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(QkRopeParams);
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();

  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_qkrope");
  EXPECT_EQ(launch.image, "FAKECUBIN kiln_qkrope");
  EXPECT_EQ(launch.stream, stream);
  // 64 + 16 = 80 heads of 8 threads: two blocks of 40 heads (320 threads) per token.
  EXPECT_EQ(launch.grid[0], 4096u);
  EXPECT_EQ(launch.grid[1], 2u);
  EXPECT_EQ(launch.grid[2], 1u);
  EXPECT_EQ(launch.block[0], 320u);
  EXPECT_EQ(launch.block[1], 1u);
  EXPECT_EQ(launch.shared_bytes, 0u);
  EXPECT_FALSE(launch.programmatic);

  const QkRopeParams params = lastParams(driver);
  EXPECT_EQ(params.qkv, p.qkv);
  EXPECT_EQ(params.positions, p.positions);
  EXPECT_EQ(params.slot_mapping, p.slot_mapping);
  EXPECT_EQ(params.q_norm_weight, p.q_norm_weight);
  EXPECT_EQ(params.k_norm_weight, p.k_norm_weight);
  EXPECT_EQ(params.q_out, p.q_out);
  EXPECT_EQ(params.k_cache, p.k_cache);
  EXPECT_EQ(params.v_cache, p.v_cache);
  EXPECT_EQ(params.k_out, p.k_out);
  EXPECT_EQ(params.v_out, p.v_out);
  EXPECT_EQ(params.num_slots, 300 * 64);
  EXPECT_EQ(params.page_stride, 64 * 8 * 128);
  EXPECT_EQ(params.token_stride, 128);
  EXPECT_EQ(params.head_stride, 64 * 128);
  EXPECT_EQ(params.page_size_log2, 6);
  EXPECT_EQ(params.q_heads, 64);
  EXPECT_EQ(params.kv_heads, 8);
  EXPECT_EQ(params.rows_per_block, 40);
  EXPECT_EQ(params.rotary_dim, 128);
  EXPECT_EQ(params.qk_norm, 1);
  EXPECT_FLOAT_EQ(params.eps, 1e-6f);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(params.inv_freq[i], invFreq(1e6f, 128, i)) << i;
}

TEST(QkropeRunner, OverlapLaunchIsProgrammaticOnAnSm90Image) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(QkRopeParams);
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  p.tokens = 1;  // decode: one token after the QKV projection
  p.overlap_launch = true;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_qkrope");
  EXPECT_TRUE(launch.programmatic);  // cuLaunchKernelEx, programmatic stream serialization
  EXPECT_EQ(launch.stream, stream);
  EXPECT_EQ(launch.grid[0], 1u);
  EXPECT_EQ(launch.grid[1], 2u);
  EXPECT_EQ(launch.block[0], 320u);
  EXPECT_EQ(lastParams(driver).qkv, p.qkv);
  p.overlap_launch = false;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST(QkropeRunner, OverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  // An A100 runs the sm_80 image: no programmatic launch there (kiln/runtime.h).
  fake::Driver driver({fake::a100()});
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  p.overlap_launch = true;
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.launches.load(), 1);
  EXPECT_EQ(driver.lastLaunch().function, "kiln_qkrope");
  EXPECT_FALSE(driver.lastLaunch().programmatic);
}

TEST(QkropeRunner, EveryHeadDimAndDtypeIsBuilt) {
  fake::Driver driver({fake::a100()});
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int head_dim : {64, 128, 256}) {
      Problem p = validProblem();
      p.dtype = dtype;
      p.head_dim = head_dim;
      p.rotary_dim = head_dim / 2;
      const Status s = run(p, nullptr, 0, driver.makeStream(0));
      EXPECT_TRUE(s.ok()) << s.toString();
    }
  }
  EXPECT_EQ(driver.launches.load(), 6);
}

TEST(QkropeRunner, DeviceWithoutAnImageLaunchesNothing) {
  // kiln.toml builds sm_80 and newer: a Turing device has no image.
  fake::Driver driver({fake::Device{"Tesla T4", 7, 5, 40, 65536}});
  const Problem p = validProblem();
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage) << s.toString();
  EXPECT_NE(s.message().find("sm_75"), std::string::npos) << s.message();
  EXPECT_EQ(canImplement(p, 75).code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(QkropeRunner, InvalidProblemIsRefusedAsCanImplementSays) {
  fake::Driver driver({fake::h200()});
  Problem p = validProblem();
  p.page_size = 32 + 16;
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "qkrope: page_size 48 is not a power of two in 16..256");
  EXPECT_EQ(canImplement(p).message(), s.message());
  EXPECT_EQ(workspaceSize(p), 0u);
  p = validProblem();
  p.head_dim = 96;
  // The generated table lists the variants by name.
  EXPECT_EQ(run(p, nullptr, 0, driver.makeStream(0)).message(),
            "qkrope: head_dim 96 is not built for bf16; built for bf16: 128, 256, 64");
  p = validProblem();
  p.slot_mapping = fakeAddress<const std::int64_t>(0x7f0000030004);
  EXPECT_EQ(run(p, nullptr, 0, driver.makeStream(0)).message(),
            "qkrope: pointer slot_mapping (0x7f0000030004) is not 8-byte aligned");
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(QkropeRunner, ZeroTokensTouchNothing) {
  fake::Driver driver({fake::h200()});
  Problem p;
  p.dtype = DType::kFloat16;
  p.head_dim = 64;
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.attribute_queries.load(), 0);
}

// run() promises the device that owns the stream, from any thread (issue 33): from a thread with
// no current context, and from one whose current context is another device's, the kernel is
// launched in the stream's context, and the thread's own context is current again afterwards.
TEST(QkropeRunner, RunsFromAThreadWithNoContextOrAnotherDevicesContext) {
  fake::Driver driver({fake::h200(), fake::h200()});
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  std::thread none([&] {
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
    const Status s = run(p, nullptr, 0, stream);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
  });
  none.join();
  std::thread other([&] {
    driver.makeCurrent(1);
    const Status s = run(p, nullptr, 0, stream);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(fake::Driver::currentContext(), driver.context(1));
  });
  other.join();
  EXPECT_EQ(driver.launches.load(), 2);
  EXPECT_EQ(driver.lastLaunch().stream, stream);
  EXPECT_EQ(driver.lastLaunch().device, 0);
}

}  // namespace
}  // namespace kiln::qkrope
