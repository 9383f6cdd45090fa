// What every kernel group's GPU numerics test shares: the results table (pass / fail / skip per
// (SM, dtype, variant, op-or-case)), the summary on stdout and the JSON evidence at
// $KILN_EVIDENCE_OUT (what docs/performance-method.md asks a run to record), main() (device check,
// seed, gtest, report), and poisoned device buffers. A group's test keeps its reference and its
// error bounds; its cases are in kernels/<group>/tests/gpu/cases.h, shared with the benchmark.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#define CUDA_OK(expr)                                                                      \
  do {                                                                                     \
    const cudaError_t err_ = (expr);                                                       \
    ASSERT_EQ(err_, cudaSuccess) << #expr << " at " << __FILE__ << ":" << __LINE__ << ": " \
                                 << cudaGetErrorString(err_);                              \
  } while (0)

namespace kiln::gpu_test {

constexpr std::uint16_t kPoison = 0xffff;  // a NaN in both fp16 and bf16 (what memset 0xff writes)

// Relative L2 bounds of a 16-bit output against a float64 reference (docs/performance-method.md,
// Method 2): fp32
// accumulation over inputs exact in the dtype, the output rounded once (~u / sqrt(3) of relative
// L2, u = 2^-11 fp16, 2^-8 bf16), with the rest of the bound for the fp32 part. Every group's
// test says beside its use why its kernel stays inside them (what else it rounds).
constexpr double kRelL2BoundFp16 = 2e-3;
constexpr double kRelL2BoundBf16 = 1.2e-2;

// ---- results: pass / fail / skip per (SM, dtype, variant, op or case) ----------------------

struct Counts {
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> notes;  // why a case failed or was skipped (and, for some, its error)

  // Counts one check; a failed one keeps `what` as a note. Returns ok (for EXPECT_TRUE).
  bool record(bool ok, const std::string& what);
  // Counts one numerics case from its failure text (empty: passed): a pass keeps `pass_note`
  // (the errors it measured) when not empty, a failure keeps the text and fails the gtest case
  // as "<label>: <failure>".
  void recordCase(const std::string& failure, const std::string& pass_note,
                  const std::string& label);
};

struct Run {
  std::string gpu_name;
  int sm = 0;
  int multiprocessors = 0;
  int driver_version = 0;
  int runtime_version = 0;
  std::uint64_t seed = 0;
  std::map<std::tuple<int, std::string, std::string, std::string>, Counts> results;

  Counts& at(const std::string& dtype, const std::string& variant, const std::string& what) {
    return results[{sm, dtype, variant, what}];
  }
};

Run& run();  // this process's run

// ---- summary and evidence ----------------------------------------------------------------

// How a group's summary and evidence look; the fields are the only differences between groups.
struct ReportFormat {
  std::string group;                  // "rmsnorm": title "kiln rmsnorm GPU numerics", suite
                                      // "rmsnorm_numerics"
  std::string case_key = "op";        // JSON key of the 4th result field ("op" or "case")
  bool show_multiprocessors = false;  // the SM count on the gpu line and in the JSON
  bool per_variant_totals = false;    // totals per variant first, then indented lines per case
  std::string extra_json;             // JSON members after "seed" (e.g. "\"shapes_rows\": [1, 2]")
  double bound_fp16 = 0.0;            // relative L2 bounds, written as "bounds"
  double bound_bf16 = 0.0;
  const char* artifact_tag = "";
  const char* artifact_fingerprint = "";
};

struct Totals {
  int passed = 0, failed = 0, skipped = 0;
};

std::string jsonEscape(const std::string& s);

// Prints the summary (ending in "N passed, N failed, N skipped") and writes the JSON evidence to
// $KILN_EVIDENCE_OUT if set. A gtest failure outside the counted cases counts as one failure.
Totals report(const ReportFormat& format, bool gtest_ok);

// The whole main(): gtest init (--gtest_list_tests needs no device), the device check, the seed
// (KILN_SEED=<n> replays a run), RUN_ALL_TESTS, report(). Returns the exit code: non-zero on any
// failure. `format` is called after the tests ran.
template <typename FormatFn>
int numericsMain(int argc, char** argv, FormatFn format);

// Up to RUN_ALL_TESTS: returns -1 to go on, else the exit code (listing, or no device).
int numericsSetUp(int* argc, char** argv);

template <typename FormatFn>
int numericsMain(int argc, char** argv, FormatFn format) {
  if (const int rc = numericsSetUp(&argc, argv); rc >= 0) return rc;
  const int gtest_rc = RUN_ALL_TESTS();
  const Totals totals = report(format(), gtest_rc == 0);
  return (gtest_rc != 0 || totals.failed != 0) ? 1 : 0;
}

// ---- device buffers ------------------------------------------------------------------------

struct DeviceBuffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) (void)cudaFree(ptr);
  }
};

