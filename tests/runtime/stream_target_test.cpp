// resolveStream and the calls that take its StreamTarget, against the fake driver: one resolve
// per run() (the device cached per context, two cheap driver calls after the first), a launch of a
// loaded variant that makes no driver call but cuLaunchKernel, and the context rule of issue 33:
// a launch, a load and a tensor-map encode from a thread with no current context, or with another
// device's context current, run in the stream's context and leave the thread's own current.
// Also the module table under concurrency (many variants, two contexts, one load each), poison as
// a flag that reaches entries already loaded in other contexts, and a target outliving
// unloadContext.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_driver.h"
#include "kiln/loader.h"
#include "kiln/runtime.h"

namespace {

using kiln::Status;
using kiln::StatusCode;
using kiln::StreamTarget;
using kiln::fake::image;
using kiln::fake::TestVariant;

kiln::LaunchConfig config(unsigned shared_bytes = 0) {
  kiln::LaunchConfig c;
  c.grid = {8, 2, 1};
  c.block = {128, 1, 1};
  c.shared_bytes = shared_bytes;
  return c;
}

bool contains(const Status& s, const std::string& text) {
  return s.message().find(text) != std::string::npos;
}

struct alignas(64) MapStorage {
  unsigned char bytes[kiln::kTensorMapBytes];
};

kiln::TensorMapSpec spec() {
  kiln::TensorMapSpec s;
  s.element = kiln::TensorMapElement::kBFloat16;
  s.rank = 2;
  s.address = reinterpret_cast<const void*>(std::uintptr_t{0x7f0000100000});
  s.dims[0] = 128;
  s.dims[1] = 4096;
  s.strides[0] = 256;
  s.box[0] = 64;
  s.box[1] = 64;
  return s;
}

// Runs `body` on a new thread, which starts with no current context (the fake's stack is per
// thread, as the driver's is).
template <typename Body>
void onFreshThread(Body body) {
  std::thread t(body);
  t.join();
}

class StreamTargetTest : public ::testing::Test {
 protected:
  void TearDown() override { EXPECT_EQ(driver.pushes.load(), driver.pops.load()); }

  kiln::fake::Driver driver{{kiln::fake::h200(), kiln::fake::a100()}};
  TestVariant v{"rmsnorm_h4096_bf16", {"kernel_main", "kernel_aux"}, {image(80), image(90)}};
};

TEST_F(StreamTargetTest, ResolveFillsTheTargetAndCachesTheDevicePerContext) {
  CUstream stream = driver.makeStream(1);
  StreamTarget t;
  ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
  EXPECT_EQ(t.stream, stream);
  EXPECT_EQ(t.context, driver.context(1));
  EXPECT_EQ(t.caller_context, nullptr);  // this thread has none current
  ASSERT_NE(t.device, nullptr);
  EXPECT_EQ(t.device->ordinal, 1);
  EXPECT_EQ(t.device->sm, 80);
  EXPECT_EQ(t.device->multiprocessors, 108);
  EXPECT_EQ(t.device->max_shared_bytes_per_block_optin, 166912);

  // Known now: another stream of the context costs cuCtxGetCurrent and cuStreamGetCtx, nothing
  // else (no device query, no push).
  const int calls = driver.calls.load();
  StreamTarget again;
  ASSERT_TRUE(kiln::resolveStream(driver.makeStream(1), &again).ok());
  EXPECT_EQ(driver.calls.load(), calls + 2);
  EXPECT_EQ(again.device, t.device);
  EXPECT_EQ(again.state, t.state);

  // The other device: its own record and description.
  StreamTarget h200;
  ASSERT_TRUE(kiln::resolveStream(driver.makeStream(0), &h200).ok());
  EXPECT_EQ(h200.device->sm, 90);
  EXPECT_NE(h200.state, t.state);
}

TEST_F(StreamTargetTest, LaunchOfALoadedVariantMakesNoDriverCallButTheLaunch) {
  driver.makeCurrent(0);
  CUstream stream = driver.makeStream(0);
  StreamTarget t;
  ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
  EXPECT_EQ(t.caller_context, t.context);
  ASSERT_TRUE(kiln::launch(t, v.get(), 0, config(100000), nullptr).ok());  // loads, opts in
  const int calls = driver.calls.load();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(kiln::launch(t, v.get(), i % 2, config(i % 2 == 0 ? 100000 : 0), nullptr).ok());
  }
  EXPECT_EQ(driver.calls.load(), calls + 10);  // cuLaunchKernel, ten times, and nothing else
  EXPECT_EQ(driver.launches.load(), 11);
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.pushes.load(), driver.pops.load());

  // Programmatic: cuLaunchKernelEx alone.
  kiln::LaunchConfig pdl = config();
  pdl.programmatic_dependency = true;
  ASSERT_TRUE(kiln::launch(t, v.get(), 0, pdl, nullptr).ok());
  EXPECT_EQ(driver.calls.load(), calls + 11);
  EXPECT_TRUE(driver.lastLaunch().programmatic);
}

