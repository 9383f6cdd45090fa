// GPU numerics of the gemv group: every variant of the linked artifact (fp16, bf16) over the cases
// of kernels/gemv/tests/gpu/cases.h marked kNumerics, against kernels/gemv/reference.h: every m
// 1..8 (tokens past m are the mma's zero columns), n 1, 7, 8, 9, 33 .. 32000 (partial last
// blocks), k 8, 24, 256, 264, 2048, 6144, 8200 (fewer vectors than lanes, a ragged
// last batch), rows of x and y padded past k and n, bias on and off, y in the dtype and in
// float32, the Qwen3 test model's projections and LM head at m 1 and 8. Each case:
//   - fresh random inputs (|x| in [2^-4, 4), |w| in [2^-8, 2^-2), |bias| in [2^-4, 4), every
//     mantissa bit drawn; the seed is printed, KILN_SEED=<n> replays a run); the padding of x past
//     k is NaN (0xffff), so a column past k that reached a sum would show;
//   - y allocated for kMaxM (8) rows of ldy and a guard, all poisoned (all bits set: NaN);
//   - run() on a non-blocking stream with overlap_launch off, then (y poisoned again) on: every
//     y[i, j], i < m, j < n, within reference::tolerance of the float64 y (k's fp32 accumulation,
//     then half an ulp of the output: mantissa bits 10 fp16, 7 bf16, 0 float32), the two runs equal
//     bit for bit, and every other byte of y's buffer (the padding past n, the rows m .. 7, the
//     guard) still poison; x, w and bias unchanged.
// Beside the cases, per variant: a chain of three products, each reading the one before's y as
// its x, the second and third launched with overlap_launch (a programmatic dependent launch on
// sm_90+): each checks against the reference of what the one before wrote, so a read of x before
// the previous kernel finished would show; the same chain captured in a CUDA graph and replayed;
// the runner's errors on the device; every variant from fresh threads (issue 33). The summary
// (stdout, and JSON at $KILN_EVIDENCE_OUT) records what docs/performance-method.md asks of
// evidence; the process exits non-zero on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/dtype_format.h"
#include "common/gpu_test_support.h"
#include "gemv/reference.h"
#include "gemv/tests/gpu/cases.h"
#include "kiln/groups/gemv.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/gemv.h"
#include "kiln/runtime.h"

#if !defined(KILN_GEMV_ENABLED)
#error "the artifact has no gemv group: kiln build --gpu-arch sm_NN --kernels gemv"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::gemv::reference;
namespace generated = kiln::generated::gemv;
namespace gemv = kiln::gemv;
namespace cases = kiln::gemv::cases;

// Elements of a guard past y's kMaxM rows.
constexpr std::size_t kGuard = 64;
// Inputs larger than this are not downloaded again to check they are unchanged.
constexpr std::size_t kMaxCheckedInputBytes = std::size_t{1} << 30;
// Failures described per check, at most.
constexpr int kMaxDescribed = 5;
// Rows of y's buffer: every row an entry could write, so rows m .. 7 show a stray store.
constexpr std::size_t kYRows = static_cast<std::size_t>(gemv::kMaxM);

const ref::Decoder& decoderOf(kiln::DType dtype) {
  static const ref::Decoder fp16(ref::Format::kFloat16);
  static const ref::Decoder bf16(ref::Format::kBFloat16);
  return dtype == kiln::DType::kFloat16 ? fp16 : bf16;
}

// `count` random values of `format` with magnitudes in [2^lo, 2^(hi + 1)), drawn in parallel.
std::vector<std::uint16_t> randomValues(std::size_t count, ref::Format format, int lo, int hi,
                                        std::uint64_t seed) {
  std::vector<std::uint16_t> values(count);
  parallelFor(count, [&](std::size_t begin, std::size_t end, std::size_t part) {
    Rng rng{seed ^ (0x9e3779b97f4a7c15ULL * (part + 1))};
    for (std::size_t i = begin; i < end; ++i)
      values[i] = kiln::common::randomBits(rng, format, lo, hi);
  });
  return values;
}

// ---- one product -----------------------------------------------------------------------------

// The shape of one product (a case of cases.h, or a link of the chain).
struct Shape {
  std::int64_t m = 1, n = 1, k = 8;
  std::int64_t ldx_pad = 0, ldy_pad = 0;  // 0: ldx / ldy passed as 0 (k / n)
  bool bias = false, out_fp32 = false;
};

