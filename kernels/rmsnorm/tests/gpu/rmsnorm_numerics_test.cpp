// GPU numerics of the rmsnorm group: every variant of the linked artifact, plain and fused, over
// the cases of kernels/rmsnorm/tests/gpu/cases.h marked kNumerics (boundary and batch shapes at
// every hidden size, and the benchmark's shapes at theirs), against the float64 reference in
// kernels/rmsnorm/reference.h.
//
// Each case: fresh random inputs (the seed is printed; KILN_SEED=<n> replays a run), outputs and
// a guard row past the end poisoned with 0xffff (NaN in fp16 and bf16), one run() on a non-default
// stream, then: status ok, every output element written and finite, the guard untouched, relative
// L2 error within the bound of docs/performance-method.md, the fused residual equal bit for bit to
// round(x + residual), and x untouched. Runner errors (unbuilt hidden, misaligned pointer,
// rows = 0) are checked on the device too. The summary (stdout, and JSON at $KILN_EVIDENCE_OUT)
// records what docs/performance-method.md asks of evidence; the process exits non-zero on any
// failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/dtype_format.h"
#include "common/gpu_test_support.h"
#include "kiln/groups/rmsnorm.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/rmsnorm.h"
#include "kiln/runtime.h"
#include "rmsnorm/reference.h"
#include "rmsnorm/tests/gpu/cases.h"

#if !defined(KILN_RMSNORM_ENABLED)
#error "the artifact has no rmsnorm group: kiln build --gpu-arch sm_NN --kernels rmsnorm"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::rmsnorm::reference;
namespace generated = kiln::generated::rmsnorm;
namespace cases = kiln::rmsnorm::cases;

// Error bounds: kRelL2BoundFp16 / Bf16 (gpu_test_support.h, docs/performance-method.md, Method 2).
// Beside the output's own rounding, the kernel's only other errors are fp32 accumulation and
// rsqrtf, well inside them.

constexpr float kEps = 1e-6f;

// The cases this test checks on variant `v` (cases.h: kNumerics, at every hidden size or at v's).
std::vector<const cases::Case*> casesFor(const generated::VariantInfo& v) {
  std::vector<const cases::Case*> picks;
  for (const cases::Case& c : cases::kCases) {
    if ((c.readers & cases::kNumerics) != 0 && (c.hidden == 0 || c.hidden == v.hidden)) {
      picks.push_back(&c);
    }
  }
  return picks;
}

// ---- inputs -------------------------------------------------------------------------------

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

// One (variant, op, rows) case, prepared: its host inputs, its device buffers (inputs uploaded,
// outputs and a guard row poisoned) and the problem that run() takes.
struct PreparedCase {
  Op op = Op::kPlain;
  ref::Format f = ref::Format::kBFloat16;
  std::int64_t rows = 0, hidden = 0;
  std::size_t n = 0, guard = 0;
  std::vector<std::uint16_t> x, residual, weight;
  DeviceBuffer d_x, d_res, d_w, d_out;
  kiln::rmsnorm::Problem p;
};

// Draws the case's inputs and prepares it; returns "" on success, else what failed.
std::string prepareCase(const generated::VariantInfo& v, Op op, std::int64_t rows, Rng& rng,
                        PreparedCase* c) {
  const ref::Format f = formatOf(v.dtype);
  const std::int64_t hidden = v.hidden;
  const std::size_t n = static_cast<std::size_t>(rows * hidden);
  const std::size_t guard = static_cast<std::size_t>(hidden);
  c->op = op;
  c->f = f;
  c->rows = rows;
  c->hidden = hidden;
  c->n = n;
  c->guard = guard;
  c->x = randomRows(rng, f, rows, hidden);
  c->residual = op == Op::kFused ? randomRows(rng, f, rows, hidden) : std::vector<std::uint16_t>{};
  c->weight.resize(static_cast<std::size_t>(hidden));
  for (auto& w : c->weight) w = randomBits(rng, f, -1, 0, true);  // |w| in [0.5, 2)

  if (auto r = allocate(&c->d_x, n, guard, &c->x); !r) return r.message();
  if (auto r = allocate(&c->d_w, c->weight.size(), 0, &c->weight); !r) return r.message();
  if (op == Op::kFused) {
    if (auto r = allocate(&c->d_res, n, guard, &c->residual); !r) return r.message();
  }
  if (op != Op::kPlainInPlace) {
    if (auto r = allocate(&c->d_out, n, guard, nullptr); !r) return r.message();  // all poison
  }

  kiln::rmsnorm::Problem& p = c->p;
  p.dtype = v.dtype;
  p.rows = rows;
  p.hidden = hidden;
  p.eps = kEps;
  p.x = c->d_x.ptr;
  p.out = op == Op::kPlainInPlace ? c->d_x.ptr : c->d_out.ptr;
  p.residual = op == Op::kFused ? c->d_res.ptr : nullptr;
  p.weight = c->d_w.ptr;
  return "";
}