TEST_F(StreamTargetTest, FromAThreadWithNoCurrentContextEverythingRunsInTheStreamsContext) {
  CUstream stream = driver.makeStream(0);
  MapStorage map;
  // What fmha's runner did before (issue 33): the context-free encode, on such a thread, fails.
  onFreshThread([&] {
    const Status bare = kiln::encodeTensorMap(spec(), map.bytes);
    EXPECT_EQ(bare.code(), StatusCode::kDriverError);
    EXPECT_TRUE(contains(bare, "CUDA_ERROR_INVALID_CONTEXT")) << bare.message();
  });
  onFreshThread([&] {
    StreamTarget t;
    ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
    EXPECT_EQ(t.caller_context, nullptr);
    const Status encoded = kiln::encodeTensorMap(t, spec(), map.bytes);
    ASSERT_TRUE(encoded.ok()) << encoded.toString();
    EXPECT_EQ(driver.lastTensorMap().current_context, driver.context(0));
    EXPECT_EQ(kiln::fake::Driver::currentContext(), nullptr);

    const Status first = kiln::launch(t, v.get(), 0, config(100000), nullptr);  // load + opt-in
    ASSERT_TRUE(first.ok()) << first.toString();
    const Status second = kiln::launch(t, v.get(), 1, config(), nullptr);
    ASSERT_TRUE(second.ok()) << second.toString();
    EXPECT_EQ(driver.lastLaunch().device, 0);
    EXPECT_EQ(driver.lastLaunch().stream, stream);
    EXPECT_EQ(kiln::fake::Driver::currentContext(), nullptr);  // nothing left current
    EXPECT_TRUE(kiln::fake::t_context_stack.empty());
  });
  EXPECT_EQ(driver.loads.load(), 1);
  EXPECT_EQ(driver.launches.load(), 2);
  EXPECT_EQ(driver.functionSharedOptIn("kernel_main"), 100000);
}

TEST_F(StreamTargetTest, FromAThreadOnAnotherDevicesContextThatContextIsCurrentAgainAfter) {
  CUstream stream = driver.makeStream(0);
  MapStorage map;
  onFreshThread([&] {
    driver.makeCurrent(1);  // the A100's context is this thread's
    StreamTarget t;
    ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
    EXPECT_EQ(t.context, driver.context(0));
    EXPECT_EQ(t.caller_context, driver.context(1));
    EXPECT_EQ(t.device->sm, 90);  // the stream's device, not the current one
    ASSERT_TRUE(kiln::encodeTensorMap(t, spec(), map.bytes).ok());
    EXPECT_EQ(driver.lastTensorMap().current_context, driver.context(0));
    const Status launched = kiln::launch(t, v.get(), 0, config(), nullptr);
    ASSERT_TRUE(launched.ok()) << launched.toString();
    ASSERT_TRUE(kiln::launch(t, v.get(), 0, config(), nullptr).ok());
    EXPECT_EQ(driver.lastLaunch().device, 0);
    EXPECT_NE(driver.lastLaunch().image.find("FAKECUBIN"), std::string::npos);
    ASSERT_EQ(kiln::fake::t_context_stack.size(), 1u);
    EXPECT_EQ(kiln::fake::Driver::currentContext(), driver.context(1));

    // The one-call launch and preload behave the same.
    TestVariant other("rmsnorm_h1024_bf16", {"kernel_main"}, {image(90)});
    ASSERT_TRUE(kiln::preload(other.get(), stream).ok());
    ASSERT_TRUE(kiln::launch(other.get(), 0, config(), stream, nullptr).ok());
    EXPECT_EQ(driver.lastLaunch().device, 0);
    EXPECT_EQ(kiln::fake::Driver::currentContext(), driver.context(1));
  });
  EXPECT_EQ(driver.liveModulesOn(0), 2);
  EXPECT_EQ(driver.liveModulesOn(1), 0);
}