Shape shapeOf(const cases::Case& c) {
  return Shape{c.m, c.n, c.k, c.ldx_pad, c.ldy_pad, c.bias, c.out_fp32};
}

// One product, prepared: host inputs, device buffers (inputs uploaded; y and its guard poisoned),
// the problem run() takes, and (once computed) the float64 reference.
struct Prepared {
  kiln::DType dtype = kiln::DType::kBFloat16;
  Shape shape;
  std::int64_t ldx = 0, ldy = 0;  // resolved
  std::vector<std::uint16_t> x;   // [m, ldx]: NaN past k
  std::vector<std::uint16_t> w;   // [n, k]
  std::vector<std::uint16_t> bias;
  DeviceBuffer d_x, d_w, d_bias, d_y;
  gemv::GemvProblem problem;
  ref::Result want;  // [m, n]

  std::size_t yElementBytes() const { return shape.out_fp32 ? 4 : 2; }
  std::size_t yBytes() const {
    return (kYRows * static_cast<std::size_t>(ldy) + kGuard) * yElementBytes();
  }
};

// Draws the inputs of `shape` and uploads them. x_device (not null): x is that device buffer (the
// y of the product before, [m, ldx] with ldx = that product's ldy), whose host copy is filled by
// takeX() after it ran; else x is drawn here.
std::string prepare(kiln::DType dtype, const Shape& shape, Rng& rng, Prepared* c,
                    const void* x_device = nullptr, std::int64_t x_ld = 0) {
  c->dtype = dtype;
  c->shape = shape;
  const ref::Format f = formatOf(dtype);
  const auto m = static_cast<std::size_t>(shape.m);
  const auto n = static_cast<std::size_t>(shape.n);
  const auto k = static_cast<std::size_t>(shape.k);
  c->ldx = x_device != nullptr ? x_ld : shape.k + shape.ldx_pad;
  c->ldy = shape.n + shape.ldy_pad;
  const auto ldx = static_cast<std::size_t>(c->ldx);
  if (x_device == nullptr) {
    const std::vector<std::uint16_t> values = randomValues(m * k, f, -4, 1, rng.next());
    c->x.assign(m * ldx, kPoison);
    for (std::size_t i = 0; i < m; ++i) {
      std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(i * k), k,
                  c->x.begin() + static_cast<std::ptrdiff_t>(i * ldx));
    }
    if (const std::string e = uploadVector(&c->d_x, c->x); !e.empty()) return "x: " + e;
  }
  c->w = randomValues(n * k, f, -8, -3, rng.next());
  if (shape.bias) c->bias = randomValues(n, f, -4, 1, rng.next());
  for (const std::string& e :
       {uploadVector(&c->d_w, c->w), shape.bias ? uploadVector(&c->d_bias, c->bias) : "",
        allocate(&c->d_y, c->yBytes(), nullptr, 0)}) {
    if (!e.empty()) return e;
  }
  gemv::GemvProblem& p = c->problem;
  p.dtype = dtype;
  p.out_dtype = shape.out_fp32 ? kiln::DType::kFloat32 : dtype;
  p.m = shape.m;
  p.n = shape.n;
  p.k = shape.k;
  p.ldx = x_device != nullptr || shape.ldx_pad != 0 ? c->ldx : 0;
  p.ldy = shape.ldy_pad != 0 ? c->ldy : 0;
  p.x = x_device != nullptr ? x_device : c->d_x.ptr;
  p.w = c->d_w.ptr;
  p.bias = shape.bias ? c->d_bias.ptr : nullptr;
  p.y = c->d_y.ptr;
  return "";
}

// The float64 reference of c's host inputs, in parallel parts of the rows of w.
void computeReference(Prepared* c) {
  const Shape& s = c->shape;
  const auto m = static_cast<std::size_t>(s.m);
  const auto n = static_cast<std::size_t>(s.n);
  c->want.y.assign(m * n, 0.0);
  c->want.scale.assign(m * n, 0.0);
  // Parts of at least 64 rows: each builds its own decoding table.
  parallelFor((n + 63) / 64, [&](std::size_t begin, std::size_t end, std::size_t) {
    const std::size_t j0 = begin * 64, j1 = std::min(n, end * 64);
    const ref::Result r = ref::gemv(
        formatOf(c->dtype), s.m, static_cast<std::int64_t>(j1 - j0), s.k, c->ldx, c->x.data(),
        c->w.data() + j0 * static_cast<std::size_t>(s.k), s.bias ? c->bias.data() + j0 : nullptr);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = j0; j < j1; ++j) {
        c->want.y[i * n + j] = r.y[i * (j1 - j0) + (j - j0)];
        c->want.scale[i * n + j] = r.scale[i * (j1 - j0) + (j - j0)];
      }
    }
  });
}

