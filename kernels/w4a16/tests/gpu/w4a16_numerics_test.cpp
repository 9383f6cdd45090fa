// GPU numerics of the w4a16 group: every weight form of the linked artifact (dtype x symmetric /
// zero-point), over the cases of kernels/w4a16/tests/gpu/cases.h marked kNumerics, end to end as a
// runtime uses it: a random int4 matrix written as a GPTQ or an AWQ checkpoint (alternating by
// case), repack() on the device (checked bit for bit against the host's repackHost), then run()
// checked against the float64 reference of kernels/w4a16/reference.h. The selector picks the tile
// by m, so the cases' m values (1 .. 5000) reach every tile; results are named by that variant.
//
// Each case: fresh random inputs (the seed is printed; KILN_SEED=<n> replays a run), outputs and
// a guard row past y poisoned with 0xffff (NaN in fp16 and bf16), the workspace workspaceSize()
// asks for, run() on a non-default stream, then: status ok, every output written and finite, the
// guard untouched, relative L2 error within the bound of docs/performance-method.md over every
// output (or, past cases.h's kFullReferenceMacs, over kSampledOutputs outputs spread over y).
// Runner errors are checked on the device too, and a FreshThreads test runs every variant from
// threads with no current context. The summary (stdout, and JSON at $KILN_EVIDENCE_OUT) records
// what docs/performance-method.md asks of evidence; the process exits non-zero on any failure.
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
#include "kiln/groups/w4a16.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/w4a16.h"
#include "kiln/runtime.h"
#include "w4a16/reference.h"
#include "w4a16/tests/gpu/cases.h"

#if !defined(KILN_W4A16_ENABLED)
#error "the artifact has no w4a16 group: kiln build --gpu-arch sm_NN --kernels w4a16"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::w4a16::reference;
namespace generated = kiln::generated::w4a16;
namespace cases = kiln::w4a16::cases;
using kiln::w4a16::SourceFormat;

// Error bounds: kRelL2BoundFp16 / Bf16 (gpu_test_support.h, docs/performance-method.md, Method 2).
// Beside the output's own rounding, the kernel rounds each dequantized weight (q - z) * s once to
// the dtype (the mma's inputs), an error of the same size and independent across K: together
// ~sqrt(2) u / sqrt(3) of relative L2, well inside the bounds (0.4e-3 fp16, 3.2e-3 bf16).

// A weight form of the artifact: what a checkpoint fixes (dtype, group size, zero points).
struct Form {
  kiln::DType dtype;
  int group_size;
  bool zero_point;
};

std::vector<Form> allForms() {
  std::vector<Form> forms;
  for (const auto& v : generated::kVariants) {
    bool seen = false;
    for (const Form& f : forms) {
      seen = seen ||
             (f.dtype == v.dtype && f.group_size == v.group_size && f.zero_point == v.zero_point);
    }
    if (!seen) forms.push_back({v.dtype, v.group_size, v.zero_point});
  }
  return forms;
}

// The variant run() uses for `m` tokens of `form` (the selector's rule, kiln/runners/w4a16.h: the
// smallest built tile_m >= m, else the largest): results are counted under its name.
const generated::VariantInfo* variantFor(const Form& form, std::int64_t m) {
  const generated::VariantInfo* fit = nullptr;
  const generated::VariantInfo* largest = nullptr;
  for (const auto& v : generated::kVariants) {
    if (v.dtype != form.dtype || v.group_size != form.group_size ||
        v.zero_point != form.zero_point) {
      continue;
    }
    if (largest == nullptr || v.tile_m > largest->tile_m) largest = &v;
    if (v.tile_m >= m && (fit == nullptr || v.tile_m < fit->tile_m)) fit = &v;
  }
  return fit != nullptr ? fit : largest;
}

// ---- one case ----------------------------------------------------------------------------------

struct Shape {
  std::int64_t m = 0, n = 0, k = 0;
  bool bias = false;
  int splits = 0;
};