TEST_F(StreamTargetTest, ALaunchWithoutTheStreamsContextCurrentIsWhatTheFakeRefuses) {
  // The fake enforces the rule the runtime follows: a launch whose stream is not of the current
  // context fails. Checked here through the table itself, so the tests above mean something.
  driver.makeCurrent(0);
  CUstream stream = driver.makeStream(0);
  StreamTarget t;
  ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
  ASSERT_TRUE(kiln::launch(t, v.get(), 0, config(), nullptr).ok());
  // A target kept past a change of the current context (misuse: resolve again) fails loudly.
  driver.makeCurrent(1);
  const Status stale = kiln::launch(t, v.get(), 0, config(), nullptr);
  EXPECT_EQ(stale.code(), StatusCode::kDriverError);
  EXPECT_TRUE(contains(stale, "CUDA_ERROR_INVALID_HANDLE")) << stale.message();
  EXPECT_EQ(driver.launches.load(), 1);
  StreamTarget fresh;
  ASSERT_TRUE(kiln::resolveStream(stream, &fresh).ok());
  ASSERT_TRUE(kiln::launch(fresh, v.get(), 0, config(), nullptr).ok());
  EXPECT_EQ(driver.launches.load(), 2);
}

TEST_F(StreamTargetTest, NullStreamNeedsACurrentContextAndUsesIt) {
  StreamTarget t;
  const Status none = kiln::resolveStream(nullptr, &t);
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(none, "no current CUDA context")) << none.message();
  driver.makeCurrent(1);
  ASSERT_TRUE(kiln::resolveStream(nullptr, &t).ok());
  EXPECT_EQ(t.context, driver.context(1));
  EXPECT_EQ(t.caller_context, driver.context(1));
  ASSERT_TRUE(kiln::launch(t, v.get(), 0, config(), nullptr).ok());
  EXPECT_EQ(driver.lastLaunch().device, 1);
}