// x's host copy from the device y of the product before (`before`, whose ldy is c's ldx): its
// first m rows; the padding of each row past k stays as the device holds it (poison).
std::string takeX(const Prepared& before, Prepared* c) {
  const std::vector<std::uint16_t> y = download<std::uint16_t>(before.d_y);
  const std::size_t elements = static_cast<std::size_t>(c->shape.m * c->ldx);
  if (y.size() < elements) return "download of the previous y failed";
  c->x.assign(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(elements));
  return "";
}

kiln::Status runPrepared(const Prepared& c, cudaStream_t stream, bool overlap) {
  gemv::GemvProblem p = c.problem;
  p.overlap_launch = overlap;
  return gemv::run(p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
}

// "" or "<what> was modified; " for an input buffer whose device copy differs from the host's.
std::string unchanged(const char* what, const DeviceBuffer& d,
                      const std::vector<std::uint16_t>& host) {
  const std::size_t bytes = host.size() * 2;
  if (bytes == 0 || bytes > kMaxCheckedInputBytes) return "";
  const std::vector<unsigned char> after = download<unsigned char>(d);
  if (after.size() < bytes || std::memcmp(after.data(), host.data(), bytes) != 0) {
    return std::string(what) + " was modified; ";
  }
  return "";
}

// The value of y's element `index` (a float32 or a 16-bit pattern of c's dtype).
double yValue(const Prepared& c, const std::vector<unsigned char>& y, std::size_t index) {
  if (c.shape.out_fp32) {
    float v;
    std::memcpy(&v, y.data() + 4 * index, 4);
    return static_cast<double>(v);
  }
  std::uint16_t b;
  std::memcpy(&b, y.data() + 2 * index, 2);
  return decoderOf(c.dtype)(b);
}

struct Checked {
  std::string failure;           // "" when every check passed
  double worst = 0.0;            // the largest |y - exact| / tolerance
  std::vector<unsigned char> y;  // the downloaded buffer
};

// Checks c's y on the device against c.want: every y[i, j] (i < m, j < n) within the tolerance,
// every other byte of the buffer still poison.
Checked checkY(const Prepared& c) {
  Checked out;
  out.y = download<unsigned char>(c.d_y);
  if (out.y.size() < c.yBytes()) {
    out.failure = "download of y failed";
    return out;
  }
  const Shape& s = c.shape;
  const auto m = static_cast<std::size_t>(s.m);
  const auto n = static_cast<std::size_t>(s.n);
  const auto ldy = static_cast<std::size_t>(c.ldy);
  const std::size_t elt = c.yElementBytes();
  const int bits = s.out_fp32 ? 0 : c.dtype == kiln::DType::kFloat16 ? 10 : 7;
  std::vector<std::size_t> failures(64, 0);
  std::vector<double> worst(64, 0.0);
  std::vector<std::string> notes(64);
  parallelFor(m * n, [&](std::size_t begin, std::size_t end, std::size_t part) {
    std::ostringstream note;
    int described = 0;
    for (std::size_t e = begin; e < end; ++e) {
      const std::size_t i = e / n, j = e % n;
      const double got = yValue(c, out.y, i * ldy + j);
      const double exact = c.want.y[e];
      const double bound = ref::tolerance(s.k, c.want.scale[e], exact, bits);
      const double error = std::fabs(got - exact);
      if (error <= bound) {  // false for a NaN (an unwritten poison)
        if (bound > 0.0) worst[part] = std::max(worst[part], error / bound);
        continue;
      }
      ++failures[part];
      if (described++ < kMaxDescribed) {
        note << "y[" << i << ", " << j << "] = " << got << ", want " << exact << " (bound " << bound
             << "); ";
      }
    }
    notes[part] = note.str();
  });
  std::ostringstream err;
  std::size_t total = 0;
  for (std::size_t part = 0; part < failures.size(); ++part) {
    total += failures[part];
    if (failures[part]) err << notes[part];
    out.worst = std::max(out.worst, worst[part]);
  }
  if (total) err << total << " of " << m * n << " outputs outside the bound; ";
  // Every byte that is not one of the m x n outputs: the padding past n, rows m .. 7, the guard.
  std::size_t touched = 0, first = 0;
  for (std::size_t b = 0; b < out.y.size(); ++b) {
    const std::size_t e = b / elt;
    const bool output = e < m * ldy && e % ldy < n;
    if (output || out.y[b] == 0xff) continue;
    if (touched++ == 0) first = e;
  }
  if (touched) {
    err << touched << " bytes outside the m x n outputs written (first at element " << first
        << ": row " << first / ldy << ", column " << first % ldy << "); ";
  }
  out.failure = err.str();
  return out;
}

// x (when c drew it), w and bias as uploaded.
std::string inputsUnchanged(const Prepared& c) {
  std::string err;
  if (c.d_x.ptr != nullptr) err += unchanged("x", c.d_x, c.x);
  err += unchanged("w", c.d_w, c.w);
  if (c.shape.bias) err += unchanged("bias", c.d_bias, c.bias);
  return err;
}

// Poisons c's y (all bits set) on `stream`.
std::string poisonY(const Prepared& c, cudaStream_t stream) {
  if (cudaMemsetAsync(c.d_y.ptr, 0xff, c.d_y.bytes, stream) != cudaSuccess) {
    return "cudaMemsetAsync of y failed";
  }
  return "";
}

std::string synchronize(cudaStream_t stream) {
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return "";
}

std::string formatWorst(double worst) {
  std::ostringstream s;
  s.precision(3);
  s << worst;
  return s.str();
}

// One case: overlap_launch off, then on (y poisoned between); both checked, equal bit for bit.
// Returns "" on success (and the largest error / bound in *note), else what failed.
std::string runCase(kiln::DType dtype, const cases::Case& spec, Rng& rng, cudaStream_t stream,
                    std::string* note) {
  Prepared c;
  if (const std::string e = prepare(dtype, shapeOf(spec), rng, &c); !e.empty()) return e;
  computeReference(&c);
  std::vector<unsigned char> first;
  double worst = 0.0;
  for (bool overlap : {false, true}) {
    const char* label = overlap ? "overlap_launch on: " : "overlap_launch off: ";
    if (overlap) {
      if (const std::string e = poisonY(c, stream); !e.empty()) return e;
    }
    const kiln::Status s = runPrepared(c, stream, overlap);
    if (!s.ok()) return label + ("run: " + s.toString());
    if (const std::string e = synchronize(stream); !e.empty()) return label + e;
    Checked checked = checkY(c);
    if (!checked.failure.empty()) return label + checked.failure;
    worst = std::max(worst, checked.worst);
    if (!overlap) {
      first = std::move(checked.y);
    } else if (checked.y != first) {
      return "overlap_launch on and off differ; ";
    }
  }
  if (const std::string e = inputsUnchanged(c); !e.empty()) return e;
  *note = "max |error| / bound " + formatWorst(worst);
  return "";
}

// The selector's own answer for a variant on this device (m = 0 skips the other checks).
kiln::Status deviceVerdict(const generated::VariantInfo& v) {
  gemv::GemvProblem probe;
  probe.dtype = v.dtype;
  probe.out_dtype = v.dtype;
  return gemv::canImplement(probe, run().sm);
}

const std::vector<const cases::Case*>& numericsCases() {
  static const std::vector<const cases::Case*> picks = [] {
    std::vector<const cases::Case*> all;
    for (const cases::Case& c : cases::kCases) {
      if ((c.readers & cases::kNumerics) != 0) all.push_back(&c);
    }
    return all;
  }();
  return picks;
}

const cases::Case* caseNamed(const char* name) {
  for (const cases::Case& c : cases::kCases) {
    if (std::string(c.name) == name) return &c;
  }
  return nullptr;
}

// The small case the fresh threads and the runner errors run.
constexpr const char kSmallCase[] = "m5_n2053_k264";

// ---- the chain: three products, each reading the y before as its x -------------------------

// A: x0 [4, 16384] . w [2048, 16384]^T, an ordinary launch long enough (64 MiB of weights) for the
// next one to start beside it; B: A's y (ldy 2056, NaN past 2048) . w [4096, 2048]^T + bias,
// overlap_launch; C: B's y (ldy 4104) . w [1000, 4096]^T into float32, overlap_launch. B and C wait
// for the kernel before on the device before they read x; they read their weights before.
constexpr int kChainLinks = 3;
const Shape kChain[kChainLinks] = {
    {.m = 4, .n = 2048, .k = 16384, .ldx_pad = 0, .ldy_pad = 8},
    {.m = 4, .n = 4096, .k = 2048, .ldx_pad = 0, .ldy_pad = 8, .bias = true},
    {.m = 4, .n = 1000, .k = 4096, .ldx_pad = 0, .ldy_pad = 0, .out_fp32 = true},
};

struct Chain {
  Prepared link[kChainLinks];
};

std::string prepareChain(kiln::DType dtype, Rng& rng, Chain* chain) {
  for (int l = 0; l < kChainLinks; ++l) {
    Prepared* before = l > 0 ? &chain->link[l - 1] : nullptr;
    const std::string e =
        prepare(dtype, kChain[l], rng, &chain->link[l],
                before != nullptr ? before->d_y.ptr : nullptr, before != nullptr ? before->ldy : 0);
    if (!e.empty()) return "link " + std::to_string(l) + ": " + e;
  }
  return "";
}

// Every link after the first with overlap_launch, on `stream` (capturable: no synchronization).
kiln::Status launchChain(const Chain& chain, cudaStream_t stream) {
  for (int l = 0; l < kChainLinks; ++l) {
    const kiln::Status s = runPrepared(chain.link[l], stream, l > 0);
    if (!s.ok()) return s;
  }
  return kiln::Status::Ok();
}

// After the chain ran: each link against the reference of the x it read (the first's drawn, the
// others' the y before as the device holds it).
std::string checkChain(Chain* chain, double* worst) {
  std::string failure;
  for (int l = 0; l < kChainLinks; ++l) {
    Prepared& c = chain->link[l];
    if (l > 0) {
      if (const std::string e = takeX(chain->link[l - 1], &c); !e.empty()) return e;
    }
    computeReference(&c);
    const Checked checked = checkY(c);
    if (!checked.failure.empty()) failure += "link " + std::to_string(l) + ": " + checked.failure;
    *worst = std::max(*worst, checked.worst);
    failure += inputsUnchanged(c);
  }
  return failure;
}

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). On the
// main thread: per thread and variant the small case, with random inputs and a poisoned y, and
// one non-blocking stream per thread. Then kFreshThreads threads with no current CUDA context and
// one whose current context is another context of the device (runOnFreshThreads) call run() for
// it, for every variant, in an order that makes the first launch of a variant race on several
// threads; odd threads with overlap_launch (cuLaunchKernelEx on sm_90+). A plain TEST runs before
// every parameterized one, so in a process of its own (--gtest_filter='*FreshThreads*') or first
// in a whole run, nothing has loaded a variant before these threads. Back on the main thread:
// every status ok, the streams synchronize, every output checks out, counted as the variant's
// "fresh_threads" and "fresh_threads_other_context" results.
TEST(GemvFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    const kiln::Status s = deviceVerdict(v);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  const cases::Case* spec = caseNamed(kSmallCase);
  ASSERT_NE(spec, nullptr) << kSmallCase;
  std::vector<std::vector<std::unique_ptr<Prepared>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) -> std::string {
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        prepared[t][i] = std::make_unique<Prepared>();
        const std::string e =
            prepare(generated::kVariants[i].dtype, shapeOf(*spec), rng, prepared[t][i].get());
        if (!e.empty()) return e;
        computeReference(prepared[t][i].get());
        return "";
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        return runPrepared(*prepared[t][i], stream, t % 2 == 1);
      },
      [&](int t, std::size_t i) {
        return checkY(*prepared[t][i]).failure + inputsUnchanged(*prepared[t][i]);
      });
}