// One case, prepared: the host matrix and its expected packed form, the device buffers (the
// checkpoint uploaded and repacked, x and bias uploaded, y and its guard poisoned, the
// workspace) and the problem run() takes.
struct PreparedCase {
  Form form{};
  ref::Format f = ref::Format::kBFloat16;
  SourceFormat source = SourceFormat::kGptq;
  Shape shape;
  ref::Quantized w;
  ref::Packed expected;
  std::vector<std::uint16_t> x, bias;
  DeviceBuffer d_qweight, d_qzeros, d_src_scales, d_weight, d_scales, d_zeros;
  DeviceBuffer d_x, d_bias, d_y, d_workspace;
  std::size_t workspace_bytes = 0;
  kiln::w4a16::Problem p;
};

// Compares a downloaded buffer with what the host expects, bit for bit.
template <typename T>
std::string compareBits(const char* what, const DeviceBuffer& b, const std::vector<T>& expect) {
  const std::vector<T> got = download<T>(b);
  if (got.size() < expect.size()) return std::string("download of ") + what + " failed; ";
  std::size_t mismatched = 0, first = 0;
  for (std::size_t i = 0; i < expect.size(); ++i) {
    if (got[i] != expect[i] && mismatched++ == 0) first = i;
  }
  if (mismatched == 0) return "";
  std::ostringstream err;
  err << "repack: " << mismatched << " of " << expect.size() << " " << what
      << " differ from repackHost, first at " << first << " (got 0x" << std::hex
      << static_cast<std::uint64_t>(got[first]) << ", want 0x"
      << static_cast<std::uint64_t>(expect[first]) << std::dec << "); ";
  return err.str();
}

