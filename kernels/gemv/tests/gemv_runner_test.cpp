// The gemv runner (runner.cpp, compiled here against the group header kiln build's code generation
// writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: run() launches the one entry for every m with the
// selector's plan on the caller's stream, one launch and no other work (so it captures in a CUDA
// graph once the variant is loaded); overlap_launch makes it a programmatic dependent launch where
// the image is sm_90 or newer; a device the artifact has no image for, an invalid problem and
// m == 0 launch nothing; a thread with no current context runs in the stream's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "gemv/params.h"
#include "kiln/groups/gemv.h"
#include "kiln/runners/gemv.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::gemv {
namespace {

using fake::fakeAddress;
using fake::paramsOf;

// Qwen3-8B's gate+up projection at 8 tokens: n 24576, k 4096, bf16, no bias.
GemvProblem validProblem() {
  GemvProblem p;
  p.dtype = DType::kBFloat16;
  p.out_dtype = DType::kBFloat16;
  p.m = 8;
  p.n = 24576;
  p.k = 4096;
  p.x = fakeAddress<const void>(0x7f0000010000);
  p.w = fakeAddress<const void>(0x7f1000000000);
  p.y = fakeAddress(0x7f2000000000);
  return p;
}

TEST(GemvRunner, TheGeneratedTableHasOneVariantPerDtypeWithTheEntry) {
  namespace generated = ::kiln::generated::gemv;
  ASSERT_EQ(std::size(generated::kVariants), 2u);
  std::vector<std::string> names;
  for (const auto& v : generated::kVariants) {
    names.push_back(v.name);
    const kiln_variant* variant = v.variant();
    ASSERT_NE(variant, nullptr);
    ASSERT_EQ(variant->num_entries, 1);
    EXPECT_STREQ(variant->entries[0], "kiln_gemv");
  }
  for (const char* name : {"gemv_fp16", "gemv_bf16"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_EQ(std::size(generated::kSupportedSms), 8u);
}

TEST(GemvRunner, LaunchesThePlanOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(GemvParams);
  CUstream stream = driver.makeStream(0);
  GemvProblem p = validProblem();
  p.ldx = 4104;
  p.ldy = 24600;
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_gemv");
  EXPECT_EQ(launch.stream, stream);
  EXPECT_EQ(launch.grid[0], 1536u);  // 24576 rows of w, 16 a block
  EXPECT_EQ(launch.grid[1], 1u);
  EXPECT_EQ(launch.grid[2], 1u);
  EXPECT_EQ(launch.block[0], 256u);
  EXPECT_EQ(launch.block[1], 1u);
  EXPECT_EQ(launch.block[2], 1u);
  EXPECT_EQ(launch.shared_bytes, 0u);
  EXPECT_FALSE(launch.programmatic);
  const GemvParams params = paramsOf<GemvParams>(driver.lastLaunchFirstArg());
  EXPECT_EQ(params.y, p.y);
  EXPECT_EQ(params.x, p.x);
  EXPECT_EQ(params.w, p.w);
  EXPECT_EQ(params.bias, nullptr);
  EXPECT_EQ(params.ldx, 4104);
  EXPECT_EQ(params.ldy, 24600);
  EXPECT_EQ(params.m, 8);
  EXPECT_EQ(params.n, 24576);
  EXPECT_EQ(params.k_vectors, 512);
  EXPECT_EQ(params.y_fp32, 0);
}

TEST(GemvRunner, EveryMLaunchesTheOneEntryWithItsM) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(GemvParams);
  CUstream stream = driver.makeStream(0);
  for (std::int64_t m = 1; m <= 8; ++m) {
    GemvProblem p = validProblem();
    p.m = m;
    const Status s = run(p, nullptr, 0, stream);
    ASSERT_TRUE(s.ok()) << m << ": " << s.toString();
    EXPECT_EQ(driver.lastLaunch().function, "kiln_gemv") << m;
    EXPECT_EQ(driver.lastLaunch().grid[0], 1536u) << m;  // the grid does not depend on m
    EXPECT_EQ(paramsOf<GemvParams>(driver.lastLaunchFirstArg()).m, m);
  }
  EXPECT_EQ(driver.launches.load(), 8);
}

TEST(GemvRunner, OverlapLaunchIsProgrammaticOnAnSm90Image) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(GemvParams);
  CUstream stream = driver.makeStream(0);
  GemvProblem p = validProblem();
  p.m = 1;
  p.n = 151936;  // the LM head into float32 logits
  p.out_dtype = DType::kFloat32;
  p.overlap_launch = true;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_gemv");
  EXPECT_TRUE(launch.programmatic);  // cuLaunchKernelEx, programmatic stream serialization
  EXPECT_EQ(launch.grid[0], 9496u);
  EXPECT_EQ(launch.block[0], 256u);
  const GemvParams params = paramsOf<GemvParams>(driver.lastLaunchFirstArg());
  EXPECT_EQ(params.y_fp32, 1);
  EXPECT_EQ(params.n, 151936);
  p.overlap_launch = false;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST(GemvRunner, OverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  // An A100 runs the sm_80 image: no programmatic launch there (kiln/runtime.h).
  fake::Driver driver({fake::a100()});
  CUstream stream = driver.makeStream(0);
  GemvProblem p = validProblem();
  p.overlap_launch = true;
  p.dtype = DType::kFloat16;
  p.out_dtype = DType::kFloat16;
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.lastLaunch().function, "kiln_gemv");
  EXPECT_FALSE(driver.lastLaunch().programmatic);
}

TEST(GemvRunner, EveryDtypeAndOutputIsBuilt) {
  fake::Driver driver({fake::a100()});
  CUstream stream = driver.makeStream(0);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (DType out : {dtype, DType::kFloat32}) {
      GemvProblem p = validProblem();
      p.dtype = dtype;
      p.out_dtype = out;
      p.bias = fakeAddress<const void>(0x7f0000020000);
      const Status s = run(p, nullptr, 0, stream);
      EXPECT_TRUE(s.ok()) << dtypeName(dtype) << " -> " << dtypeName(out) << ": " << s.toString();
    }
  }
  EXPECT_EQ(driver.launches.load(), 4);
  // fp32 x and w: not built (the message names the built dtypes).
  GemvProblem p = validProblem();
  p.dtype = DType::kFloat32;
  p.out_dtype = DType::kFloat32;
  const Status s = run(p, nullptr, 0, stream);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("dtype fp32 is not built; built dtypes:"), std::string::npos)
      << s.message();
  EXPECT_EQ(driver.launches.load(), 4);
}