struct VariantCase {
  std::size_t variant;
  std::size_t spec;
};

std::vector<VariantCase> allCases() {
  std::vector<VariantCase> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
    for (std::size_t c = 0; c < numericsCases().size(); ++c) all.push_back({i, c});
  }
  return all;
}

class GemvNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(GemvNumerics, MatchesTheReference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *numericsCases()[GetParam().spec];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, spec.name);
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec) << 48)};
  std::string note;
  const std::string failure = runCase(v.dtype, spec, rng, stream, &note);
  counts.recordCase(failure, note, std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GemvNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + numericsCases()[param_info.param.spec]->name;
                         });

std::vector<std::size_t> everyVariant() {
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) all.push_back(i);
  return all;
}

std::string variantName(const ::testing::TestParamInfo<std::size_t>& param_info) {
  return std::string(generated::kVariants[param_info.param].name);
}

// Per variant: the chain launched directly on a non-blocking stream; every link checks out
// against the reference of the x it read.
class GemvOverlapChain : public ::testing::TestWithParam<std::size_t> {};

TEST_P(GemvOverlapChain, DependentLaunchesReadWhatTheKernelBeforeWrote) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "overlap_chain");
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ 0x510e527fade682d1ULL ^ GetParam()};
  auto chain = std::make_unique<Chain>();
  std::string failure = prepareChain(v.dtype, rng, chain.get());
  double worst = 0.0;
  if (failure.empty()) {
    const kiln::Status s = launchChain(*chain, stream);
    failure = s.ok() ? synchronize(stream) : "run: " + s.toString();
  }
  if (failure.empty()) failure = checkChain(chain.get(), &worst);
  counts.recordCase(failure, "max |error| / bound " + formatWorst(worst),
                    std::string(v.name) + " overlap_chain");
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GemvOverlapChain, ::testing::ValuesIn(everyVariant()),
                         variantName);