// Draws the case's matrix and inputs, writes the checkpoint, repacks it on `stream` (and checks
// the result bit for bit), and prepares run()'s problem; returns "" on success, else what failed.
std::string prepareCase(const Form& form, const Shape& s, SourceFormat source, Rng& rng,
                        cudaStream_t stream, PreparedCase* c) {
  const ref::Format f = formatOf(form.dtype);
  c->form = form;
  c->f = f;
  c->source = source;
  c->shape = s;
  ref::Quantized& w = c->w;
  w.n = s.n;
  w.k = s.k;
  w.group = form.group_size;
  w.scale_format = ref::Format::kFloat16;  // what GPTQ and AWQ checkpoints hold
  w.q.resize(static_cast<std::size_t>(s.n * s.k));
  for (auto& q : w.q) q = static_cast<std::uint8_t>(rng.below(16));
  w.scales.resize(static_cast<std::size_t>(w.groups() * s.n));
  for (auto& v : w.scales) v = randomBits(rng, ref::Format::kFloat16, -9, -6, false);
  if (form.zero_point) {
    // 1..15: a zero point both checkpoint formats hold (GPTQ stores z - 1, AWQ z).
    w.zeros.resize(static_cast<std::size_t>(w.groups() * s.n));
    for (auto& z : w.zeros) z = static_cast<std::uint8_t>(1 + rng.below(15));
  }
  c->expected = ref::repackHost(w, f);
  const ref::Checkpoint ckpt = source == SourceFormat::kGptq ? ref::packGptq(w) : ref::packAwq(w);

  c->x.resize(static_cast<std::size_t>(s.m * s.k));
  for (auto& v : c->x) v = randomBits(rng, f, -3, 0, true);
  if (s.bias) {
    c->bias.resize(static_cast<std::size_t>(s.n));
    for (auto& v : c->bias) v = randomBits(rng, f, -4, -1, true);
  }

  std::string e;
  if (!(e = uploadVector(&c->d_qweight, ckpt.qweight)).empty()) return e;
  if (!ckpt.qzeros.empty() && !(e = uploadVector(&c->d_qzeros, ckpt.qzeros)).empty()) return e;
  if (!(e = uploadVector(&c->d_src_scales, w.scales)).empty()) return e;
  const std::size_t scale_count = static_cast<std::size_t>(w.groups() * s.n);
  if (!(e = allocate(&c->d_weight, c->expected.weight.size() * 4, nullptr, 0)).empty()) return e;
  if (!(e = allocate(&c->d_scales, scale_count * 2, nullptr, 0)).empty()) return e;
  if (form.zero_point && !(e = allocate(&c->d_zeros, scale_count * 2, nullptr, 0)).empty()) {
    return e;
  }
  if (auto r = allocate(&c->d_x, c->x.size(), 0, &c->x); !r) return r.message();
  if (s.bias) {
    if (auto r = allocate(&c->d_bias, c->bias.size(), 0, &c->bias); !r) return r.message();
  }
  const std::size_t outputs = static_cast<std::size_t>(s.m * s.n);
  if (auto r = allocate(&c->d_y, outputs, static_cast<std::size_t>(s.n), nullptr); !r) {
    return r.message();
  }

  kiln::w4a16::RepackProblem rp;
  rp.format = source;
  rp.dtype = form.dtype;
  rp.scales_dtype = kiln::DType::kFloat16;
  rp.n = s.n;
  rp.k = s.k;
  rp.group_size = form.group_size;
  rp.qweight = c->d_qweight.ptr;
  rp.qzeros = form.zero_point ? c->d_qzeros.ptr : nullptr;
  rp.src_scales = c->d_src_scales.ptr;
  rp.weight = c->d_weight.ptr;
  rp.scales = c->d_scales.ptr;
  rp.zeros = form.zero_point ? c->d_zeros.ptr : nullptr;
  if (const kiln::Status st = kiln::w4a16::repack(rp, reinterpret_cast<kiln::Stream>(stream));
      !st.ok()) {
    return "repack: " + st.toString();
  }
  if (const cudaError_t ce = cudaStreamSynchronize(stream); ce != cudaSuccess) {
    return std::string("repack kernel: ") + cudaGetErrorString(ce);
  }
  e = compareBits("weight words", c->d_weight, c->expected.weight) +
      compareBits("scales", c->d_scales, c->expected.scales) +
      (form.zero_point ? compareBits("zeros", c->d_zeros, c->expected.zeros) : "");
  if (!e.empty()) return e;

  kiln::w4a16::Problem& p = c->p;
  p.dtype = form.dtype;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.group_size = form.group_size;
  p.x = c->d_x.ptr;
  p.weight = c->d_weight.ptr;
  p.scales = c->d_scales.ptr;
  p.zeros = form.zero_point ? c->d_zeros.ptr : nullptr;
  p.bias = s.bias ? c->d_bias.ptr : nullptr;
  p.y = c->d_y.ptr;
  p.splits = s.splits;
  c->workspace_bytes = kiln::w4a16::workspaceSize(p);
  if (c->workspace_bytes > 0 &&
      !(e = allocate(&c->d_workspace, c->workspace_bytes, nullptr, 0)).empty()) {
    return e;
  }
  return "";
}

// Checks a case whose run() succeeded and whose stream is synchronized; returns "" on success,
// else what failed.
std::string checkCase(const PreparedCase& c) {
  const Shape& s = c.shape;
  const std::size_t outputs = static_cast<std::size_t>(s.m * s.n);
  std::ostringstream err;
  const std::vector<std::uint16_t> y = download(c.d_y);
  if (y.size() < outputs + static_cast<std::size_t>(s.n)) return "download of y failed";
  const ref::Decoder dec(c.f);
  describe(err, scanOutput(y, outputs, static_cast<std::size_t>(s.n), dec), outputs);

  const std::vector<double> w = ref::dequantPacked(c.expected, c.f, s.n, s.k, c.w.group);
  const std::uint16_t* bias = s.bias ? c.bias.data() : nullptr;
  double diff = 0.0, norm = 0.0;
  auto accumulate = [&](std::int64_t r, std::int64_t col) {
    const double want =
        ref::linearAt(dec, s.k, c.x.data() + r * s.k, w.data() + col * s.k, bias, col);
    const double got = dec(y[static_cast<std::size_t>(r * s.n + col)]);
    diff += (got - want) * (got - want);
    norm += want * want;
  };
  const bool full = s.m * s.n * s.k <= cases::kFullReferenceMacs;
  if (full) {
    for (std::int64_t r = 0; r < s.m; ++r) {
      for (std::int64_t col = 0; col < s.n; ++col) accumulate(r, col);
    }
  } else {
    Rng pick{static_cast<std::uint64_t>(s.m * 1000003 + s.n * 7919 + s.k)};
    for (int i = 0; i < cases::kSampledOutputs; ++i) {
      accumulate(static_cast<std::int64_t>(pick.next() % static_cast<std::uint64_t>(s.m)),
                 static_cast<std::int64_t>(pick.next() % static_cast<std::uint64_t>(s.n)));
    }
  }
  const double rel = norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  const double bound = c.f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  if (!(rel <= bound)) err << "relative L2 error " << rel << " > bound " << bound << "; ";
  std::string message = err.str();
  if (!message.empty()) {
    message += "(rel L2 " + std::to_string(rel) + (full ? ", every output)" : ", sampled)");
  }
  return message;
}

