// The loader against the fake driver: lazy load once per (variant, context) under concurrency,
// retry after a failed load, capture refusal, poison after a failed unload, the per-function
// shared memory opt-in, and launches landing on the stream's own device and module. PTX images:
// loaded through cuModuleLoadDataEx with an error-log buffer (or cuModuleLoadData when the table
// has no Ex), a failed JIT reported with the driver's error and the JIT log and retried, and PTX
// that is not NUL-terminated refused before the driver sees it.
#include <gtest/gtest.h>

#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver.h"
#include "kiln/loader.h"
#include "kiln/runtime.h"

namespace {

using kiln::StatusCode;
using kiln::fake::image;
using kiln::fake::ptxImage;
using kiln::fake::TestVariant;

kiln::LaunchConfig config(unsigned shared_bytes = 0) {
  kiln::LaunchConfig c;
  c.grid = {8, 2, 1};
  c.block = {128, 1, 1};
  c.shared_bytes = shared_bytes;
  return c;
}

bool contains(const kiln::Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

class LoaderTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Every push was popped, on success and error paths alike.
    EXPECT_EQ(driver.pushes.load(), driver.pops.load());
    EXPECT_TRUE(kiln::fake::t_context_stack.empty() ||
                kiln::fake::t_context_stack.size() == 1u);  // makeCurrent() leaves one
  }
  kiln::fake::Driver driver{{kiln::fake::h200(), kiln::fake::a100()}};
  TestVariant v{"rmsnorm_h4096_bf16", {"kernel_main", "kernel_aux"}, {image(80), image(90)}};
};

TEST_F(LoaderTest, FirstLaunchLoadsThenReusesModuleAndFunctions) {
  CUstream stream = driver.makeStream(0);
  int arg = 7;
  void* args[] = {&arg};
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), stream, args).ok());
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.get_functions.load(), 2);  // both entries, looked up once at load
  kiln::fake::LaunchRecord last = driver.lastLaunch();
  EXPECT_EQ(last.function, "kernel_main");
  EXPECT_EQ(last.device, 0);
  EXPECT_EQ(last.stream, stream);
  EXPECT_EQ(last.args, args);
  EXPECT_EQ(last.grid[0], 8u);
  EXPECT_EQ(last.grid[1], 2u);
  EXPECT_EQ(last.block[0], 128u);

  ASSERT_TRUE(kiln::launch(v.get(), 1, config(), stream, args).ok());
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), driver.makeStream(0), args).ok());
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.get_functions.load(), 2);
  EXPECT_EQ(driver.launches.load(), 3);
  EXPECT_EQ(driver.lastLaunch().function, "kernel_main");
}

TEST_F(LoaderTest, ConcurrentFirstLaunchesLoadExactlyOnce) {
  driver.load_delay_ms = 20;  // keep the first load in flight while the others arrive
  CUstream stream = driver.makeStream(0);
  constexpr int kThreads = 16;
  std::latch start(kThreads);
  std::vector<kiln::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[static_cast<std::size_t>(i)] =
          kiln::launch(v.get(), i % 2, config(), stream, nullptr);
    });
  for (std::thread& t : threads) t.join();
  for (const kiln::Status& s : results) EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.load_attempts.load(), 1);
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.launches.load(), kThreads);
}

TEST_F(LoaderTest, FailedLoadLeavesNothingAndIsRetried) {
  driver.fail_loads = 1;
  CUstream stream = driver.makeStream(0);
  kiln::Status first = kiln::launch(v.get(), 0, config(), stream, nullptr);
  EXPECT_EQ(first.code(), StatusCode::kDriverError);
  EXPECT_EQ(first.message().rfind("rmsnorm_h4096_bf16 (sm_90 image): ", 0), 0u) << first.message();
  EXPECT_TRUE(contains(first, "moduleLoadData")) << first.message();
  EXPECT_TRUE(contains(first, "CUDA_ERROR_OUT_OF_MEMORY")) << first.message();
  EXPECT_EQ(driver.liveModules(), 0);
  EXPECT_EQ(driver.launches.load(), 0);

  kiln::Status second = kiln::launch(v.get(), 0, config(), stream, nullptr);
  EXPECT_TRUE(second.ok()) << second.toString();
  EXPECT_EQ(driver.load_attempts.load(), 2);
  EXPECT_EQ(driver.liveModules(), 1);
  EXPECT_EQ(driver.launches.load(), 1);
}