// Per variant: the chain captured into one CUDA graph on a non-blocking stream after a first run
// loaded the variant (its two dependent launches become programmatic edges on sm_90+), the ys
// poisoned again, the graph launched twice: every link checks out, as from the direct run.
class GemvGraph : public ::testing::TestWithParam<std::size_t> {};

TEST_P(GemvGraph, CapturedChainReplays) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "cuda_graph");
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ 0x6a09e667f3bcc908ULL ^ GetParam()};
  auto chain = std::make_unique<Chain>();
  ASSERT_EQ(prepareChain(v.dtype, rng, chain.get()), "");
  std::string failure;
  if (const kiln::Status s = launchChain(*chain, stream); !s.ok()) {  // loads: not capturable
    failure = "first run: " + s.toString();
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  for (const Prepared& c : chain->link) CUDA_OK(cudaMemset(c.d_y.ptr, 0xff, c.d_y.bytes));
  CUDA_OK(cudaDeviceSynchronize());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (failure.empty()) {
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const kiln::Status s = launchChain(*chain, stream);
    if (!s.ok()) failure = "captured run: " + s.toString();
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
  }
  double worst = 0.0;
  if (failure.empty()) {
    std::size_t nodes = 0;
    CUDA_OK(cudaGraphGetNodes(graph, nullptr, &nodes));
    if (nodes != kChainLinks) {
      failure = "the graph has " + std::to_string(nodes) + " nodes, not 3; ";
    }
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    failure += checkChain(chain.get(), &worst);
  }
  counts.recordCase(failure, "max |error| / bound " + formatWorst(worst),
                    std::string(v.name) + " cuda_graph");
  if (exec != nullptr) CUDA_OK(cudaGraphExecDestroy(exec));
  if (graph != nullptr) CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GemvGraph, ::testing::ValuesIn(everyVariant()), variantName);