kiln::Status runPrepared(const PreparedCase& c, cudaStream_t stream) {
  return kiln::w4a16::run(c.p, c.d_workspace.ptr, c.workspace_bytes,
                          reinterpret_cast<kiln::Stream>(stream));
}

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md, and the
// rmsnorm test's comment). Thread t's case of a variant takes m = the variant's tile_m (so that
// the selector picks that variant), n 256, K 1024 + 128 t, a bias on odd threads, a GPTQ or AWQ
// checkpoint by thread.
TEST(W4a16FreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    kiln::w4a16::Problem probe;  // m = 0 skips the pointer checks
    probe.dtype = v.dtype;
    probe.n = 256;
    probe.k = 1024;
    probe.group_size = v.group_size;
    probe.zeros = v.zero_point ? &probe : nullptr;  // only its nullness is read when m = 0
    const kiln::Status s = kiln::w4a16::canImplement(probe, run().sm);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  cudaStream_t prep = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&prep, cudaStreamNonBlocking));
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) {
        const auto& v = generated::kVariants[i];
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        prepared[t][i] = std::make_unique<PreparedCase>();
        const Shape s{v.tile_m, 256, 1024 + 128 * t, t % 2 == 1, 0};
        return prepareCase({v.dtype, v.group_size, v.zero_point}, s,
                           t % 2 == 0 ? SourceFormat::kGptq : SourceFormat::kAwq, rng, prep,
                           prepared[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        return runPrepared(*prepared[t][i], stream);
      },
      [&](int t, std::size_t i) { return checkCase(*prepared[t][i]); });
  CUDA_OK(cudaStreamDestroy(prep));
}

class W4a16Numerics : public ::testing::TestWithParam<Form> {};

TEST_P(W4a16Numerics, RepackAndRunMatchFloat64Reference) {
  const Form form = GetParam();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int index = 0;
  for (const cases::Case& cs : cases::kCases) {
    if ((cs.readers & cases::kNumerics) == 0) continue;
    const generated::VariantInfo* v = variantFor(form, cs.m);
    ASSERT_NE(v, nullptr);
    Counts& counts = run().at(kiln::dtypeName(form.dtype), v->name, cs.name);
    const SourceFormat source = index++ % 2 == 0 ? SourceFormat::kGptq : SourceFormat::kAwq;
    const std::string label = std::string(v->name) + " " + cs.name +
                              (source == SourceFormat::kGptq ? " (GPTQ)" : " (AWQ)");

    kiln::w4a16::Problem probe;  // the selector's own answer for this device (m = 0: no pointers)
    probe.dtype = form.dtype;
    probe.n = cs.n;
    probe.k = cs.k;
    probe.group_size = form.group_size;
    probe.zeros = form.zero_point ? &probe : nullptr;
    if (const kiln::Status s = kiln::w4a16::canImplement(probe, run().sm); !s.ok()) {
      ++counts.skipped;
      counts.notes.push_back(s.toString());
      continue;
    }
    Rng rng{run().seed ^ (static_cast<std::uint64_t>(form.dtype) << 60) ^
            (static_cast<std::uint64_t>(form.zero_point) << 59) ^
            static_cast<std::uint64_t>(cs.m * 131 + cs.n * 7 + cs.k)};
    PreparedCase c;
    std::string failure =
        prepareCase(form, {cs.m, cs.n, cs.k, cs.bias, cs.splits}, source, rng, stream, &c);
    if (failure.empty()) {
      if (const kiln::Status s = runPrepared(c, stream); !s.ok()) {
        failure = "run: " + s.toString();
      } else if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
        failure = std::string("kernel: ") + cudaGetErrorString(e);
      } else {
        failure = checkCase(c);
      }
    }
    counts.recordCase(failure, "", label);
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, W4a16Numerics, ::testing::ValuesIn(allForms()),
                         [](const ::testing::TestParamInfo<Form>& param_info) {
                           return std::string(kiln::dtypeName(param_info.param.dtype)) + "_g" +
                                  std::to_string(param_info.param.group_size) +
                                  (param_info.param.zero_point ? "_zp" : "_sym");
                         });