TEST_F(LoaderTest, CorruptImageIsReportedAsInvalidImage) {
  TestVariant corrupt("rmsnorm_h1024_fp16", {"kernel_main"},
                      {image(90, false,
                             "\x7f"
                             "ELF garbage")});
  kiln::Status s = kiln::launch(corrupt.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverError);
  EXPECT_TRUE(contains(s, "CUDA_ERROR_INVALID_IMAGE")) << s.message();
  EXPECT_TRUE(contains(s, "device kernel image is invalid")) << s.message();
}

TEST_F(LoaderTest, MissingEntryFailsTheLoadAndUnloadsIt) {
  TestVariant missing("rmsnorm_h2048_bf16", {"kernel_main", "kernel_gone"}, {image(90)});
  kiln::Status s = kiln::launch(missing.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverError);
  EXPECT_TRUE(contains(s, "entry kernel_gone")) << s.message();
  EXPECT_TRUE(contains(s, "CUDA_ERROR_NOT_FOUND")) << s.message();
  EXPECT_EQ(driver.liveModules(), 0);
  EXPECT_EQ(driver.unloads.load(), 1);
}

TEST_F(LoaderTest, FirstLoadDuringCaptureIsRefused) {
  CUstream stream = driver.makeStream(0);
  driver.setCapturing(stream, true);
  kiln::Status launched = kiln::launch(v.get(), 0, config(), stream, nullptr);
  EXPECT_EQ(launched.code(), StatusCode::kCaptureRefused);
  EXPECT_TRUE(contains(launched, "rmsnorm_h4096_bf16")) << launched.message();
  EXPECT_TRUE(contains(launched, "kiln::preload")) << launched.message();
  EXPECT_EQ(kiln::preload(v.get(), stream).code(), StatusCode::kCaptureRefused);
  EXPECT_EQ(driver.load_attempts.load(), 0);
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST_F(LoaderTest, PreloadBeforeCaptureLetsCapturedLaunchesThrough) {
  CUstream stream = driver.makeStream(0);
  ASSERT_TRUE(kiln::preload(v.get(), stream).ok());
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.launches.load(), 0);
  driver.setCapturing(stream, true);
  const int queries = driver.capture_queries.load();
  kiln::Status s = kiln::launch(v.get(), 0, config(), stream, nullptr);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.capture_queries.load(), queries);  // a loaded module needs no capture check
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.launches.load(), 1);
}

TEST_F(LoaderTest, FailedUnloadPoisonsTheVariant) {
  TestVariant other("rmsnorm_h1024_bf16", {"kernel_main"}, {image(90)});
  CUstream stream = driver.makeStream(0);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), stream, nullptr).ok());
  driver.fail_unloads = 1;
  kiln::Status unloaded = kiln::unloadAll();
  EXPECT_EQ(unloaded.code(), StatusCode::kDriverError);
  EXPECT_TRUE(contains(unloaded, "rmsnorm_h4096_bf16: unloading its module failed"))
      << unloaded.message();
  EXPECT_TRUE(contains(unloaded, "CUDA_ERROR_UNKNOWN")) << unloaded.message();
  EXPECT_TRUE(kiln::isPoisoned("rmsnorm_h4096_bf16"));

  kiln::Status launched = kiln::launch(v.get(), 0, config(), stream, nullptr);
  EXPECT_EQ(launched.code(), StatusCode::kPoisoned);
  EXPECT_EQ(launched.message().rfind("rmsnorm_h4096_bf16 is poisoned", 0), 0u)
      << launched.message();
  EXPECT_EQ(kiln::preload(v.get(), stream).code(), StatusCode::kPoisoned);
  EXPECT_EQ(kiln::launch(v.get(), 0, config(), driver.makeStream(1), nullptr).code(),
            StatusCode::kPoisoned);
  EXPECT_EQ(driver.launches.load(), 1);
  // Other variants are unaffected.
  EXPECT_FALSE(kiln::isPoisoned("rmsnorm_h1024_bf16"));
  EXPECT_TRUE(kiln::launch(other.get(), 0, config(), stream, nullptr).ok());
}