// Runner errors on the device, per variant: bad problems are refused naming what is wrong and
// touch nothing; m == 0 is a no-op; the admitted problem runs and checks out, and canImplement
// agrees.
class GemvRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(GemvRunnerErrors, RefusesBadProblemsAndTreatsZeroRowsAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    counts.skipped += 9;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const cases::Case* spec = caseNamed(kSmallCase);
  ASSERT_NE(spec, nullptr) << kSmallCase;
  Rng rng{run().seed ^ 0x5eedULL ^ GetParam()};
  Prepared c;
  ASSERT_EQ(prepare(v.dtype, shapeOf(*spec), rng, &c), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto untouched = [&]() {
    const std::vector<unsigned char> y = download<unsigned char>(c.d_y);
    return !y.empty() && std::all_of(y.begin(), y.end(), [](unsigned char b) { return b == 0xff; });
  };
  auto refused = [](const kiln::Status& s, const std::string& part) {
    return s.code() == kiln::StatusCode::kInvalidArgument &&
           s.message().find(part) != std::string::npos;
  };
  auto attempt = [&](void (*change)(gemv::GemvProblem&, const Prepared&), const char* part,
                     const char* what) {
    gemv::GemvProblem p = c.problem;
    change(p, c);
    const kiln::Status s = gemv::run(p, nullptr, 0, kstream);
    const kiln::Status can = gemv::canImplement(p, run().sm);
    record(refused(s, part) && can.code() == s.code() && can.message() == s.message(),
           std::string(what) + ": " + s.toString() + " (canImplement: " + can.toString() + ")");
  };

  attempt([](gemv::GemvProblem& p, const Prepared&) { p.m = 9; }, "m 9 exceeds the limit 8", "m 9");
  attempt([](gemv::GemvProblem& p, const Prepared&) { p.k = 268; }, "k 268 is not a multiple of 8",
          "k 268");
  attempt(
      [](gemv::GemvProblem& p, const Prepared& prepared) {
        p.x = static_cast<const unsigned char*>(prepared.d_x.ptr) + 2;
      },
      "pointer x", "x off a 16-byte boundary");
  attempt([](gemv::GemvProblem& p,
             const Prepared& prepared) { p.y = const_cast<void*>(prepared.d_x.ptr); },
          "overlaps x", "y in place of x");
  attempt(
      [](gemv::GemvProblem& p, const Prepared&) {
        p.out_dtype =
            p.dtype == kiln::DType::kFloat16 ? kiln::DType::kBFloat16 : kiln::DType::kFloat16;
      },
      "out_dtype", "the other 16-bit output dtype");
  attempt([](gemv::GemvProblem& p, const Prepared&) { p.ldy = p.n - 1; }, "is less than n",
          "ldy below n");
  {  // m = 0: ok, nothing written (whatever else the problem says)
    gemv::GemvProblem p = c.problem;
    p.m = 0;
    p.k = 3;
    const kiln::Status s = gemv::run(p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s.ok() && untouched(), "m 0: " + s.toString());
  }
  record(untouched(), "a refused problem wrote y");
  {  // the admitted problem runs (and canImplement agrees) and checks out
    computeReference(&c);
    const kiln::Status can = gemv::canImplement(c.problem, run().sm);
    const kiln::Status s = runPrepared(c, stream, true);
    std::string failure = can.ok() && s.ok()
                              ? synchronize(stream)
                              : "canImplement " + can.toString() + ", run " + s.toString();
    if (failure.empty()) failure = checkY(c).failure;
    record(failure.empty(), "valid problem: " + failure);
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, GemvRunnerErrors, ::testing::ValuesIn(everyVariant()),
                         variantName);

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "gemv";
  f.case_key = "case";
  f.per_variant_totals = true;
  std::ostringstream json;
  json << "\"rules\": {\"y\": \"|y - exact| <= reference::tolerance(k, scale, exact, bits): "
          "(k / 256 + 38) 2^-24 scale, and for a 16-bit y half an ulp (bits 10 fp16, 7 bf16)\", "
          "\"untouched\": \"every byte of y past n, rows m..7 and a guard still poison\", "
          "\"overlap\": \"overlap_launch on equals off bit for bit\"}, \"cases\": [";
  for (std::size_t i = 0; i < numericsCases().size(); ++i) {
    const cases::Case& c = *numericsCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"m\": " << c.m
         << ", \"n\": " << c.n << ", \"k\": " << c.k << ", \"ldx\": " << c.k + c.ldx_pad
         << ", \"ldy\": " << c.n + c.ldy_pad << ", \"bias\": " << (c.bias ? "true" : "false")
         << ", \"out\": \"" << (c.out_fp32 ? "fp32" : "dtype") << "\"}";
  }
  json << "]";
  f.extra_json = json.str();
  // Not relative L2 bounds: the rule above is per element (the JSON's "rules").
  f.bound_fp16 = 0.0;
  f.bound_bf16 = 0.0;
  f.artifact_tag = kiln_artifact_tag();
  f.artifact_fingerprint = kiln_artifact_fingerprint();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  return kiln::gpu_test::numericsMain(argc, argv, reportFormat);
}
