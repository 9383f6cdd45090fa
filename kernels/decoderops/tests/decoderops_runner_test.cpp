// The decoderops runner (runner.cpp, compiled here against the group header kiln build's code
// generation writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: each problem's run() launches its entry with the
// selector's plan on the caller's stream, one launch and no other work (so it captures in a CUDA
// graph once the variant is loaded); each problem's overlap_launch makes it a programmatic
// dependent launch where the image is sm_90 or newer; a device the artifact has no image for, an
// invalid problem and zero tokens launch nothing; a thread with no current context runs in the
// stream's.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "decoderops/params.h"
#include "kiln/groups/decoderops.h"
#include "kiln/runners/decoderops.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::decoderops {
namespace {

using fake::fakeAddress;
using fake::paramsOf;

EmbedProblem embedProblem() {
  EmbedProblem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 64;
  p.rows = 151936;
  p.width = 4096;
  p.ids = fakeAddress<const std::int32_t>(0x7f0000010000);
  p.table = fakeAddress(0x7f1000000000);
  p.out = fakeAddress(0x7f2000000000);
  return p;
}

SiluMulProblem siluProblem() {
  SiluMulProblem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 4096;
  p.width = 12288;
  p.in = fakeAddress(0x7f1000000000);
  p.out = fakeAddress(0x7f2000000000);
  return p;
}

ArgmaxProblem argmaxProblem() {
  ArgmaxProblem p;
  p.dtype = DType::kFloat32;
  p.rows = 64;
  p.width = 151936;
  p.x = fakeAddress(0x7f1000000000);
  p.out = fakeAddress<std::int32_t>(0x7f0000010000);
  return p;
}

TEST(DecoderopsRunner, TheGeneratedTableHasOneVariantPerDtype) {
  namespace generated = ::kiln::generated::decoderops;
  ASSERT_EQ(std::size(generated::kVariants), 3u);
  std::vector<std::string> names;
  for (const auto& v : generated::kVariants) {
    names.push_back(v.name);
    const kiln_variant* variant = v.variant();
    ASSERT_NE(variant, nullptr);
    ASSERT_EQ(variant->num_entries, 3);
    EXPECT_STREQ(variant->entries[0], "kiln_embed");
    EXPECT_STREQ(variant->entries[1], "kiln_silu_mul");
    EXPECT_STREQ(variant->entries[2], "kiln_argmax");
  }
  for (const char* name : {"decoderops_fp16", "decoderops_bf16", "decoderops_fp32"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  EXPECT_EQ(std::size(generated::kSupportedSms), 8u);
}

TEST(DecoderopsRunner, EmbedLaunchesThePlanOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(EmbedParams);
  CUstream stream = driver.makeStream(0);
  const EmbedProblem p = embedProblem();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_embed");
  EXPECT_EQ(launch.stream, stream);
  EXPECT_EQ(launch.grid[0], 64u);
  EXPECT_EQ(launch.grid[1], 1u);
  EXPECT_EQ(launch.grid[2], 1u);
  EXPECT_EQ(launch.block[0], 128u);
  EXPECT_EQ(launch.block[1], 1u);
  EXPECT_EQ(launch.shared_bytes, 0u);
  EXPECT_FALSE(launch.programmatic);
  const auto params = paramsOf<EmbedParams>(driver.lastLaunchFirstArg());
  EXPECT_EQ(params.out, p.out);
  EXPECT_EQ(params.table, p.table);
  EXPECT_EQ(params.ids, p.ids);
  EXPECT_EQ(params.rows, 151936);
  EXPECT_EQ(params.row_vectors, 512);
  EXPECT_EQ(params.chunks, 1);
}

TEST(DecoderopsRunner, SiluMulLaunchesThePlanOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(SiluMulParams);
  CUstream stream = driver.makeStream(0);
  SiluMulProblem p = siluProblem();
  p.dtype = DType::kFloat32;
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_silu_mul");
  EXPECT_EQ(launch.stream, stream);
  EXPECT_EQ(launch.grid[0], 4096u);
  EXPECT_EQ(launch.grid[1], 6u);  // 12288 fp32 = 3072 vectors = 6 chunks
  EXPECT_EQ(launch.block[0], 128u);
  const auto params = paramsOf<SiluMulParams>(driver.lastLaunchFirstArg());
  EXPECT_EQ(params.in, p.in);
  EXPECT_EQ(params.out, p.out);
  EXPECT_EQ(params.row_vectors, 3072);
  EXPECT_EQ(params.chunks, 6);
}

TEST(DecoderopsRunner, ArgmaxLaunchesThePlanOnTheCallersStream) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(ArgmaxParams);
  CUstream stream = driver.makeStream(0);
  const ArgmaxProblem p = argmaxProblem();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_argmax");
  EXPECT_EQ(launch.stream, stream);
  EXPECT_EQ(launch.grid[0], 64u);
  EXPECT_EQ(launch.grid[1], 1u);
  EXPECT_EQ(launch.block[0], 1024u);
  const auto params = paramsOf<ArgmaxParams>(driver.lastLaunchFirstArg());
  EXPECT_EQ(params.x, p.x);
  EXPECT_EQ(params.out, p.out);
  EXPECT_EQ(params.width, 151936);
}

// overlap_launch on an sm_90 image: a programmatic launch (cuLaunchKernelEx, programmatic stream
// serialization) of the problem's entry; off (the default): an ordinary one.
template <typename Problem>
void expectProgrammaticOnSm90(Problem p, const char* entry) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.lastLaunch().function, entry);
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  p.overlap_launch = true;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.lastLaunch().function, entry);
  EXPECT_TRUE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.lastLaunch().stream, stream);
  p.overlap_launch = false;
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.launches.load(), 3);
}