TEST_F(LoaderTest, UnloadAllThenLaunchLoadsAgain) {
  CUstream stream = driver.makeStream(0);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), stream, nullptr).ok());
  ASSERT_TRUE(kiln::unloadAll().ok());
  EXPECT_EQ(driver.unloads.load(), 1);
  EXPECT_EQ(driver.liveModules(), 0);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), stream, nullptr).ok());
  EXPECT_EQ(driver.loads.load(), 2);
  EXPECT_EQ(driver.liveModules(), 1);
  EXPECT_TRUE(kiln::unloadAll().ok());
  EXPECT_TRUE(kiln::unloadAll().ok());  // nothing left: a no-op
  EXPECT_EQ(driver.unloads.load(), 2);
}

TEST_F(LoaderTest, TwoDevicesWithDifferentSmsEachGetTheirImage) {
  TestVariant per_sm("rmsnorm_h4096_bf16", {"kernel_main"},
                     {image(80, false, "FAKECUBIN kernel_main for-sm80"),
                      image(90, false, "FAKECUBIN kernel_main for-sm90")});
  CUstream h200 = driver.makeStream(0);
  CUstream a100 = driver.makeStream(1);
  ASSERT_TRUE(kiln::launch(per_sm.get(), 0, config(), h200, nullptr).ok());
  EXPECT_EQ(driver.lastLaunch().device, 0);
  EXPECT_NE(driver.lastLaunch().image.find("for-sm90"), std::string::npos);
  ASSERT_TRUE(kiln::launch(per_sm.get(), 0, config(), a100, nullptr).ok());
  EXPECT_EQ(driver.lastLaunch().device, 1);
  EXPECT_NE(driver.lastLaunch().image.find("for-sm80"), std::string::npos);
  ASSERT_TRUE(kiln::launch(per_sm.get(), 0, config(), h200, nullptr).ok());
  EXPECT_EQ(driver.lastLaunch().device, 0);
  EXPECT_EQ(driver.loads.load(), 2);  // once per context
  EXPECT_EQ(driver.liveModulesOn(0), 1);
  EXPECT_EQ(driver.liveModulesOn(1), 1);

  ASSERT_TRUE(kiln::unloadContext(driver.context(0)).ok());
  EXPECT_EQ(driver.liveModulesOn(0), 0);
  EXPECT_EQ(driver.liveModulesOn(1), 1);
}

