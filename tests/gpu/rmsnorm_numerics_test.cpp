// GPU numerics of the rmsnorm group: every variant of the linked artifact, plain and fused, over
// boundary and batch shapes, against the float64 reference in kernels/rmsnorm/reference.h.
//
// Each case: fresh random inputs (the seed is printed; KILN_SEED=<n> replays a run), outputs and
// a guard row past the end poisoned with 0xffff (NaN in fp16 and bf16), one run() on a non-default
// stream, then: status ok, every output element written and finite, the guard untouched, relative
// L2 error within the PERF.md bound, the fused residual equal bit for bit to round(x + residual),
// and x untouched. Runner errors (unbuilt hidden, misaligned pointer, rows = 0) are checked on the
// device too. The summary (stdout, and JSON at $KILN_EVIDENCE_OUT) is the evidence format of
// DESIGN.md contract 10; the process exits non-zero on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/groups/rmsnorm.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/rmsnorm.h"
#include "kiln/runtime.h"
#include "rmsnorm/reference.h"

#if !defined(KILN_RMSNORM_ENABLED)
#error "the artifact has no rmsnorm group: kiln build --gpu-arch sm_NN --kernels rmsnorm"
#endif

namespace {

namespace ref = kiln::rmsnorm::reference;
namespace generated = kiln::generated::rmsnorm;

// Error bounds (PERF.md, Method 2): fp32 accumulation with 16-bit inputs and outputs rounded once.
// The output's own rounding contributes ~u/sqrt(3) relative L2 (u = 2^-11 fp16, 2^-8 bf16); the
// bounds leave room for fp32 accumulation and rsqrtf, and are never loosened to pass a test.
constexpr double kRelL2BoundFp16 = 2e-3;
constexpr double kRelL2BoundBf16 = 1.2e-2;

constexpr std::uint16_t kPoison = 0xffff;  // a NaN in both fp16 and bf16 (what memset 0xff writes)
constexpr float kEps = 1e-6f;

// Batch shapes: single token, odd small batches, a partial block for multi-row blocks (7, 33),
// a prefill chunk, and large odd / even counts that fill every SM many times over.
constexpr std::int64_t kRows[] = {1, 2, 7, 33, 257, 3001, 4096};

#define CUDA_OK(expr)                                                                      \
  do {                                                                                     \
    const cudaError_t err_ = (expr);                                                       \
    ASSERT_EQ(err_, cudaSuccess) << #expr << " at " << __FILE__ << ":" << __LINE__ << ": " \
                                 << cudaGetErrorString(err_);                              \
  } while (0)

// ---- results: pass / fail / skip per (SM, dtype, variant, op) -------------------------------

struct Counts {
  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> notes;  // why a case failed or was skipped
};

struct Run {
  std::string gpu_name;
  int sm = 0;
  int driver_version = 0;
  int runtime_version = 0;
  std::uint64_t seed = 0;
  std::map<std::tuple<int, std::string, std::string, std::string>, Counts> results;

  Counts& at(const std::string& dtype, const std::string& variant, const std::string& op) {
    return results[{sm, dtype, variant, op}];
  }
};

Run& run() {
  static Run r;
  return r;
}

// ---- inputs -------------------------------------------------------------------------------

// splitmix64: fast, seedable, good enough to draw test bits.
struct Rng {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

// A random finite 16-bit value with magnitude in [2^(lo), 2^(hi + 1)) and random sign and
// mantissa bits: every mantissa bit is exercised, no rounding happens on the host.
std::uint16_t randomBits(Rng& rng, ref::Format f, int lo, int hi, bool allow_negative) {
  const ref::FormatLayout l = ref::layoutOf(f);
  const std::uint64_t r = rng.next();
  const int exponent = lo + static_cast<int>(r % static_cast<std::uint64_t>(hi - lo + 1));
  const unsigned mantissa = static_cast<unsigned>((r >> 16) & ((1u << l.mantissa_bits) - 1u));
  const unsigned sign = (allow_negative && ((r >> 40) & 1u)) ? 0x8000u : 0u;
  return static_cast<std::uint16_t>(
      sign | (static_cast<unsigned>(exponent + l.bias) << l.mantissa_bits) | mantissa);
}

// Rows of different scales (2^-3 .. 2^3 apart) so that each row's own rms matters.
std::vector<std::uint16_t> randomRows(Rng& rng, ref::Format f, std::int64_t rows,
                                      std::int64_t hidden) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(rows * hidden));
  for (std::int64_t r = 0; r < rows; ++r) {
    const int shift = static_cast<int>(rng.next() % 7) - 3;
    for (std::int64_t i = 0; i < hidden; ++i) {
      v[static_cast<std::size_t>(r * hidden + i)] = randomBits(rng, f, -6 + shift, 1 + shift, true);
    }
  }
  return v;
}

