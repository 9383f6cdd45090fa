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

// ---- inputs and variants -------------------------------------------------------------------

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