TEST_F(LoaderTest, DeviceForStreamIsCachedPerDevice) {
  kiln::DeviceInfo info;
  ASSERT_TRUE(kiln::deviceForStream(driver.makeStream(1), &info).ok());
  EXPECT_EQ(info.ordinal, 1);
  EXPECT_EQ(info.sm, 80);
  EXPECT_EQ(info.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(info.multiprocessors, 108);
  ASSERT_TRUE(kiln::deviceForStream(driver.makeStream(0), &info).ok());
  EXPECT_EQ(info.ordinal, 0);
  EXPECT_EQ(info.sm, 90);
  EXPECT_EQ(info.name, "NVIDIA H200");
  EXPECT_EQ(info.max_shared_bytes_per_block_optin, 232448);
  const int queries = driver.attribute_queries.load();
  ASSERT_TRUE(kiln::deviceForStream(driver.makeStream(1), &info).ok());
  EXPECT_EQ(info.sm, 80);
  EXPECT_EQ(driver.attribute_queries.load(), queries);
}

TEST(LoaderNoImageTest, NoImageForTheDeviceNamesBoth) {
  kiln::fake::Driver orin({kiln::fake::orin()});
  TestVariant hopper_only("rmsnorm_h4096_bf16", {"kernel_main"}, {image(90)});
  kiln::Status s = kiln::launch(hopper_only.get(), 0, config(), orin.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(), "rmsnorm_h4096_bf16: artifact has sm_90 only; device is sm_87");
  EXPECT_EQ(orin.load_attempts.load(), 0);
}

// ---- PTX images ------------------------------------------------------------------------

TEST(LoaderPtxTest, PtxImageLoadsThroughLoadDataExAndLaunches) {
  // sm_100 runs no cubin of sm_90: the compute_80 PTX is JIT-compiled for it.
  kiln::fake::Driver blackwell({kiln::fake::Device{"NVIDIA B200", 10, 0, 148, 232448}});
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main", "kernel_aux"},
                  {ptxImage(80, "FAKEPTX kernel_main kernel_aux for-compute80"),
                   image(90, false, "FAKECUBIN kernel_main kernel_aux for-sm90")});
  CUstream stream = blackwell.makeStream(0);
  kiln::Status s = kiln::launch(ptx.get(), 1, config(), stream, nullptr);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(blackwell.ex_load_attempts.load(), 1);
  EXPECT_EQ(blackwell.ex_loads.load(), 1);
  EXPECT_EQ(blackwell.loads.load(), 1);
  EXPECT_EQ(blackwell.lastLaunch().function, "kernel_aux");
  EXPECT_NE(blackwell.lastLaunch().image.find("for-compute80"), std::string::npos);
  // The JIT was given an error-log buffer and its size.
  EXPECT_EQ(
      blackwell.last_jit_options,
      (std::vector<CUjit_option>{CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES}));
  EXPECT_EQ(blackwell.last_log_buffer_bytes, 8192u);
  // Loaded once, like a cubin.
  ASSERT_TRUE(kiln::launch(ptx.get(), 0, config(), stream, nullptr).ok());
  EXPECT_EQ(blackwell.load_attempts.load(), 1);
  EXPECT_EQ(blackwell.launches.load(), 2);
  EXPECT_EQ(blackwell.pushes.load(), blackwell.pops.load());
}

// PDL follows the image, not the device: compute_80 PTX JIT-compiled on an H200 has no
// griddepcontrol.wait in it, so it must be launched in plain stream order.
TEST(LoaderPtxTest, PtxImageBelowSm90IsNeverAProgrammaticDependent) {
  kiln::fake::Driver hopper({kiln::fake::Device{"NVIDIA H200", 9, 0, 132, 232448}});
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {ptxImage(80, "FAKEPTX kernel_main")});
  kiln::LaunchConfig pdl = config();
  pdl.programmatic_dependency = true;
  ASSERT_TRUE(kiln::launch(ptx.get(), 0, pdl, hopper.makeStream(0), nullptr).ok());
  EXPECT_EQ(hopper.ex_loads.load(), 1);
  EXPECT_FALSE(hopper.lastLaunch().programmatic);
}

TEST_F(LoaderTest, CubinsStillLoadThroughLoadData) {
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), driver.makeStream(0), nullptr).ok());
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.ex_load_attempts.load(), 0);
  EXPECT_TRUE(driver.last_jit_options.empty());
}

TEST_F(LoaderTest, FailedJitReportsTheLogLeavesNothingAndIsRetried) {
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {ptxImage(80, "FAKEPTX kernel_main")});
  driver.fail_jit = 1;
  driver.jit_log = "ptxas application ptx input, line 12; fatal   : Unsupported .version 9.9\n";
  CUstream stream = driver.makeStream(0);
  kiln::Status first = kiln::launch(ptx.get(), 0, config(), stream, nullptr);
  EXPECT_EQ(first.code(), StatusCode::kDriverError);
  EXPECT_EQ(first.message().rfind("rmsnorm_h4096_bf16 (compute_80 PTX image): PTX JIT failed: ", 0),
            0u)
      << first.message();
  EXPECT_TRUE(contains(first, "moduleLoadDataEx")) << first.message();
  EXPECT_TRUE(contains(first, "CUDA_ERROR_INVALID_PTX (218), \"a PTX JIT compilation failed\""))
      << first.message();
  // The log ends the message, its trailing newline trimmed.
  const std::string log =
      "; JIT log: ptxas application ptx input, line 12; fatal   : Unsupported .version 9.9";
  ASSERT_GE(first.message().size(), log.size());
  EXPECT_EQ(first.message().substr(first.message().size() - log.size()), log) << first.message();
  EXPECT_EQ(driver.liveModules(), 0);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_FALSE(kiln::isPoisoned("rmsnorm_h4096_bf16"));

  kiln::Status second = kiln::launch(ptx.get(), 0, config(), stream, nullptr);
  EXPECT_TRUE(second.ok()) << second.toString();
  EXPECT_EQ(driver.ex_load_attempts.load(), 2);
  EXPECT_EQ(driver.ex_loads.load(), 1);
  EXPECT_EQ(driver.liveModules(), 1);
  EXPECT_EQ(driver.launches.load(), 1);
}