// ---- device buffers -------------------------------------------------------------------------

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

// [elements] 16-bit values plus one guard row of `guard` elements, all set to `fill` (if given),
// then the first fill.size() elements set from `data`.
::testing::AssertionResult allocate(DeviceBuffer* b, std::size_t elements, std::size_t guard,
                                    const std::vector<std::uint16_t>* data) {
  b->bytes = (elements + guard) * sizeof(std::uint16_t);
  if (cudaMalloc(&b->ptr, b->bytes) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMalloc of " << b->bytes << " bytes failed";
  }
  if (cudaMemset(b->ptr, 0xff, b->bytes) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemset failed";
  }
  if (data != nullptr && data->size() > elements + guard) {
    return ::testing::AssertionFailure() << data->size() << " values do not fit a buffer of "
                                         << elements + guard << " elements";
  }
  if (data != nullptr && cudaMemcpy(b->ptr, data->data(), data->size() * sizeof(std::uint16_t),
                                    cudaMemcpyHostToDevice) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemcpy to device failed";
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::uint16_t> download(const DeviceBuffer& b) {
  std::vector<std::uint16_t> host(b.bytes / sizeof(std::uint16_t));
  if (cudaMemcpy(host.data(), b.ptr, b.bytes, cudaMemcpyDeviceToHost) != cudaSuccess) host.clear();
  return host;
}

kiln::rmsnorm::DType dtypeOf(const char* name) {
  return std::strcmp(name, "fp16") == 0 ? kiln::rmsnorm::DType::kFloat16
                                        : kiln::rmsnorm::DType::kBFloat16;
}
ref::Format formatOf(const char* name) {
  return std::strcmp(name, "fp16") == 0 ? ref::Format::kFloat16 : ref::Format::kBFloat16;
}

// ---- one case ----------------------------------------------------------------------------------

enum class Op { kPlain, kFused, kPlainInPlace };
const char* opName(Op op) {
  switch (op) {
    case Op::kPlain:
      return "plain";
    case Op::kFused:
      return "fused";
    case Op::kPlainInPlace:
      return "plain_in_place";
  }
  return "?";
}

// Runs one (variant, op, rows) case; returns "" on success, else what failed.
std::string runCase(const generated::VariantEntry& v, Op op, std::int64_t rows, Rng& rng,
                    cudaStream_t stream) {
  const ref::Format f = formatOf(v.dtype);
  const std::int64_t hidden = v.hidden;
  const std::size_t n = static_cast<std::size_t>(rows * hidden);
  const std::size_t guard = static_cast<std::size_t>(hidden);
  const std::vector<std::uint16_t> x = randomRows(rng, f, rows, hidden);
  const std::vector<std::uint16_t> residual =
      op == Op::kFused ? randomRows(rng, f, rows, hidden) : std::vector<std::uint16_t>{};
  std::vector<std::uint16_t> weight(static_cast<std::size_t>(hidden));
  for (auto& w : weight) w = randomBits(rng, f, -1, 0, true);  // |w| in [0.5, 2)

  DeviceBuffer d_x, d_res, d_w, d_out;
  std::ostringstream err;
  if (auto r = allocate(&d_x, n, guard, &x); !r) return r.message();
  if (auto r = allocate(&d_w, weight.size(), 0, &weight); !r) return r.message();
  if (op == Op::kFused) {
    if (auto r = allocate(&d_res, n, guard, &residual); !r) return r.message();
  }
  if (op != Op::kPlainInPlace) {
    if (auto r = allocate(&d_out, n, guard, nullptr); !r) return r.message();  // all poison
  }

  kiln::rmsnorm::Problem p;
  p.dtype = dtypeOf(v.dtype);
  p.rows = rows;
  p.hidden = hidden;
  p.eps = kEps;
  p.x = d_x.ptr;
  p.out = op == Op::kPlainInPlace ? d_x.ptr : d_out.ptr;
  p.residual = op == Op::kFused ? d_res.ptr : nullptr;
  p.weight = d_w.ptr;
  const kiln::Status s = kiln::rmsnorm::run(p, nullptr, kiln::rmsnorm::workspaceSize(p),
                                            reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }

  // Reference.
  std::vector<double> expected(n);
  std::vector<std::uint16_t> expected_residual;
  if (op == Op::kFused) {
    expected_residual.resize(n);
    ref::addRmsnorm(f, rows, hidden, kEps, x.data(), residual.data(), weight.data(),
                    expected_residual.data(), expected.data());
  } else {
    ref::rmsnorm(f, rows, hidden, kEps, x.data(), weight.data(), expected.data());
  }

  const std::vector<std::uint16_t> out = download(op == Op::kPlainInPlace ? d_x : d_out);
  if (out.size() != n + guard) return "download of out failed";
  const ref::Decoder dec(f);
  std::size_t unwritten = 0, nonfinite = 0, guard_changed = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (out[i] == kPoison)
      ++unwritten;
    else if (!std::isfinite(dec(out[i])))
      ++nonfinite;
  }
  for (std::size_t i = n; i < n + guard; ++i) guard_changed += out[i] != kPoison;
  if (unwritten) err << unwritten << " of " << n << " outputs not written (still poison); ";
  if (nonfinite) err << nonfinite << " outputs not finite; ";
  if (guard_changed) err << guard_changed << " elements written past the end of out; ";

  const double bound = f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  const double rel = ref::relativeL2(f, n, out.data(), expected.data());
  if (!(rel <= bound)) err << "relative L2 error " << rel << " > bound " << bound << "; ";

  if (op == Op::kFused) {
    const std::vector<std::uint16_t> got = download(d_res);
    std::size_t mismatched = 0, res_guard = 0;
    std::size_t first = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (got[i] != expected_residual[i]) {
        if (mismatched++ == 0) first = i;
      }
    }
    for (std::size_t i = n; i < n + guard; ++i) res_guard += got[i] != kPoison;
    // fp32 holds x + residual of two 16-bit values closely enough that its rounding equals the
    // exact sum's: the residual must match bit for bit.
    if (mismatched) {
      err << mismatched << " residual elements differ from round(x + residual), first at " << first
          << " (got 0x" << std::hex << got[first] << ", want 0x" << expected_residual[first]
          << std::dec << "); ";
    }
    if (res_guard) err << res_guard << " elements written past the end of residual; ";
  }
  if (op != Op::kPlainInPlace) {
    const std::vector<std::uint16_t> x_after = download(d_x);
    if (x_after.size() != n + guard || std::memcmp(x_after.data(), x.data(), n * 2) != 0) {
      err << "x was modified; ";
    }
  }
  std::string message = err.str();
  if (!message.empty()) message += "(rel L2 " + std::to_string(rel) + ")";
  return message;
}