// max(bytes, 16) bytes set to 0xff (poison), then the first data_bytes from `data` (if given).
// Returns "" or what failed. Both allocate() overloads synchronise the device before returning,
// so the buffer is poisoned and uploaded before work on any stream (non-blocking ones included,
// which do not wait for the legacy stream that cudaMemset / cudaMemcpy use) can touch it.
std::string allocate(DeviceBuffer* b, std::size_t bytes, const void* data, std::size_t data_bytes);

// [elements] 16-bit values plus a guard of `guard` elements, all poison, then the first
// data->size() elements set from `data` (if given), which must fit.
::testing::AssertionResult allocate(DeviceBuffer* b, std::size_t elements, std::size_t guard,
                                    const std::vector<std::uint16_t>* data);

// A buffer holding exactly `v` (allocate() with the vector's bytes); "" or what failed.
template <typename T>
std::string uploadVector(DeviceBuffer* b, const std::vector<T>& v) {
  return allocate(b, v.size() * sizeof(T), v.data(), v.size() * sizeof(T));
}

// The whole buffer; empty if the copy failed.
template <typename T = std::uint16_t>
std::vector<T> download(const DeviceBuffer& b) {
  std::vector<T> host(b.bytes / sizeof(T));
  if (cudaMemcpy(host.data(), b.ptr, host.size() * sizeof(T), cudaMemcpyDeviceToHost) !=
      cudaSuccess) {
    host.clear();
  }
  return host;
}

// ---- poison checks ---------------------------------------------------------------------------

// True if `values` is non-empty and every value is still poison.
bool allPoison(const std::vector<std::uint16_t>& values);

// Elements of [begin, end) that are no longer poison (a guard written past the end).
std::size_t countChanged(const std::vector<std::uint16_t>& values, std::size_t begin,
                         std::size_t end);

struct OutputScan {
  std::size_t unwritten = 0, nonfinite = 0, guard_changed = 0;
};

// The first n outputs (still poison: unwritten; decoded not finite) and the guard after them.
template <typename Decoder>
OutputScan scanOutput(const std::vector<std::uint16_t>& out, std::size_t n, std::size_t guard,
                      const Decoder& dec) {
  OutputScan s;
  for (std::size_t i = 0; i < n; ++i) {
    if (out[i] == kPoison)
      ++s.unwritten;
    else if (!std::isfinite(dec(out[i])))
      ++s.nonfinite;
  }
  s.guard_changed = countChanged(out, n, n + guard);
  return s;
}

// "N of n outputs not written (still poison); N outputs not finite; N elements written past the
// end of out; ", each part only when its count is not 0.
void describe(std::ostream& err, const OutputScan& s, std::size_t n);

// ---- fresh threads (issue 33) ------------------------------------------------------------------

// A group's FreshThreads test runs its runner from threads that did nothing else: kFreshThreads
// threads with no current CUDA context, and one more (index kOtherContextThread) whose current
// context is another context of the same device than the (primary) context that owns the streams.
inline constexpr int kFreshThreads = 8;
inline constexpr int kOtherContextThread = kFreshThreads;

// Calls work(t) for t = 0 .. kFreshThreads on kFreshThreads + 1 new std::threads, released together
// by a latch, and joins them. Threads 0 .. kFreshThreads - 1 are fresh: no current context.
// Thread kOtherContextThread first creates a context of its own (cuCtxCreate, current on it) on
// the device of the calling thread's current context, and destroys it after work. Each thread
// checks, with driver calls only, that its current context is what it should be (none, or its
// own) before work and still is after it (the runtime's context rule: the caller's context, or
// none, is current again when a runner returns). `work` must call nothing of the CUDA runtime
// (a runtime call would make the primary context current on the thread): only a runner's run().
// The driver's entry points come through cudaGetDriverEntryPointByVersion (the tests link only
// cudart), fetched on the calling thread, which must have a current context (the streams').
// Returns, per thread, "" or what went wrong around its work; work(t) is not called when the
// thread's setup failed (then every thread gets the setup failure). A thread that does not
// return within `timeout_s` aborts the process (a deadlock must not hang the run).
std::vector<std::string> runOnFreshThreads(const std::function<void(int)>& work,
                                           int timeout_s = 300);

// The result name of thread t's cases: "fresh_threads", or "fresh_threads_other_context".
inline const char* freshThreadsCase(int t) {
  return t == kOtherContextThread ? "fresh_threads_other_context" : "fresh_threads";
}

// The j-th of n variants that thread t runs: even threads first to last, odd ones last to first,
// so that the first launch of a variant races on several threads at once, the first and the last
// variant each on about half of them, while others load other variants.
inline std::size_t freshThreadsOrder(int t, std::size_t j, std::size_t n) {
  return t % 2 == 0 ? j : n - 1 - j;
}

// One variant of a FreshThreads test: its names in the results, and why it is not run on this
// device (the selector's refusal; empty: it runs).
struct FreshThreadsVariant {
  std::string dtype, name, skip;
};