TEST_F(LoaderTest, FailedJitWithoutALogOmitsIt) {
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {ptxImage(80, "FAKEPTX kernel_main")});
  driver.fail_jit = 1;
  driver.jit_log = "";
  kiln::Status s = kiln::launch(ptx.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverError);
  EXPECT_TRUE(contains(s, "PTX JIT failed: ")) << s.message();
  EXPECT_TRUE(contains(s, "CUDA_ERROR_INVALID_PTX")) << s.message();
  EXPECT_FALSE(contains(s, "JIT log")) << s.message();
}

TEST_F(LoaderTest, LongJitLogIsCutAtTheBuffer) {
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {ptxImage(80, "FAKEPTX kernel_main")});
  driver.fail_jit = 1;
  driver.jit_log = std::string(10000, 'x');
  kiln::Status s = kiln::launch(ptx.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverError);
  const std::size_t at = s.message().find("; JIT log: ");
  ASSERT_NE(at, std::string::npos) << s.message();
  // 8 KiB with the NUL: 8191 characters of log.
  EXPECT_EQ(s.message().substr(at + 11), std::string(8191, 'x'));
}

TEST_F(LoaderTest, PtxThatIsNotNulTerminatedIsRefusedBeforeTheDriver) {
  static const char kText[] = "FAKEPTX kernel_main!";
  kiln_image bad = ptxImage(80, kText);
  bad.size = std::strlen(kText) - 1;  // data[size] is '!', not the NUL
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {bad});
  kiln::Status s = kiln::launch(ptx.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "rmsnorm_h4096_bf16 (compute_80 PTX image): PTX data is not NUL-terminated (data[size] "
            "must be 0; "
            "kiln/variant.h)");
  EXPECT_EQ(driver.load_attempts.load(), 0);
  EXPECT_EQ(driver.ex_load_attempts.load(), 0);
  EXPECT_EQ(driver.liveModules(), 0);
}

TEST_F(LoaderTest, WithoutLoadDataExPtxLoadsThroughLoadData) {
  driver.dropEntry(&kiln::DriverApi::moduleLoadDataEx);
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {ptxImage(80, "FAKEPTX kernel_main")});
  CUstream stream = driver.makeStream(0);
  ASSERT_TRUE(kiln::launch(ptx.get(), 0, config(), stream, nullptr).ok());
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.ex_load_attempts.load(), 0);
  ASSERT_TRUE(kiln::unloadAll().ok());
  // A failed JIT there has no log to show, but is still named as one.
  driver.fail_jit = 1;
  kiln::Status s = kiln::launch(ptx.get(), 0, config(), stream, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverError);
  EXPECT_EQ(
      s.message().rfind(
          "rmsnorm_h4096_bf16 (compute_80 PTX image): PTX JIT failed: api.moduleLoadData(", 0),
      0u)
      << s.message();
  EXPECT_TRUE(contains(s, "CUDA_ERROR_INVALID_PTX")) << s.message();
  EXPECT_FALSE(contains(s, "JIT log")) << s.message();
  EXPECT_EQ(driver.ex_load_attempts.load(), 0);
  EXPECT_EQ(driver.load_attempts.load(), 2);
}

TEST_F(LoaderTest, NullStreamUsesTheCurrentContext) {
  kiln::Status none = kiln::launch(v.get(), 0, config(), nullptr, nullptr);
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(none, "no current CUDA context")) << none.message();
  driver.makeCurrent(1);
  kiln::Status s = kiln::launch(v.get(), 0, config(), nullptr, nullptr);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.lastLaunch().device, 1);
  ASSERT_EQ(kiln::fake::t_context_stack.size(), 1u);
  EXPECT_EQ(kiln::fake::t_context_stack.back(), driver.context(1));
}