// Checks a case whose run() succeeded and whose stream is synchronized against the float64
// reference; returns "" on success, else what failed.
std::string checkCase(const PreparedCase& c) {
  const Op op = c.op;
  const ref::Format f = c.f;
  const std::int64_t rows = c.rows, hidden = c.hidden;
  const std::size_t n = c.n, guard = c.guard;
  const std::vector<std::uint16_t>& x = c.x;
  std::ostringstream err;

  // Reference.
  std::vector<double> expected(n);
  std::vector<std::uint16_t> expected_residual;
  if (op == Op::kFused) {
    expected_residual.resize(n);
    ref::addRmsnorm(f, rows, hidden, kEps, x.data(), c.residual.data(), c.weight.data(),
                    expected_residual.data(), expected.data());
  } else {
    ref::rmsnorm(f, rows, hidden, kEps, x.data(), c.weight.data(), expected.data());
  }

  const std::vector<std::uint16_t> out = download(op == Op::kPlainInPlace ? c.d_x : c.d_out);
  if (out.size() != n + guard) return "download of out failed";
  describe(err, scanOutput(out, n, guard, ref::Decoder(f)), n);

  const double bound = f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  const double rel = ref::relativeL2(f, n, out.data(), expected.data());
  if (!(rel <= bound)) err << "relative L2 error " << rel << " > bound " << bound << "; ";

  if (op == Op::kFused) {
    const std::vector<std::uint16_t> got = download(c.d_res);
    std::size_t mismatched = 0;
    std::size_t first = n;
    for (std::size_t i = 0; i < n; ++i) {
      if (got[i] != expected_residual[i]) {
        if (mismatched++ == 0) first = i;
      }
    }
    const std::size_t res_guard = countChanged(got, n, n + guard);
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
    const std::vector<std::uint16_t> x_after = download(c.d_x);
    if (x_after.size() != n + guard || std::memcmp(x_after.data(), x.data(), n * 2) != 0) {
      err << "x was modified; ";
    }
  }
  std::string message = err.str();
  if (!message.empty()) message += "(rel L2 " + std::to_string(rel) + ")";
  return message;
}