// ---- tests -----------------------------------------------------------------------------------

struct VariantOp {
  std::size_t index;
  Op op;
};

std::vector<VariantOp> allCases() {
  std::vector<VariantOp> cases;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
    for (Op op : {Op::kPlain, Op::kFused, Op::kPlainInPlace}) cases.push_back({i, op});
  }
  return cases;
}

class RmsnormNumerics : public ::testing::TestWithParam<VariantOp> {};

TEST_P(RmsnormNumerics, MatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().index];
  const Op op = GetParam().op;
  Counts& counts = run().at(v.dtype, v.name, opName(op));

  // The selector's own answer for this device (rows = 0 skips the pointer checks).
  kiln::rmsnorm::Problem probe;
  probe.dtype = dtypeOf(v.dtype);
  probe.hidden = v.hidden;
  if (const kiln::Status s = kiln::rmsnorm::canImplement(probe, run().sm); !s.ok()) {
    counts.skipped += static_cast<int>(std::size(kRows));
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }

  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (std::int64_t rows : kRows) {
    Rng rng{run().seed ^ (GetParam().index * 0x100000001b3ULL) ^
            (static_cast<std::uint64_t>(op) << 56) ^ static_cast<std::uint64_t>(rows)};
    const std::string failure = runCase(v, op, rows, rng, stream);
    if (failure.empty()) {
      ++counts.passed;
    } else {
      ++counts.failed;
      counts.notes.push_back("rows " + std::to_string(rows) + ": " + failure);
      ADD_FAILURE() << v.name << " " << opName(op) << " rows " << rows << " x " << v.hidden << ": "
                    << failure;
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, RmsnormNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantOp>& param_info) {
                           return std::string(generated::kVariants[param_info.param.index].name) +
                                  "_" + opName(param_info.param.op);
                         });