TEST(GemvRunner, OnceLoadedARunIsOneLaunchAndCapturesInAGraph) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  GemvProblem p = validProblem();
  // A first load while capturing is refused (loading is not capturable: docs/runtime.md).
  driver.setCapturing(stream, true);
  EXPECT_EQ(run(p, nullptr, 0, stream).code(), StatusCode::kCaptureRefused);
  driver.setCapturing(stream, false);
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  // The bf16 module is loaded: a captured run of any of its entries is its launch alone.
  driver.setCapturing(stream, true);
  const int loads = driver.loads.load();
  p.m = 1;
  p.overlap_launch = true;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  p.m = 3;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.loads.load(), loads);
  EXPECT_EQ(driver.lastLaunch().function, "kiln_gemv");
  EXPECT_EQ(driver.lastLaunch().stream, stream);
  EXPECT_TRUE(driver.lastLaunch().programmatic);
}

TEST(GemvRunner, DeviceWithoutAnImageLaunchesNothing) {
  // kiln.toml builds sm_80 and newer: a Turing device has no image.
  fake::Driver driver({fake::Device{"Tesla T4", 7, 5, 40, 65536}});
  const GemvProblem p = validProblem();
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage) << s.toString();
  EXPECT_NE(s.message().find("sm_75"), std::string::npos) << s.message();
  EXPECT_EQ(canImplement(p, 75).code(), StatusCode::kNoKernelImage);
  GemvProblem none;  // a no-op answers for its variant too
  EXPECT_EQ(canImplement(none, 75).code(), StatusCode::kNoKernelImage);
  EXPECT_TRUE(canImplement(none, 90).ok());
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(GemvRunner, InvalidProblemsAreRefusedAsCanImplementSays) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  GemvProblem p = validProblem();
  p.k = 4100;
  Status s = run(p, nullptr, 0, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gemv: k 4100 is not a multiple of 8");
  EXPECT_EQ(canImplement(p).message(), s.message());
  EXPECT_EQ(workspaceSize(p), 0u);
  p = validProblem();
  p.m = 9;
  s = run(p, nullptr, 0, stream);
  EXPECT_EQ(s.message(), "gemv: m 9 exceeds the limit 8 (the token columns of one mma tile)");
  EXPECT_EQ(canImplement(p, 90).message(), s.message());
  p = validProblem();
  p.y = const_cast<void*>(p.x);  // in place
  s = run(p, nullptr, 0, stream);
  EXPECT_EQ(s.message(),
            "gemv: y [0x7f0000010000, 0x7f0000070000) overlaps x [0x7f0000010000, "
            "0x7f0000020000)");
  EXPECT_EQ(canImplement(p, 90).message(), s.message());
  EXPECT_EQ(workspaceSize(p), 0u);  // the shapes alone are fine
  p = validProblem();
  p.x = fakeAddress<const void>(0x7f0000010008);
  EXPECT_EQ(run(p, nullptr, 0, stream).message(),
            "gemv: pointer x (0x7f0000010008) is not 16-byte aligned");
  p = validProblem();
  p.out_dtype = DType::kFloat16;
  EXPECT_EQ(run(p, nullptr, 0, stream).message(),
            "gemv: out_dtype fp16 is neither the dtype (bf16) nor fp32");
  p = validProblem();
  p.dtype = static_cast<DType>(9);
  EXPECT_EQ(run(p, nullptr, 0, stream).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.calls.load(), 0);  // refused on the host, before any driver call
}