// Runs one (variant, op, rows) case; returns "" on success, else what failed.
std::string runCase(const generated::VariantInfo& v, Op op, std::int64_t rows, Rng& rng,
                    cudaStream_t stream) {
  PreparedCase c;
  if (const std::string e = prepareCase(v, op, rows, rng, &c); !e.empty()) return e;
  const kiln::Status s = kiln::rmsnorm::run(c.p, nullptr, kiln::rmsnorm::workspaceSize(c.p),
                                            reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkCase(c);
}

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). On the
// main thread: per thread and variant one case (an op and a row count that vary with the thread,
// random inputs, poisoned outputs) and one non-blocking stream per thread. Then kFreshThreads
// threads with no current CUDA context and one whose current context is another context of the
// device (runOnFreshThreads) call run() at once, for every variant, in an order that makes the
// first launch of a variant race on several threads; a plain TEST runs before every
// parameterized one, so in a process of its own (--gtest_filter='*FreshThreads*') or as the
// first test of a whole run, nothing has loaded a variant before these threads do. Back on the
// main thread: every status ok, the streams synchronize, and every output matches the float64
// reference within the bounds, counted as the variant's "fresh_threads" (8 threads) and
// "fresh_threads_other_context" (1 thread) results.
TEST(RmsnormFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    kiln::rmsnorm::Problem probe;  // rows = 0 skips the pointer checks
    probe.dtype = v.dtype;
    probe.hidden = v.hidden;
    const kiln::Status s = kiln::rmsnorm::canImplement(probe, run().sm);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  // Thread t's op and row count, the same for all its variants.
  auto opOf = [](int t) { return static_cast<Op>(t % 3); };
  auto rowsOf = [](int t) { return std::int64_t{t / 3 == 0 ? 33 : t / 3 == 1 ? 257 : 7}; };
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) {
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        prepared[t][i] = std::make_unique<PreparedCase>();
        return prepareCase(generated::kVariants[i], opOf(t), rowsOf(t), rng, prepared[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        return kiln::rmsnorm::run(prepared[t][i]->p, nullptr, 0,
                                  reinterpret_cast<kiln::Stream>(stream));
      },
      [&](int t, std::size_t i) {
        const std::string failure = checkCase(*prepared[t][i]);
        return failure.empty() ? failure
                               : std::string(opName(opOf(t))) + " rows " +
                                     std::to_string(rowsOf(t)) + ": " + failure;
      });
}

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
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, opName(op));
  const std::vector<const cases::Case*> picks = casesFor(v);

  // The selector's own answer for this device (rows = 0 skips the pointer checks).
  kiln::rmsnorm::Problem probe;
  probe.dtype = v.dtype;
  probe.hidden = v.hidden;
  if (const kiln::Status s = kiln::rmsnorm::canImplement(probe, run().sm); !s.ok()) {
    counts.skipped += static_cast<int>(picks.size());
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }

  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const cases::Case* c : picks) {
    // A case at every hidden size draws what it drew when the rows were the whole case; one at a
    // single hidden size draws other inputs than the every-size case of the same rows.
    Rng rng{run().seed ^ (GetParam().index * 0x100000001b3ULL) ^
            (static_cast<std::uint64_t>(op) << 56) ^ static_cast<std::uint64_t>(c->rows) ^
            (static_cast<std::uint64_t>(c->hidden) << 32)};
    const std::string failure = runCase(v, op, c->rows, rng, stream);
    const std::string where = "rows " + std::to_string(c->rows) +
                              (c->hidden != 0 ? " (" + std::string(c->name) + ")" : "");
    counts.recordCase(failure.empty() ? failure : where + ": " + failure, "",
                      std::string(v.name) + " " + opName(op) + " x " + std::to_string(v.hidden));
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
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  kiln::rmsnorm::Problem probe;
  probe.dtype = v.dtype;
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
  good.dtype = v.dtype;
  good.rows = rows;
  good.hidden = v.hidden;
  good.eps = kEps;
  good.x = d_x.ptr;
  good.out = d_out.ptr;
  good.weight = d_w.ptr;
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
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
    const bool untouched = allPoison(out) && allPoison(res);
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

INSTANTIATE_TEST_SUITE_P(Artifact, RmsnormRunnerErrors,
                         ::testing::ValuesIn(firstVariantPerDtype(generated::kVariants)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "rmsnorm";
  f.case_key = "op";
  // shapes_rows: the rows of the cases at every hidden size; shapes_rows_hidden: [rows, hidden]
  // of the cases at one hidden size (the benchmark's), checked on the variants of that size.
  std::ostringstream every, one;
  for (const cases::Case& c : cases::kCases) {
    if ((c.readers & cases::kNumerics) == 0) continue;
    if (c.hidden == 0) {
      every << (every.tellp() > 0 ? ", " : "") << c.rows;
    } else {
      one << (one.tellp() > 0 ? ", " : "") << "[" << c.rows << ", " << c.hidden << "]";
    }
  }
  f.extra_json =
      "\"shapes_rows\": [" + every.str() + "], \"shapes_rows_hidden\": [" + one.str() + "]";
  f.bound_fp16 = kRelL2BoundFp16;
  f.bound_bf16 = kRelL2BoundBf16;
  f.artifact_tag = kiln_artifact_tag();
  f.artifact_fingerprint = kiln_artifact_fingerprint();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::gpu_test::numericsMain(argc, argv, reportFormat);
}