// Runner errors on the device, once per built dtype (its first variant).
class RmsnormRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(RmsnormRunnerErrors, RefusesBadProblemsAndTreatsZeroRowsAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(v.dtype, v.name, "runner_errors");
  kiln::rmsnorm::Problem probe;
  probe.dtype = dtypeOf(v.dtype);
  probe.hidden = v.hidden;
  if (const kiln::Status s = kiln::rmsnorm::canImplement(probe, run().sm); !s.ok()) {
    counts.skipped += 4;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const std::int64_t rows = 4;
  const std::size_t n = static_cast<std::size_t>(rows * v.hidden);
  const std::vector<std::uint16_t> ones(n + static_cast<std::size_t>(v.hidden), 0x3c00);
  DeviceBuffer d_x, d_res, d_w, d_out;
  ASSERT_TRUE(allocate(&d_x, n, static_cast<std::size_t>(v.hidden), &ones));
  ASSERT_TRUE(allocate(&d_res, n, 0, nullptr));
  const std::vector<std::uint16_t> weight(static_cast<std::size_t>(v.hidden), 0x3c00);
  ASSERT_TRUE(allocate(&d_w, static_cast<std::size_t>(v.hidden), 0, &weight));
  ASSERT_TRUE(allocate(&d_out, n, 0, nullptr));
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);

  kiln::rmsnorm::Problem good;
  good.dtype = dtypeOf(v.dtype);
  good.rows = rows;
  good.hidden = v.hidden;
  good.eps = kEps;
  good.x = d_x.ptr;
  good.out = d_out.ptr;
  good.weight = d_w.ptr;
  auto record = [&](bool ok, const std::string& what) {
    if (ok) {
      ++counts.passed;
    } else {
      ++counts.failed;
      counts.notes.push_back(what);
    }
    EXPECT_TRUE(ok) << what;
  };

  {  // A hidden size no variant has (4000 * 2 bytes is 16-byte aligned, so only "not built" fits).
    kiln::rmsnorm::Problem p = good;
    p.hidden = 4000;
    const kiln::Status s = kiln::rmsnorm::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kNotSupported &&
               s.message().find("hidden 4000") != std::string::npos,
           "unbuilt hidden: " + s.toString());
  }
  {  // x one element past an aligned address.
    kiln::rmsnorm::Problem p = good;
    p.x = static_cast<const std::uint16_t*>(d_x.ptr) + 1;
    const kiln::Status s = kiln::rmsnorm::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find("pointer x") != std::string::npos,
           "misaligned x: " + s.toString());
  }
  {  // rows = 0: ok, nothing written (out stays poison, residual unchanged).
    kiln::rmsnorm::Problem p = good;
    p.rows = 0;
    p.residual = d_res.ptr;
    const kiln::Status s = kiln::rmsnorm::run(p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto out = download(d_out);
    const auto res = download(d_res);
    bool untouched = !out.empty() && !res.empty();
    for (std::uint16_t b : out) untouched = untouched && b == kPoison;
    for (std::uint16_t b : res) untouched = untouched && b == kPoison;
    record(s.ok() && untouched, "rows 0: " + s.toString() + (untouched ? "" : ", buffers written"));
  }
  {  // The admitted problem runs (and canImplement agrees).
    const kiln::Status can = kiln::rmsnorm::canImplement(good, run().sm);
    const kiln::Status s = kiln::rmsnorm::run(good, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(can.ok() && s.ok(),
           "valid problem: canImplement " + can.toString() + ", run " + s.toString());
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

std::vector<std::size_t> firstVariantPerDtype() {
  std::vector<std::size_t> picks;
  for (const char* dtype : {"fp16", "bf16"}) {
    for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
      if (std::strcmp(generated::kVariants[i].dtype, dtype) == 0) {
        picks.push_back(i);
        break;
      }
    }
  }
  return picks;
}

INSTANTIATE_TEST_SUITE_P(Artifact, RmsnormRunnerErrors, ::testing::ValuesIn(firstVariantPerDtype()),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Prints the summary and writes it as JSON; returns the totals.
std::tuple<int, int, int> report(bool gtest_ok) {
  const Run& r = run();
  const char* tag = kiln_artifact_tag();
  const char* fingerprint = kiln_artifact_fingerprint();
  int passed = 0, failed = 0, skipped = 0;
  std::printf("\nkiln rmsnorm GPU numerics\n");
  std::printf("gpu: %s (sm_%d), driver %d, runtime %d\n", r.gpu_name.c_str(), r.sm,
              r.driver_version, r.runtime_version);
  std::printf("artifact: tag %s, fingerprint %s\n", tag, fingerprint);
  std::printf("seed: %" PRIu64 " (KILN_SEED=%" PRIu64 " replays it)\n", r.seed, r.seed);
  std::ostringstream rows_json;
  for (const auto& [key, c] : r.results) {
    const auto& [sm, dtype, variant, op] = key;
    std::printf("sm_%d %s %s %s: %d passed, %d failed, %d skipped\n", sm, dtype.c_str(),
                variant.c_str(), op.c_str(), c.passed, c.failed, c.skipped);
    for (const std::string& note : c.notes) std::printf("    %s\n", note.c_str());
    passed += c.passed;
    failed += c.failed;
    skipped += c.skipped;
    rows_json << (rows_json.tellp() > 0 ? ",\n    " : "\n    ") << "{\"sm\": " << sm
              << ", \"dtype\": \"" << dtype << "\", \"variant\": \"" << variant << "\", \"op\": \""
              << op << "\", \"passed\": " << c.passed << ", \"failed\": " << c.failed
              << ", \"skipped\": " << c.skipped << ", \"notes\": [";
    for (std::size_t i = 0; i < c.notes.size(); ++i) {
      rows_json << (i ? ", " : "") << '"' << jsonEscape(c.notes[i]) << '"';
    }
    rows_json << "]}";
  }
  if (!gtest_ok && failed == 0) failed = 1;  // a gtest failure outside the counted cases
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);

  if (const char* path = std::getenv("KILN_EVIDENCE_OUT"); path != nullptr && *path != '\0') {
    std::ofstream json(path);
    json << "{\n  \"suite\": \"rmsnorm_numerics\",\n  \"gpu\": \"" << jsonEscape(r.gpu_name)
         << "\",\n  \"sm\": " << r.sm << ",\n  \"driver_version\": " << r.driver_version
         << ",\n  \"runtime_version\": " << r.runtime_version << ",\n  \"artifact_tag\": \""
         << jsonEscape(tag) << "\",\n  \"artifact_fingerprint\": \"" << jsonEscape(fingerprint)
         << "\",\n  \"seed\": " << r.seed << ",\n  \"shapes_rows\": [";
    for (std::size_t i = 0; i < std::size(kRows); ++i) json << (i ? ", " : "") << kRows[i];
    json << "],\n  \"bounds\": {\"fp16\": " << kRelL2BoundFp16 << ", \"bf16\": " << kRelL2BoundBf16
         << "},\n  \"results\": [" << rows_json.str() << "\n  ],\n  \"passed\": " << passed
         << ",\n  \"failed\": " << failed << ",\n  \"skipped\": " << skipped << "\n}\n";
    if (!json)
      std::fprintf(stderr, "could not write %s\n", path);
    else
      std::printf("evidence: %s\n", path);
  }
  return {passed, failed, skipped};
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();  // listing needs no device
  Run& r = run();
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::printf("no usable CUDA device\n0 passed, 1 failed, 0 skipped\n");
    return 1;
  }
  r.gpu_name = prop.name;
  r.sm = prop.major * 10 + prop.minor;
  (void)cudaDriverGetVersion(&r.driver_version);
  (void)cudaRuntimeGetVersion(&r.runtime_version);
  if (const char* seed = std::getenv("KILN_SEED"); seed != nullptr && *seed != '\0') {
    r.seed = std::strtoull(seed, nullptr, 10);
  } else {
    r.seed =
        static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  std::printf("seed %" PRIu64 "\n", r.seed);
  const int gtest_rc = RUN_ALL_TESTS();
  const auto [passed, failed, skipped] = report(gtest_rc == 0);
  (void)passed;
  (void)skipped;
  return (gtest_rc != 0 || failed != 0) ? 1 : 0;
}