TEST_F(StreamTargetTest, ATargetNotFilledByResolveIsRefused) {
  StreamTarget empty;
  const Status launched = kiln::launch(empty, v.get(), 0, config(), nullptr);
  EXPECT_EQ(launched.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(launched.message(),
            "rmsnorm_h4096_bf16: the StreamTarget was not filled by kiln::resolveStream (no "
            "context or device); resolve the stream first");
  EXPECT_EQ(kiln::preload(empty, v.get()).code(), StatusCode::kInvalidArgument);
  MapStorage map;
  const Status encoded = kiln::encodeTensorMap(empty, spec(), map.bytes);
  EXPECT_EQ(encoded.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(encoded, "tensor map: the StreamTarget was not filled"))
      << encoded.message();
  EXPECT_EQ(kiln::resolveStream(driver.makeStream(0), nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(driver.launches.load() + driver.tensor_map_encodes.load(), 0);
}

TEST_F(StreamTargetTest, PreloadThroughATargetThenCapturedLaunchesNeedNoCaptureQuery) {
  CUstream stream = driver.makeStream(0);
  StreamTarget t;
  ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
  driver.setCapturing(stream, true);
  EXPECT_EQ(kiln::preload(t, v.get()).code(), StatusCode::kCaptureRefused);
  driver.setCapturing(stream, false);
  ASSERT_TRUE(kiln::preload(t, v.get()).ok());
  driver.setCapturing(stream, true);
  const int queries = driver.capture_queries.load();
  ASSERT_TRUE(kiln::launch(t, v.get(), 1, config(), nullptr).ok());
  EXPECT_EQ(driver.capture_queries.load(), queries);
  EXPECT_EQ(driver.loads.load(), 1);
}

TEST_F(StreamTargetTest, PoisonReachesEntriesAlreadyLoadedInOtherContexts) {
  StreamTarget h200;
  StreamTarget a100;
  ASSERT_TRUE(kiln::resolveStream(driver.makeStream(0), &h200).ok());
  ASSERT_TRUE(kiln::resolveStream(driver.makeStream(1), &a100).ok());
  ASSERT_TRUE(kiln::launch(h200, v.get(), 0, config(), nullptr).ok());
  ASSERT_TRUE(kiln::launch(a100, v.get(), 0, config(), nullptr).ok());
  driver.fail_unloads = 1;
  const Status unloaded = kiln::unloadContext(driver.context(0));
  EXPECT_EQ(unloaded.code(), StatusCode::kDriverError);
  EXPECT_TRUE(kiln::isPoisoned("rmsnorm_h4096_bf16"));
  // Still loaded on the A100, and yet refused there: the variant's state is unknown.
  EXPECT_EQ(driver.liveModulesOn(1), 1);
  const Status launched = kiln::launch(a100, v.get(), 0, config(), nullptr);
  EXPECT_EQ(launched.code(), StatusCode::kPoisoned);
  EXPECT_EQ(
      launched.message().rfind("rmsnorm_h4096_bf16 is poisoned: unloading its module failed", 0),
      0u)
      << launched.message();
  // By name: another variant object of the same name is poisoned too; another name is not.
  TestVariant same_name("rmsnorm_h4096_bf16", {"kernel_main"}, {image(90)});
  TestVariant other("rmsnorm_h1024_bf16", {"kernel_main"}, {image(90)});
  EXPECT_EQ(kiln::launch(a100, same_name.get(), 0, config(), nullptr).code(),
            StatusCode::kPoisoned);
  EXPECT_FALSE(kiln::isPoisoned("rmsnorm_h1024_bf16"));
  EXPECT_FALSE(kiln::isPoisoned(nullptr));
  StreamTarget h200_again;
  ASSERT_TRUE(kiln::resolveStream(driver.makeStream(0), &h200_again).ok());
  EXPECT_TRUE(kiln::launch(h200_again, other.get(), 0, config(), nullptr).ok());
  EXPECT_EQ(driver.launches.load(), 3);
}

TEST_F(StreamTargetTest, UnloadContextForgetsTheContextAndAnOldTargetLoadsAgain) {
  CUstream stream = driver.makeStream(0);
  StreamTarget t;
  ASSERT_TRUE(kiln::resolveStream(stream, &t).ok());
  ASSERT_TRUE(kiln::launch(t, v.get(), 0, config(), nullptr).ok());
  const int device_queries = driver.device_queries.load();
  ASSERT_TRUE(kiln::unloadContext(driver.context(0)).ok());
  EXPECT_EQ(driver.liveModulesOn(0), 0);
  // The record was forgotten: the old target's launch finds the context anew and loads again.
  ASSERT_TRUE(kiln::launch(t, v.get(), 0, config(), nullptr).ok());
  EXPECT_EQ(driver.loads.load(), 2);
  EXPECT_EQ(driver.liveModulesOn(0), 1);
  EXPECT_GT(driver.device_queries.load(), device_queries);  // its device asked again
  StreamTarget fresh;
  ASSERT_TRUE(kiln::resolveStream(stream, &fresh).ok());
  ASSERT_TRUE(kiln::launch(fresh, v.get(), 1, config(), nullptr).ok());
  EXPECT_EQ(driver.loads.load(), 2);
}

TEST_F(StreamTargetTest, ManyVariantsManyThreadsTwoContextsLoadEachOnce) {
  // More variants than the first module table holds (it grows while others read it), launched
  // from 8 threads at once in two contexts, each thread resolving its own target per "run".
  constexpr int kVariants = 100;
  constexpr int kThreads = 8;
  std::vector<std::unique_ptr<TestVariant>> variants;
  for (int i = 0; i < kVariants; ++i) {
    variants.push_back(std::make_unique<TestVariant>(
        "variant_" + std::to_string(i), std::vector<std::string>{"kernel_main", "kernel_aux"},
        std::vector<kiln_image>{image(80), image(90)}));
  }
  CUstream streams[] = {driver.makeStream(0), driver.makeStream(1)};
  std::latch start(kThreads);
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&, w] {
      start.arrive_and_wait();
      for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < kVariants; ++i) {
          const int index = (i * 7 + w * 13) % kVariants;
          StreamTarget t;
          Status s = kiln::resolveStream(streams[(index + w) % 2], &t);
          if (s.ok()) s = kiln::launch(t, variants[index]->get(), w % 2, config(), nullptr);
          if (!s.ok() && failures[w].empty()) failures[w] = s.toString();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_EQ(driver.launches.load(), kThreads * 3 * kVariants);
  // Every variant reaches both contexts ((index + w) % 2 takes both values over the threads).
  EXPECT_EQ(driver.load_attempts.load(), 2 * kVariants);
  EXPECT_EQ(driver.liveModulesOn(0), kVariants);
  EXPECT_EQ(driver.liveModulesOn(1), kVariants);
}

}  // namespace