// overlap_launch on an A100, which runs the sm_80 image: an ordinary launch (kiln/runtime.h).
template <typename Problem>
void expectOrdinaryBelowSm90(Problem p, const char* entry) {
  fake::Driver driver({fake::a100()});
  CUstream stream = driver.makeStream(0);
  p.overlap_launch = true;
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.lastLaunch().function, entry);
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.launches.load(), 1);
}

TEST(DecoderopsRunner, EmbedOverlapLaunchIsProgrammaticOnAnSm90Image) {
  expectProgrammaticOnSm90(embedProblem(), "kiln_embed");
}

TEST(DecoderopsRunner, SiluMulOverlapLaunchIsProgrammaticOnAnSm90Image) {
  expectProgrammaticOnSm90(siluProblem(), "kiln_silu_mul");
}

TEST(DecoderopsRunner, ArgmaxOverlapLaunchIsProgrammaticOnAnSm90Image) {
  expectProgrammaticOnSm90(argmaxProblem(), "kiln_argmax");
}

TEST(DecoderopsRunner, EmbedOverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  expectOrdinaryBelowSm90(embedProblem(), "kiln_embed");
}

TEST(DecoderopsRunner, SiluMulOverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  expectOrdinaryBelowSm90(siluProblem(), "kiln_silu_mul");
}

TEST(DecoderopsRunner, ArgmaxOverlapLaunchIsAnOrdinaryLaunchBelowSm90) {
  expectOrdinaryBelowSm90(argmaxProblem(), "kiln_argmax");
}

TEST(DecoderopsRunner, EveryDtypeAndEntryIsBuilt) {
  fake::Driver driver({fake::a100()});
  CUstream stream = driver.makeStream(0);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    EmbedProblem e = embedProblem();
    e.dtype = dtype;
    SiluMulProblem m = siluProblem();
    m.dtype = dtype;
    ArgmaxProblem a = argmaxProblem();
    a.dtype = dtype;
    EXPECT_TRUE(run(e, nullptr, 0, stream).ok()) << dtypeName(dtype);
    EXPECT_TRUE(run(m, nullptr, 0, stream).ok()) << dtypeName(dtype);
    EXPECT_TRUE(run(a, nullptr, 0, stream).ok()) << dtypeName(dtype);
  }
  EXPECT_EQ(driver.launches.load(), 9);
  const std::vector<fake::RecordedLaunch> history = driver.launchHistory();
  ASSERT_EQ(history.size(), 9u);
  for (std::size_t i = 0; i < history.size(); ++i) {
    const char* expected[] = {"kiln_embed", "kiln_silu_mul", "kiln_argmax"};
    EXPECT_EQ(history[i].launch.function, expected[i % 3]) << i;
  }
}