// The body of a group's FreshThreads test, for threads t = 0 .. kOtherContextThread and the
// variants i that run on this device (the others are counted skipped, with their reason):
//   prepare(t, i) -> std::string   on this thread: thread t's case of variant i (inputs uploaded,
//                                  outputs poisoned), "" or what failed (then it is not run);
//   launch(t, i, stream) -> Status on thread t, for its prepared cases in freshThreadsOrder: the
//                                  runner's run() and nothing else (stream: a cudaStream_t);
//   check(t, i) -> std::string     on this thread, after thread t's stream synchronized and when
//                                  its launch returned ok: "" or what failed.
// One non-blocking stream per thread, created and destroyed here. Each (t, i) is one case of
// the variant's freshThreadsCase(t) result, failing with what runOnFreshThreads reported for
// thread t, the launch's status, the stream's error or the check's failure.
template <typename Prepare, typename Launch, typename Check>
void runFreshThreadsTest(const std::vector<FreshThreadsVariant>& variants, Prepare prepare,
                         Launch launch, Check check) {
  constexpr int kThreads = kFreshThreads + 1;
  const std::size_t nv = variants.size();
  std::vector<cudaStream_t> streams(kThreads, nullptr);
  for (cudaStream_t& stream : streams) {
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  // What failed per (thread, variant) before the threads ran; ready: prepared and to be run.
  std::vector<std::vector<std::string>> failures(kThreads, std::vector<std::string>(nv));
  std::vector<std::vector<char>> ready(kThreads, std::vector<char>(nv, 0));
  for (int t = 0; t < kThreads; ++t) {
    for (std::size_t i = 0; i < nv; ++i) {
      if (!variants[i].skip.empty()) continue;
      failures[t][i] = prepare(t, i);
      ready[t][i] = failures[t][i].empty();
    }
  }
  using StatusT = decltype(launch(0, std::size_t{0}, cudaStream_t{}));
  std::vector<std::vector<StatusT>> statuses(kThreads, std::vector<StatusT>(nv));
  std::vector<std::vector<char>> launched(kThreads, std::vector<char>(nv, 0));
  const std::vector<std::string> thread_errors = runOnFreshThreads([&](int t) {
    for (std::size_t j = 0; j < nv; ++j) {
      const std::size_t i = freshThreadsOrder(t, j, nv);
      if (!ready[t][i]) continue;
      statuses[t][i] = launch(t, i, streams[t]);
      launched[t][i] = 1;
    }
  });
  for (int t = 0; t < kThreads; ++t) {
    const cudaError_t sync = cudaStreamSynchronize(streams[t]);
    for (std::size_t i = 0; i < nv; ++i) {
      const FreshThreadsVariant& v = variants[i];
      Counts& counts = run().at(v.dtype, v.name, freshThreadsCase(t));
      if (!v.skip.empty()) {
        ++counts.skipped;
        if (counts.notes.empty()) counts.notes.push_back(v.skip);
        continue;
      }
      std::string failure = thread_errors[t];
      if (!ready[t][i]) {
        failure += failures[t][i];
      } else if (!launched[t][i]) {
        failure += "not run";
      } else if (!statuses[t][i].ok()) {
        failure += "run: " + statuses[t][i].toString();
      } else if (sync != cudaSuccess) {
        failure += std::string("kernel: ") + cudaGetErrorString(sync);
      } else {
        failure += check(t, i);
      }
      if (!failure.empty()) failure = "thread " + std::to_string(t) + ": " + failure;
      counts.recordCase(failure, "", v.name + " " + freshThreadsCase(t));
    }
  }
  for (cudaStream_t stream : streams) CUDA_OK(cudaStreamDestroy(stream));
}

// ---- inputs and variants -------------------------------------------------------------------

// fn(begin, end, part) over [0, n) in parts, one thread a part (up to the cores, at most 32): the
// host side of a test (drawing inputs, the float64 reference, checking outputs) at large shapes.
void parallelFor(std::size_t n,
                 const std::function<void(std::size_t, std::size_t, std::size_t)>& fn);

// splitmix64: fast, seedable, good enough to draw test bits.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
};

// The index of the first variant of each built dtype in a generated kVariants (rows with a
// kiln::DType `dtype`), in the enum's order: fp16, then bf16.
template <typename Variants>
std::vector<std::size_t> firstVariantPerDtype(const Variants& variants) {
  std::vector<std::size_t> picks;
  for (std::size_t i = 0; i < std::size(variants); ++i) {
    const bool seen = std::any_of(picks.begin(), picks.end(), [&](std::size_t p) {
      return variants[p].dtype == variants[i].dtype;
    });
    if (!seen) picks.push_back(i);
  }
  std::sort(picks.begin(), picks.end(),
            [&](std::size_t a, std::size_t b) { return variants[a].dtype < variants[b].dtype; });
  return picks;
}

}  // namespace kiln::gpu_test