TEST_F(LoaderTest, LargeDynamicSharedMemoryIsOptedIntoOncePerFunctionAndSize) {
  CUstream stream = driver.makeStream(0);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(48 * 1024), stream, nullptr).ok());
  EXPECT_EQ(driver.set_attributes.load(), 0);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(100000), stream, nullptr).ok());
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(100000), stream, nullptr).ok());
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(60000), stream, nullptr).ok());
  EXPECT_EQ(driver.set_attributes.load(), 1);
  EXPECT_EQ(driver.functionSharedOptIn("kernel_main"), 100000);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(150000), stream, nullptr).ok());
  EXPECT_EQ(driver.set_attributes.load(), 2);
  ASSERT_TRUE(kiln::launch(v.get(), 1, config(100000), stream, nullptr).ok());
  EXPECT_EQ(driver.set_attributes.load(), 3);
  EXPECT_EQ(driver.functionSharedOptIn("kernel_aux"), 100000);
  // A new context has new functions: they opt in again.
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(100000), driver.makeStream(1), nullptr).ok());
  EXPECT_EQ(driver.set_attributes.load(), 4);
}

// Programmatic dependent launch: cuLaunchKernelEx with the attribute on sm_90 (the H200),
// an ordinary cuLaunchKernel on sm_80 (the A100); without cuLaunchKernelEx in the table, below.
TEST_F(LoaderTest, ProgrammaticDependencyUsesLaunchKernelExFromSm90Only) {
  kiln::LaunchConfig pdl = config();
  pdl.programmatic_dependency = true;
  ASSERT_TRUE(kiln::launch(v.get(), 0, pdl, driver.makeStream(0), nullptr).ok());
  kiln::fake::LaunchRecord h200 = driver.lastLaunch();
  EXPECT_TRUE(h200.programmatic);
  EXPECT_EQ(h200.grid[0], 8u);
  EXPECT_EQ(h200.block[0], 128u);
  ASSERT_TRUE(kiln::launch(v.get(), 0, config(), driver.makeStream(0), nullptr).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  ASSERT_TRUE(kiln::launch(v.get(), 0, pdl, driver.makeStream(1), nullptr).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);  // sm_80: no PDL
  EXPECT_EQ(driver.lastLaunch().device, 1);
  EXPECT_EQ(driver.launches.load(), 3);
}

TEST_F(LoaderTest, ProgrammaticDependencyWithoutLaunchKernelExIsAnOrdinaryLaunch) {
  driver.dropEntry(&kiln::DriverApi::launchKernelEx);
  kiln::LaunchConfig pdl = config();
  pdl.programmatic_dependency = true;
  ASSERT_TRUE(kiln::launch(v.get(), 0, pdl, driver.makeStream(0), nullptr).ok());
  EXPECT_FALSE(driver.lastLaunch().programmatic);
  EXPECT_EQ(driver.launches.load(), 1);
}

TEST_F(LoaderTest, LaunchArgumentsAreCheckedWithTheLimitNamed) {
  CUstream stream = driver.makeStream(0);
  kiln::Status too_much = kiln::launch(v.get(), 0, config(300000), stream, nullptr);
  EXPECT_EQ(too_much.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(too_much, "300000 bytes")) << too_much.message();
  EXPECT_TRUE(contains(too_much, "allows at most 232448")) << too_much.message();
  kiln::Status entry = kiln::launch(v.get(), 5, config(), stream, nullptr);
  EXPECT_EQ(entry.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(entry.message(),
            "rmsnorm_h4096_bf16: entry 5 is out of range; the variant has 2 entries");
  kiln::LaunchConfig zero = config();
  zero.grid.y = 0;
  kiln::Status empty = kiln::launch(v.get(), 0, zero, stream, nullptr);
  EXPECT_EQ(empty.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(empty, "grid (8, 0, 1)")) << empty.message();
  EXPECT_EQ(driver.launches.load(), 0);
}

}  // namespace