TEST(DecoderopsRunner, OnceLoadedARunIsOneLaunchAndCapturesInAGraph) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  const EmbedProblem e = embedProblem();
  const SiluMulProblem m = siluProblem();
  const ArgmaxProblem a = argmaxProblem();
  // A first load while capturing is refused (loading is not capturable: docs/runtime.md).
  driver.setCapturing(stream, true);
  EXPECT_EQ(run(e, nullptr, 0, stream).code(), StatusCode::kCaptureRefused);
  driver.setCapturing(stream, false);
  ASSERT_TRUE(run(e, nullptr, 0, stream).ok());
  ASSERT_TRUE(run(a, nullptr, 0, driver.makeStream(0)).ok());
  // The bf16 module is loaded: a captured run of the same variant is its launch alone.
  driver.setCapturing(stream, true);
  const int loads = driver.loads.load();
  ASSERT_TRUE(run(e, nullptr, 0, stream).ok());
  ASSERT_TRUE(run(m, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.loads.load(), loads);
  EXPECT_EQ(driver.lastLaunch().function, "kiln_silu_mul");
  EXPECT_EQ(driver.lastLaunch().stream, stream);
}

TEST(DecoderopsRunner, DeviceWithoutAnImageLaunchesNothing) {
  // kiln.toml builds sm_80 and newer: a Turing device has no image.
  fake::Driver driver({fake::Device{"Tesla T4", 7, 5, 40, 65536}});
  const ArgmaxProblem p = argmaxProblem();
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage) << s.toString();
  EXPECT_NE(s.message().find("sm_75"), std::string::npos) << s.message();
  EXPECT_EQ(canImplement(p, 75).code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(canImplement(embedProblem(), 75).code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(canImplement(siluProblem(), 75).code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(DecoderopsRunner, InvalidProblemsAreRefusedAsCanImplementSays) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  EmbedProblem e = embedProblem();
  e.width = 4100;
  Status s = run(e, nullptr, 0, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "decoderops: width 4100 is not a multiple of 8");
  EXPECT_EQ(canImplement(e).message(), s.message());
  EXPECT_EQ(workspaceSize(e), 0u);
  SiluMulProblem m = siluProblem();
  m.out = const_cast<void*>(m.in);
  s = run(m, nullptr, 0, stream);
  EXPECT_EQ(s.message(),
            "decoderops: out [0x7f1000000000, 0x7f1006000000) overlaps in [0x7f1000000000, "
            "0x7f100c000000)");
  EXPECT_EQ(canImplement(m, 90).message(), s.message());
  ArgmaxProblem a = argmaxProblem();
  a.out = fakeAddress<std::int32_t>(0x7f0000010002);
  EXPECT_EQ(run(a, nullptr, 0, stream).message(),
            "decoderops: pointer out (0x7f0000010002) is not 4-byte aligned");
  a = argmaxProblem();
  a.dtype = static_cast<DType>(9);
  EXPECT_EQ(run(a, nullptr, 0, stream).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(DecoderopsRunner, ZeroTokensOrRowsTouchNothing) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  EmbedProblem e;
  e.dtype = DType::kFloat16;
  SiluMulProblem m;
  m.overlap_launch = true;
  ArgmaxProblem a;
  EXPECT_TRUE(run(e, nullptr, 0, stream).ok());
  EXPECT_TRUE(run(m, nullptr, 0, stream).ok());
  EXPECT_TRUE(run(a, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.attribute_queries.load(), 0);
  EXPECT_EQ(driver.calls.load(), 0);
}

// run() promises the device that owns the stream, from any thread (issue 33): from a thread with
// no current context, and from one whose current context is another device's, the kernel is
// launched in the stream's context, and the thread's own context is current again afterwards.
TEST(DecoderopsRunner, RunsFromAThreadWithNoContextOrAnotherDevicesContext) {
  fake::Driver driver({fake::h200(), fake::h200()});
  CUstream stream = driver.makeStream(0);
  std::thread none([&] {
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
    EXPECT_TRUE(run(embedProblem(), nullptr, 0, stream).ok());
    EXPECT_TRUE(run(siluProblem(), nullptr, 0, stream).ok());
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
  });
  none.join();
  std::thread other([&] {
    driver.makeCurrent(1);
    const Status s = run(argmaxProblem(), nullptr, 0, stream);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(fake::Driver::currentContext(), driver.context(1));
  });
  other.join();
  EXPECT_EQ(driver.launches.load(), 3);
  EXPECT_EQ(driver.lastLaunch().stream, stream);
  EXPECT_EQ(driver.lastLaunch().device, 0);
}

}  // namespace
}  // namespace kiln::decoderops
