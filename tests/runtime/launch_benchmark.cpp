// The host cost of a kiln launch of a loaded variant, against the fake driver (Google Benchmark):
// what resolveStream + launch(target, ...) adds to a bare call of the same driver's
// cuLaunchKernel. Built in CI and run there briefly as a ctest (runtime.launch_benchmark, with
// --benchmark_min_time=0.01), so it cannot rot; run it yourself for numbers:
//   build/release/tests/runtime/launch_benchmark
// Printed after the table: the ratio of each kiln path to the bare call, and the goal (1.3x).
//
// Two drivers, because the fake's cuLaunchKernel is not free (it checks the context and records
// the launch under a lock, as tests need): against it the ratio is the one asked for; against a
// launch entry that does nothing, the difference is the runtime's own cost in nanoseconds. The
// real driver's cuLaunchKernel costs microseconds; bench/launch/ measures that one on a GPU.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "fake_driver.h"
#include "kiln/runtime.h"

namespace {

using kiln::fake::image;
using kiln::fake::TestVariant;

kiln::LaunchConfig config() {
  kiln::LaunchConfig c;
  c.grid = {132, 1, 1};
  c.block = {128, 1, 1};
  return c;
}

CUresult noopLaunch(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                    unsigned, CUstream, void**, void**) {
  return CUDA_SUCCESS;
}

// One fake H200 with its context current on this thread (as a caller's usually is), a stream, a
// variant loaded by kiln, and the same function loaded through the bare table.
struct Fixture {
  explicit Fixture(bool noop_launch, bool caller_has_context = true) {
    if (noop_launch) {
      kiln::DriverApi table = driver.api();
      table.launchKernel = &noopLaunch;
      driver.install(table);
      api.launchKernel = &noopLaunch;
    }
    driver.makeCurrent(0);
    stream = driver.makeStream(0);
    CUmodule module = nullptr;
    if (api.moduleLoadData(&module, variant.get().images[0].data) != CUDA_SUCCESS ||
        api.moduleGetFunction(&function, module, "kernel_main") != CUDA_SUCCESS)
      ok = false;
    ok = ok && kiln::preload(variant.get(), stream).ok();
    if (!caller_has_context) kiln::fake::t_context_stack.clear();
  }
  kiln::fake::Driver driver{{kiln::fake::h200()}};
  kiln::DriverApi api = driver.api();
  TestVariant variant{"rmsnorm_h4096_bf16", {"kernel_main"}, {image(90)}};
  CUstream stream = nullptr;
  CUfunction function = nullptr;
  bool ok = true;
  int arg = 0;
  void* args[1] = {&arg};
};

void bare(benchmark::State& state, bool noop) {
  Fixture f(noop);
  const kiln::LaunchConfig c = config();
  for (auto _ : state) {
    CUresult r = f.api.launchKernel(f.function, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                                    c.block.z, c.shared_bytes, f.stream, f.args, nullptr);
    benchmark::DoNotOptimize(r);
  }
  if (!f.ok) state.SkipWithError("fixture failed");
}

// What a runner's run() does per call: resolve the stream, then launch.
void resolveAndLaunch(benchmark::State& state, bool noop, bool caller_has_context) {
  Fixture f(noop, caller_has_context);
  const kiln::LaunchConfig c = config();
  for (auto _ : state) {
    kiln::StreamTarget target;
    kiln::Status s = kiln::resolveStream(f.stream, &target);
    if (s.ok()) s = kiln::launch(target, f.variant.get(), 0, c, f.args);
    if (!s.ok()) {
      state.SkipWithError(s.toString().c_str());
      break;
    }
  }
}

// A runner that launches more than once per run(): the launches after the resolve.
void launchTarget(benchmark::State& state, bool noop) {
  Fixture f(noop);
  const kiln::LaunchConfig c = config();
  kiln::StreamTarget target;
  if (!kiln::resolveStream(f.stream, &target).ok()) state.SkipWithError("resolve failed");
  for (auto _ : state) {
    kiln::Status s = kiln::launch(target, f.variant.get(), 0, c, f.args);
    if (!s.ok()) {
      state.SkipWithError(s.toString().c_str());
      break;
    }
  }
}

// The one-call launch(variant, entry, config, stream, args) that existing callers use.
void oneCall(benchmark::State& state, bool noop) {
  Fixture f(noop);
  const kiln::LaunchConfig c = config();
  for (auto _ : state) {
    kiln::Status s = kiln::launch(f.variant.get(), 0, c, f.stream, f.args);
    if (!s.ok()) {
      state.SkipWithError(s.toString().c_str());
      break;
    }
  }
}

void BM_FakeBareLaunchKernel(benchmark::State& s) {
  bare(s, false);
}
void BM_FakeResolveAndLaunch(benchmark::State& s) {
  resolveAndLaunch(s, false, true);
}
void BM_FakeResolveAndLaunchNoCurrentContext(benchmark::State& s) {
  resolveAndLaunch(s, false, false);
}
void BM_FakeLaunchTarget(benchmark::State& s) {
  launchTarget(s, false);
}
void BM_FakeOneCallLaunch(benchmark::State& s) {
  oneCall(s, false);
}
void BM_NoopBareLaunchKernel(benchmark::State& s) {
  bare(s, true);
}
void BM_NoopResolveAndLaunch(benchmark::State& s) {
  resolveAndLaunch(s, true, true);
}
void BM_NoopLaunchTarget(benchmark::State& s) {
  launchTarget(s, true);
}

BENCHMARK(BM_FakeBareLaunchKernel);
BENCHMARK(BM_FakeResolveAndLaunch);
BENCHMARK(BM_FakeResolveAndLaunchNoCurrentContext);
BENCHMARK(BM_FakeLaunchTarget);
BENCHMARK(BM_FakeOneCallLaunch);
BENCHMARK(BM_NoopBareLaunchKernel);
BENCHMARK(BM_NoopResolveAndLaunch);
BENCHMARK(BM_NoopLaunchTarget);

// The console table as usual, and each run's time per iteration kept for the ratios.
class Reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && !run.error_occurred)
        ns_[run.benchmark_name()] = run.GetAdjustedRealTime();  // the default unit: ns
    }
    ConsoleReporter::ReportRuns(runs);
  }
  // "name: 123.4 ns / 56.7 ns = 2.18x".
  void ratio(const char* name, const char* base) const {
    auto n = ns_.find(name);
    auto b = ns_.find(base);
    if (n == ns_.end() || b == ns_.end() || b->second <= 0) return;
    std::printf("%-42s %8.1f ns / %8.1f ns = %.2fx\n", name, n->second, b->second,
                n->second / b->second);
  }
  void difference(const char* name, const char* base) const {
    auto n = ns_.find(name);
    auto b = ns_.find(base);
    if (n == ns_.end() || b == ns_.end()) return;
    std::printf("%-42s %8.1f ns more than %s\n", name, n->second - b->second, base);
  }

 private:
  std::map<std::string, double> ns_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf(
      "\nkiln launch vs the fake driver's cuLaunchKernel (goal: resolve + launch <= 1.3x "
      "on a real driver, bench/launch/):\n");
  reporter.ratio("BM_FakeResolveAndLaunch", "BM_FakeBareLaunchKernel");
  reporter.ratio("BM_FakeResolveAndLaunchNoCurrentContext", "BM_FakeBareLaunchKernel");
  reporter.ratio("BM_FakeLaunchTarget", "BM_FakeBareLaunchKernel");
  reporter.ratio("BM_FakeOneCallLaunch", "BM_FakeBareLaunchKernel");
  std::printf("the runtime's own cost (a launch entry that does nothing):\n");
  reporter.difference("BM_NoopResolveAndLaunch", "BM_NoopBareLaunchKernel");
  reporter.difference("BM_NoopLaunchTarget", "BM_NoopBareLaunchKernel");
  benchmark::Shutdown();
  return 0;
}