TEST(GemvRunner, ZeroRowsTouchNothing) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  GemvProblem p;
  p.dtype = DType::kFloat16;
  p.out_dtype = DType::kFloat32;
  p.overlap_launch = true;
  EXPECT_TRUE(run(p, nullptr, 0, stream).ok());
  p.n = -1;  // nothing else is checked
  EXPECT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.attribute_queries.load(), 0);
  EXPECT_EQ(driver.calls.load(), 0);
}

// run() promises the device that owns the stream, from any thread (issue 33): from a thread with
// no current context, and from one whose current context is another device's, the kernel is
// launched in the stream's context, and the thread's own context is current again afterwards.
TEST(GemvRunner, RunsFromAThreadWithNoContextOrAnotherDevicesContext) {
  fake::Driver driver({fake::h200(), fake::h200()});
  CUstream stream = driver.makeStream(0);
  std::thread none([&] {
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
    EXPECT_TRUE(run(validProblem(), nullptr, 0, stream).ok());
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
  });
  none.join();
  std::thread other([&] {
    driver.makeCurrent(1);
    GemvProblem p = validProblem();
    p.overlap_launch = true;
    const Status s = run(p, nullptr, 0, stream);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(fake::Driver::currentContext(), driver.context(1));
  });
  other.join();
  EXPECT_EQ(driver.launches.load(), 2);
  EXPECT_EQ(driver.lastLaunch().stream, stream);
  EXPECT_EQ(driver.lastLaunch().device, 0);
  EXPECT_TRUE(driver.lastLaunch().programmatic);
}

}  // namespace
}  // namespace kiln::gemv