// Runner errors on the device, once per built dtype (its first variant's form).
class W4a16RunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(W4a16RunnerErrors, RefusesBadProblemsAndTreatsZeroTokensAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  const Form form{v.dtype, v.group_size, v.zero_point};
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  PreparedCase c;
  Rng rng{run().seed ^ 0xe5ULL};
  const std::string prep =
      prepareCase(form, {16, 256, 4096, false, 0}, SourceFormat::kGptq, rng, stream, &c);
  ASSERT_TRUE(prep.empty()) << prep;
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto expectInvalid = [&](const kiln::w4a16::Problem& p, const char* needle, const char* what) {
    const kiln::Status s = kiln::w4a16::run(p, c.d_workspace.ptr, c.workspace_bytes, kstream);
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find(needle) != std::string::npos,
           std::string(what) + ": " + s.toString());
  };
  {
    kiln::w4a16::Problem p = c.p;
    p.n = 200;
    expectInvalid(p, "n 200 is not a multiple of 128", "n off the tile");
  }
  {
    kiln::w4a16::Problem p = c.p;
    p.k = 4000;
    expectInvalid(p, "k 4000 is not a multiple of 64", "k off the chunk");
  }
  {
    kiln::w4a16::Problem p = c.p;
    p.x = static_cast<const std::uint16_t*>(c.d_x.ptr) + 1;
    expectInvalid(p, "pointer x", "misaligned x");
  }
  {  // The planned split needs the workspace: one byte short is refused, naming both sizes.
    const kiln::Status s =
        c.workspace_bytes > 0
            ? kiln::w4a16::run(c.p, c.d_workspace.ptr, c.workspace_bytes - 1, kstream)
            : kiln::Status(kiln::StatusCode::kInvalidArgument, "workspace smaller");
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find("smaller") != std::string::npos,
           "short workspace: " + s.toString());
  }
  {  // m = 0: ok, y untouched.
    kiln::w4a16::Problem p = c.p;
    p.m = 0;
    const kiln::Status s = kiln::w4a16::run(p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const bool untouched = allPoison(download(c.d_y));
    record(s.ok() && untouched, "m 0: " + s.toString() + (untouched ? "" : ", y written"));
  }
  {  // The admitted problem runs (and canImplement agrees).
    const kiln::Status can = kiln::w4a16::canImplement(c.p, run().sm);
    const kiln::Status s = runPrepared(c, stream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(can.ok() && s.ok() && checkCase(c).empty(),
           "valid problem: canImplement " + can.toString() + ", run " + s.toString());
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, W4a16RunnerErrors,
                         ::testing::ValuesIn(firstVariantPerDtype(generated::kVariants)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "w4a16";
  f.case_key = "case";
  f.show_multiprocessors = true;
  f.per_variant_totals = true;
  std::ostringstream shapes;
  for (const cases::Case& c : cases::kCases) {
    if ((c.readers & cases::kNumerics) == 0) continue;
    shapes << (shapes.tellp() > 0 ? ", " : "") << "[" << c.m << ", " << c.n << ", " << c.k << "]";
  }
  f.extra_json = "\"shapes_m_n_k\": [" + shapes.str() +
                 "], \"full_reference_macs\": " + std::to_string(cases::kFullReferenceMacs) +
                 ", \"sampled_outputs\": " + std::to_string(cases::kSampledOutputs);
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
