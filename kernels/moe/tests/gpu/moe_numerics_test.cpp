// GPU numerics of the moe group: every dtype of the linked artifact over the cases of
// kernels/moe/tests/gpu/cases.h, the whole block run as a runtime runs it (run() with every step,
// on a non-default stream), then each step checked against the float64 reference of
// kernels/moe/reference.h from the device's own inputs to that step:
//   route      every token's experts exactly (the logits have no near-ties; tied logits go to the
//              lower expert) and weights within 1e-5
//   align      expert_offsets and tile_offsets exactly, each expert's rows the set of its slots
//   fc1, fc2   sampled expert rows (every row when few) within the relative L2 bound
//   finalize   sampled tokens' outputs within the bound, every output written and finite, the
//              guard row past y untouched
// and end to end: a few tokens' outputs from the reference's own routing and intermediates.
// Beside the cases: the steps run one at a time and from a caller's own routing give y bit for
// bit; the block captured in a CUDA graph and replayed gives y bit for bit; the runner's errors on
// the device; every variant from fresh threads (issue 33). The summary (stdout, and JSON at
// $KILN_EVIDENCE_OUT) records what docs/performance-method.md asks of evidence.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/dtype_format.h"
#include "common/gpu_test_support.h"
#include "kiln/groups/moe.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/moe.h"
#include "kiln/runtime.h"
#include "moe/launch.h"
#include "moe/reference.h"
#include "moe/tests/gpu/cases.h"

#if !defined(KILN_MOE_ENABLED)
#error "the artifact has no moe group: kiln build --gpu-arch sm_NN --kernels moe"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::moe::reference;
namespace generated = kiln::generated::moe;
namespace cases = kiln::moe::cases;

// Error bounds: kRelL2BoundFp16 / Bf16 (gpu_test_support.h). Each checked step takes the device's
// own (rounded) inputs and the reference rounds its output where the kernel does, so a step's
// error is fp32 accumulation plus one rounding, as for every other group.
constexpr double kWeightTolerance = 1e-5;  // routing weights: fp32 softmax against float64
// Cost cap of the sampled reference: about this many multiply-adds per checked step.
constexpr double kReferenceMacs = 2e8;

// ---- inputs ------------------------------------------------------------------------------------

// Expert weights, drawn once per (format, E, H, I) and kept on both sides: Mixtral's are 2.8 GB.
struct Weights {
  std::vector<std::uint16_t> w1, w2;  // [E, 2I, H], [E, H, I]
  DeviceBuffer d_w1, d_w2;
};

std::map<std::tuple<int, int, std::int64_t, std::int64_t>, std::unique_ptr<Weights>>&
weightCache() {
  static std::map<std::tuple<int, int, std::int64_t, std::int64_t>, std::unique_ptr<Weights>> c;
  return c;
}

// Random weights of magnitude [2^-7, 2^-5) and either sign (a dot product over H = 2048 terms
// of x ~ 1 stays near 1), drawn in parallel: Mixtral's 1.4 G elements would take most of a minute
// on one core. Chunk c of the vector takes its own generator, seeded from `seed` and c.
void fillWeights(std::vector<std::uint16_t>& w, ref::Format f, std::uint64_t seed) {
  constexpr std::size_t kChunk = 1 << 22;
  const std::size_t chunks = (w.size() + kChunk - 1) / kChunk;
  const unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < workers; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t c = t; c < chunks; c += workers) {
        Rng rng{seed ^ (c * 0x9e3779b97f4a7c15ULL)};
        const std::size_t end = std::min(w.size(), (c + 1) * kChunk);
        for (std::size_t i = c * kChunk; i < end; ++i) w[i] = randomBits(rng, f, -7, -6, true);
      }
    });
  }
  for (std::thread& t : threads) t.join();
}

std::string weightsFor(ref::Format f, const cases::Case& cs, const Weights** out) {
  auto key = std::make_tuple(static_cast<int>(f), cs.experts, cs.hidden, cs.intermediate);
  auto& slot = weightCache()[key];
  if (!slot) {
    auto w = std::make_unique<Weights>();
    const std::uint64_t seed =
        run().seed ^ 0x5eedULL ^ (static_cast<std::uint64_t>(f) << 62) ^
        static_cast<std::uint64_t>(cs.experts * 1000003LL + cs.hidden * 131 + cs.intermediate);
    w->w1.resize(static_cast<std::size_t>(cs.experts * 2 * cs.intermediate * cs.hidden));
    w->w2.resize(static_cast<std::size_t>(cs.experts * cs.hidden * cs.intermediate));
    fillWeights(w->w1, f, seed);
    fillWeights(w->w2, f, ~seed);
    std::string e;
    if (!(e = uploadVector(&w->d_w1, w->w1)).empty()) return e;
    if (!(e = uploadVector(&w->d_w2, w->w2)).empty()) return e;
    slot = std::move(w);
  }
  *out = slot.get();
  return "";
}

// Router logits [T, E] as doubles exactly representable in the logits' type: distinct multiples
// of 1/16 (1/32 past 256 experts) per token, so no two probabilities are within fp32 error.
std::vector<double> drawLogits(const cases::Case& cs, Rng& rng) {
  const double step = cs.experts > 256 ? 1.0 / 32 : 1.0 / 16;
  std::vector<double> logits(static_cast<std::size_t>(cs.tokens * cs.experts), 0.0);
  std::vector<int> perm(static_cast<std::size_t>(cs.experts));
  for (int e = 0; e < cs.experts; ++e) perm[e] = e;
  for (std::int64_t t = 0; t < cs.tokens; ++t) {
    if (cs.routing == cases::Routing::kTied) continue;  // all zero
    if (t == 0 || cs.routing == cases::Routing::kRandom) {
      for (int i = cs.experts - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
    }
    for (int e = 0; e < cs.experts; ++e) {
      logits[static_cast<std::size_t>(t * cs.experts + e)] = (perm[e] - cs.experts / 2) * step;
    }
  }
  return logits;
}

struct PreparedCase {
  kiln::DType dtype = kiln::DType::kBFloat16;
  ref::Format f = ref::Format::kBFloat16;
  cases::Case cs{};
  const Weights* weights = nullptr;
  std::vector<std::uint16_t> x, residual;
  std::vector<double> logits;
  DeviceBuffer d_x, d_logits, d_residual, d_y, d_workspace;
  std::size_t workspace_bytes = 0;
  kiln::moe::WorkspaceLayout layout;
  kiln::moe::Problem p;
};

std::string prepareCase(kiln::DType dtype, const cases::Case& cs, Rng& rng, PreparedCase* c) {
  c->dtype = dtype;
  c->f = formatOf(dtype);
  c->cs = cs;
  std::string e;
  if (!(e = weightsFor(c->f, cs, &c->weights)).empty()) return e;
  c->x.resize(static_cast<std::size_t>(cs.tokens * cs.hidden));
  for (auto& v : c->x) v = randomBits(rng, c->f, -2, 0, true);
  if (cs.residual) {
    c->residual.resize(c->x.size());
    for (auto& v : c->residual) v = randomBits(rng, c->f, -3, 0, true);
  }
  c->logits = drawLogits(cs, rng);
  if (cs.logits_fp32) {
    std::vector<float> l(c->logits.begin(), c->logits.end());
    if (!(e = uploadVector(&c->d_logits, l)).empty()) return e;
  } else {
    std::vector<std::uint16_t> l(c->logits.size());
    for (std::size_t i = 0; i < l.size(); ++i) l[i] = ref::roundToBits(c->logits[i], c->f);
    if (!(e = uploadVector(&c->d_logits, l)).empty()) return e;
  }
  if (auto r = allocate(&c->d_x, c->x.size(), 0, &c->x); !r) return r.message();
  if (cs.residual) {
    if (auto r = allocate(&c->d_residual, c->residual.size(), 0, &c->residual); !r) {
      return r.message();
    }
  }
  const auto outputs = static_cast<std::size_t>(cs.tokens * cs.hidden);
  if (auto r = allocate(&c->d_y, outputs, static_cast<std::size_t>(cs.hidden), nullptr); !r) {
    return r.message();
  }
  kiln::moe::Problem& p = c->p;
  p.dtype = dtype;
  p.tokens = cs.tokens;
  p.experts = cs.experts;
  p.top_k = cs.top_k;
  p.hidden = cs.hidden;
  p.intermediate = cs.intermediate;
  p.renormalize = cs.renormalize;
  p.logits_fp32 = cs.logits_fp32;
  p.x = c->d_x.ptr;
  p.logits = c->d_logits.ptr;
  p.w1 = c->weights->d_w1.ptr;
  p.w2 = c->weights->d_w2.ptr;
  p.residual = cs.residual ? c->d_residual.ptr : nullptr;
  p.y = c->d_y.ptr;
  c->workspace_bytes = kiln::moe::workspaceSize(p);
  c->layout = kiln::moe::workspaceLayout(p);
  if (c->workspace_bytes == 0) return "workspaceSize is 0 for an admitted problem";
  return allocate(&c->d_workspace, c->workspace_bytes, nullptr, 0);
}

kiln::Status runPrepared(const PreparedCase& c, cudaStream_t stream, unsigned steps) {
  kiln::moe::Problem p = c.p;
  p.steps = steps;
  return kiln::moe::run(p, c.d_workspace.ptr, c.workspace_bytes,
                        reinterpret_cast<kiln::Stream>(stream));
}

// ---- checks ------------------------------------------------------------------------------------

// The workspace's intermediates, downloaded.
struct Intermediates {
  std::vector<std::int32_t> ids, expert_offsets, tile_offsets, slots;
  std::vector<float> weights;
  std::vector<std::uint16_t> act, down;
};

template <typename T>
std::vector<T> segment(const std::vector<unsigned char>& ws, std::size_t offset, std::size_t n) {
  std::vector<T> v(n);
  if (offset + n * sizeof(T) <= ws.size()) std::memcpy(v.data(), ws.data() + offset, n * sizeof(T));
  return v;
}

Intermediates readWorkspace(const PreparedCase& c) {
  const std::vector<unsigned char> ws = download<unsigned char>(c.d_workspace);
  const auto rows = static_cast<std::size_t>(c.cs.tokens * c.cs.top_k);
  const auto e1 = static_cast<std::size_t>(c.cs.experts + 1);
  Intermediates m;
  m.ids = segment<std::int32_t>(ws, c.layout.topk_ids, rows);
  m.weights = segment<float>(ws, c.layout.topk_weights, rows);
  m.expert_offsets = segment<std::int32_t>(ws, c.layout.expert_offsets, e1);
  m.tile_offsets = segment<std::int32_t>(ws, c.layout.tile_offsets, e1);
  m.slots = segment<std::int32_t>(ws, c.layout.sorted_slots, rows);
  m.act = segment<std::uint16_t>(ws, c.layout.act, rows * c.cs.intermediate);
  m.down = segment<std::uint16_t>(ws, c.layout.down, rows * c.cs.hidden);
  return m;
}

// n indices spread evenly over 0..count-1 (all of them when count <= n).
std::vector<std::int64_t> spread(std::int64_t count, std::int64_t n) {
  std::vector<std::int64_t> picks;
  if (count <= n) {
    for (std::int64_t i = 0; i < count; ++i) picks.push_back(i);
  } else if (n == 1) {
    picks.push_back(0);
  } else {
    for (std::int64_t i = 0; i < n; ++i) picks.push_back(i * (count - 1) / (n - 1));
  }
  return picks;
}

struct L2 {
  double diff = 0.0, norm = 0.0;
  void add(double got, double want) {
    diff += (got - want) * (got - want);
    norm += want * want;
  }
  double rel() const { return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff); }
};

std::string checkRouting(const PreparedCase& c, const Intermediates& m, const ref::Routing& r) {
  std::ostringstream err;
  std::size_t wrong_ids = 0, wrong_weights = 0, first = 0;
  for (std::size_t i = 0; i < r.ids.size(); ++i) {
    if (m.ids[i] != r.ids[i] && wrong_ids++ == 0) first = i;
    const double tol = kWeightTolerance * std::max(1.0, std::fabs(r.weights[i]));
    if (!(std::fabs(m.weights[i] - r.weights[i]) <= tol)) ++wrong_weights;
  }
  if (wrong_ids > 0) {
    err << "route: " << wrong_ids << " of " << r.ids.size() << " expert ids differ, first slot "
        << first << " (got " << m.ids[first] << ", want " << r.ids[first] << "); ";
  }
  if (wrong_weights > 0) err << "route: " << wrong_weights << " weights off by > 1e-5; ";
  if (!err.str().empty()) return err.str();

  const ref::Offsets o = ref::offsets(r.ids, c.cs.experts, kiln::moe::kBlockM);
  if (m.expert_offsets != o.experts) err << "align: expert_offsets differ; ";
  if (m.tile_offsets != o.tiles) err << "align: tile_offsets differ; ";
  if (!err.str().empty()) return err.str();
  const auto rows = ref::expertRows(r.ids, c.cs.experts);
  for (int e = 0; e < c.cs.experts; ++e) {
    std::vector<std::int32_t> got(m.slots.begin() + o.experts[e],
                                  m.slots.begin() + o.experts[e + 1]);
    std::sort(got.begin(), got.end());
    if (got != rows[e]) {
      err << "align: expert " << e << "'s rows are not its slots; ";
      break;
    }
  }
  return err.str();
}

// fc1, fc2 and finalize on sampled rows from the device's own inputs; end to end on a few tokens.
std::string checkMath(const PreparedCase& c, const Intermediates& m, const ref::Routing& r,
                      const std::vector<std::uint16_t>& y, std::string* note) {
  const cases::Case& cs = c.cs;
  const ref::Decoder dec(c.f);
  const ref::Shape shape{cs.tokens, cs.experts, cs.top_k, cs.hidden, cs.intermediate};
  const std::int64_t h = cs.hidden, inter = cs.intermediate, k = cs.top_k;
  const std::int64_t rows = cs.tokens * k;
  const double row_macs = 3.0 * static_cast<double>(h * inter);
  const auto sampled = static_cast<std::int64_t>(
      std::clamp(kReferenceMacs / row_macs, 4.0, static_cast<double>(cases::kSampledRows)));
  const double bound = c.f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  const std::uint16_t* w1 = c.weights->w1.data();
  const std::uint16_t* w2 = c.weights->w2.data();
  std::ostringstream err, measured;

  auto decodeRow = [&](const std::uint16_t* bits, std::int64_t n) {
    std::vector<double> v(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) v[i] = dec(bits[i]);
    return v;
  };
  L2 fc1, fc2;
  std::vector<double> want_act(static_cast<std::size_t>(inter)),
      want_down(static_cast<std::size_t>(h));
  for (const std::int64_t pos : spread(rows, sampled)) {
    const std::int32_t slot = m.slots[pos];
    const std::int64_t token = slot / k;
    const std::int64_t e = m.ids[slot];
    const std::vector<double> x = decodeRow(c.x.data() + token * h, h);
    ref::act(x.data(), w1 + e * 2 * inter * h, shape, dec, c.f, want_act.data());
    const std::uint16_t* got_act = m.act.data() + pos * inter;
    for (std::int64_t i = 0; i < inter; ++i) fc1.add(dec(got_act[i]), want_act[i]);
    const std::vector<double> a = decodeRow(got_act, inter);
    ref::down(a.data(), w2 + e * h * inter, shape, dec, c.f, want_down.data());
    const std::uint16_t* got_down = m.down.data() + static_cast<std::int64_t>(slot) * h;
    for (std::int64_t i = 0; i < h; ++i) fc2.add(dec(got_down[i]), want_down[i]);
  }
  L2 fin;
  std::vector<double> want_y(static_cast<std::size_t>(h));
  for (const std::int64_t t : spread(cs.tokens, cases::kSampledRows)) {
    std::vector<std::vector<double>> d;
    std::vector<const double*> d_rows;
    std::vector<double> w;
    for (std::int64_t j = 0; j < k; ++j) {
      d.push_back(decodeRow(m.down.data() + (t * k + j) * h, h));
      w.push_back(m.weights[t * k + j]);
    }
    for (const auto& row : d) d_rows.push_back(row.data());
    const std::vector<double> res =
        cs.residual ? decodeRow(c.residual.data() + t * h, h) : std::vector<double>();
    ref::output(w.data(), d_rows, cs.residual ? res.data() : nullptr, h, want_y.data());
    for (std::int64_t i = 0; i < h; ++i) fin.add(dec(y[t * h + i]), want_y[i]);
  }
  // End to end: the reference's own routing, act and down for a few tokens.
  L2 e2e;
  const std::int64_t e2e_tokens = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(kReferenceMacs / (row_macs * static_cast<double>(k))));
  for (const std::int64_t t : spread(cs.tokens, std::min<std::int64_t>(e2e_tokens, 8))) {
    const std::vector<double> x = decodeRow(c.x.data() + t * h, h);
    std::vector<std::vector<double>> d(static_cast<std::size_t>(k), std::vector<double>(h));
    std::vector<const double*> d_rows;
    for (std::int64_t j = 0; j < k; ++j) {
      const std::int64_t e = r.ids[t * k + j];
      ref::act(x.data(), w1 + e * 2 * inter * h, shape, dec, c.f, want_act.data());
      ref::down(want_act.data(), w2 + e * h * inter, shape, dec, c.f, d[j].data());
      d_rows.push_back(d[j].data());
    }
    const std::vector<double> res =
        cs.residual ? decodeRow(c.residual.data() + t * h, h) : std::vector<double>();
    ref::output(r.weights.data() + t * k, d_rows, cs.residual ? res.data() : nullptr, h,
                want_y.data());
    for (std::int64_t i = 0; i < h; ++i) e2e.add(dec(y[t * h + i]), want_y[i]);
  }
  const std::pair<const char*, const L2*> checks[] = {
      {"fc1", &fc1}, {"fc2", &fc2}, {"finalize", &fin}, {"end to end", &e2e}};
  for (const auto& [name, l2] : checks) {
    measured << name << " " << l2->rel() << " ";
    if (!(l2->rel() <= bound))
      err << name << ": relative L2 " << l2->rel() << " > " << bound << "; ";
  }
  *note = "rel L2: " + measured.str();
  return err.str();
}

// The whole check of a case whose run() finished: y scanned, then every step.
std::string checkCase(const PreparedCase& c, std::string* note) {
  const cases::Case& cs = c.cs;
  const auto outputs = static_cast<std::size_t>(cs.tokens * cs.hidden);
  const std::vector<std::uint16_t> y = download(c.d_y);
  if (y.size() < outputs + static_cast<std::size_t>(cs.hidden)) return "download of y failed";
  std::ostringstream err;
  describe(err, scanOutput(y, outputs, static_cast<std::size_t>(cs.hidden), ref::Decoder(c.f)),
           outputs);
  if (!err.str().empty()) return err.str();
  const Intermediates m = readWorkspace(c);
  const ref::Shape shape{cs.tokens, cs.experts, cs.top_k, cs.hidden, cs.intermediate};
  std::vector<double> logits = c.logits;
  if (!cs.logits_fp32) {
    for (double& l : logits) l = ref::roundToFormat(l, c.f);  // exact by construction
  }
  const ref::Routing r = ref::route(logits, shape, cs.renormalize);
  if (std::string e = checkRouting(c, m, r); !e.empty()) return e;
  return checkMath(c, m, r, y, note);
}

std::vector<kiln::DType> builtDtypes() {
  std::vector<kiln::DType> dtypes;
  for (const std::size_t i : firstVariantPerDtype(generated::kVariants)) {
    dtypes.push_back(generated::kVariants[i].dtype);
  }
  return dtypes;
}

const char* variantName(kiln::DType dtype) {
  for (const auto& v : generated::kVariants) {
    if (v.dtype == dtype) return v.name;
  }
  return "?";
}

// ---- tests -----------------------------------------------------------------------------------

class MoeNumerics : public ::testing::TestWithParam<kiln::DType> {};

TEST_P(MoeNumerics, BlockAndEveryStepMatchFloat64Reference) {
  const kiln::DType dtype = GetParam();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (const cases::Case& cs : cases::kCases) {
    Counts& counts = run().at(kiln::dtypeName(dtype), variantName(dtype), cs.name);
    Rng rng{run().seed ^ (static_cast<std::uint64_t>(dtype) << 60) ^
            static_cast<std::uint64_t>(cs.tokens * 7919 + cs.experts * 131 + cs.top_k)};
    PreparedCase c;
    std::string note;
    std::string failure = prepareCase(dtype, cs, rng, &c);
    if (failure.empty()) {
      if (const kiln::Status s = kiln::moe::canImplement(c.p, run().sm); !s.ok()) {
        ++counts.skipped;
        counts.notes.push_back(s.toString());
        continue;
      }
      if (const kiln::Status s = runPrepared(c, stream, kiln::moe::kAllSteps); !s.ok()) {
        failure = "run: " + s.toString();
      } else if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
        failure = std::string("kernel: ") + cudaGetErrorString(e);
      } else {
        failure = checkCase(c, &note);
      }
    }
    counts.recordCase(failure, note, std::string(variantName(dtype)) + " " + cs.name);
  }
  weightCache().clear();
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, MoeNumerics, ::testing::ValuesIn(builtDtypes()),
                         [](const ::testing::TestParamInfo<kiln::DType>& param_info) {
                           return std::string(kiln::dtypeName(param_info.param));
                         });

// The steps one at a time, from a caller's own routing, and captured in a CUDA graph: y bit for
// bit the same as one run() of every step.
class MoeSteps : public ::testing::TestWithParam<kiln::DType> {};

TEST_P(MoeSteps, OneByOneOwnRoutingAndGraphGiveTheSameY) {
  const kiln::DType dtype = GetParam();
  Counts& counts = run().at(kiln::dtypeName(dtype), variantName(dtype), "steps_and_graph");
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const cases::Case cs{"steps", 77, 64, 6, 1024, 512, cases::Routing::kRandom, true};
  Rng rng{run().seed ^ 0x57e95ULL};
  PreparedCase c;
  const std::string prep = prepareCase(dtype, cs, rng, &c);
  ASSERT_TRUE(prep.empty()) << prep;
  ASSERT_TRUE(runPrepared(c, stream, kiln::moe::kAllSteps).ok());
  CUDA_OK(cudaStreamSynchronize(stream));
  std::string note;
  const std::string whole = checkCase(c, &note);
  record(whole.empty(), "all steps: " + whole);
  const std::vector<std::uint16_t> y_all = download(c.d_y);
  const std::vector<unsigned char> ws_all = download<unsigned char>(c.d_workspace);

  auto resetY = [&]() { CUDA_OK(cudaMemset(c.d_y.ptr, 0xff, c.d_y.bytes)); };
  {  // One step at a time.
    resetY();
    CUDA_OK(cudaMemset(c.d_workspace.ptr, 0xff, c.workspace_bytes));
    kiln::Status s;
    for (unsigned step = kiln::moe::kRoute; step <= kiln::moe::kFinalize && s.ok(); step <<= 1) {
      s = runPrepared(c, stream, step);
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s.ok() && download(c.d_y) == y_all, "one step at a time: " + s.toString());
  }
  {  // The caller's own routing: ids and weights written into the workspace, then from kAlign.
    resetY();
    CUDA_OK(cudaMemset(c.d_workspace.ptr, 0xff, c.workspace_bytes));
    const std::size_t rows = static_cast<std::size_t>(cs.tokens * cs.top_k);
    auto* base = static_cast<unsigned char*>(c.d_workspace.ptr);
    CUDA_OK(cudaMemcpy(base + c.layout.topk_ids, ws_all.data() + c.layout.topk_ids, rows * 4,
                       cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(base + c.layout.topk_weights, ws_all.data() + c.layout.topk_weights,
                       rows * 4, cudaMemcpyHostToDevice));
    const kiln::Status s = runPrepared(c, stream, kiln::moe::kAllSteps & ~kiln::moe::kRoute);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s.ok() && download(c.d_y) == y_all, "own routing from kAlign: " + s.toString());
  }
  {  // Captured in a CUDA graph (no host synchronisation inside), replayed twice.
    resetY();
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const kiln::Status s = runPrepared(c, stream, kiln::moe::kAllSteps);
    CUDA_OK(cudaStreamEndCapture(stream, &graph));
    bool same = false;
    if (s.ok() && graph != nullptr) {
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaGraphLaunch(exec, stream));
      CUDA_OK(cudaStreamSynchronize(stream));
      same = download(c.d_y) == y_all;
      CUDA_OK(cudaGraphExecDestroy(exec));
    }
    if (graph != nullptr) CUDA_OK(cudaGraphDestroy(graph));
    record(s.ok() && same, "CUDA graph: " + s.toString() + (same ? "" : ", y differs"));
  }
  weightCache().clear();
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, MoeSteps, ::testing::ValuesIn(builtDtypes()),
                         [](const ::testing::TestParamInfo<kiln::DType>& param_info) {
                           return std::string(kiln::dtypeName(param_info.param));
                         });

// Runner errors on the device, once per built dtype.
class MoeRunnerErrors : public ::testing::TestWithParam<kiln::DType> {};

TEST_P(MoeRunnerErrors, RefusesBadProblemsAndTreatsZeroTokensAsNoOp) {
  const kiln::DType dtype = GetParam();
  Counts& counts = run().at(kiln::dtypeName(dtype), variantName(dtype), "runner_errors");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  const cases::Case cs{"errors", 9, 8, 2, 256, 128};
  Rng rng{run().seed ^ 0xe5ULL};
  PreparedCase c;
  const std::string prep = prepareCase(dtype, cs, rng, &c);
  ASSERT_TRUE(prep.empty()) << prep;
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto expectInvalid = [&](const kiln::moe::Problem& p, std::size_t bytes, const char* needle,
                           const char* what) {
    const kiln::Status s = kiln::moe::run(p, c.d_workspace.ptr, bytes, kstream);
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find(needle) != std::string::npos,
           std::string(what) + ": " + s.toString());
  };
  {
    kiln::moe::Problem p = c.p;
    p.top_k = 9;
    expectInvalid(p, c.workspace_bytes, "top_k 9 exceeds experts 8", "k > E");
  }
  {
    kiln::moe::Problem p = c.p;
    p.intermediate = 100;
    expectInvalid(p, c.workspace_bytes, "intermediate 100 is not a multiple of the tile 64",
                  "I off the tile");
  }
  expectInvalid(c.p, c.workspace_bytes - 1, "smaller", "short workspace");
  {
    kiln::moe::Problem p = c.p;
    p.x = static_cast<const std::uint16_t*>(c.d_x.ptr) + 1;
    expectInvalid(p, c.workspace_bytes, "pointer x", "misaligned x");
  }
  {  // tokens = 0: ok, y untouched.
    kiln::moe::Problem p = c.p;
    p.tokens = 0;
    const kiln::Status s = kiln::moe::run(p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const bool untouched = allPoison(download(c.d_y));
    record(s.ok() && untouched, "tokens 0: " + s.toString() + (untouched ? "" : ", y written"));
  }
  {  // The admitted problem runs (and canImplement agrees).
    const kiln::Status can = kiln::moe::canImplement(c.p, run().sm);
    const kiln::Status s = runPrepared(c, stream, kiln::moe::kAllSteps);
    CUDA_OK(cudaStreamSynchronize(stream));
    std::string note;
    const std::string check = s.ok() ? checkCase(c, &note) : "";
    record(can.ok() && s.ok() && check.empty(),
           "valid problem: canImplement " + can.toString() + ", run " + s.toString() + " " + check);
  }
  weightCache().clear();
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, MoeRunnerErrors, ::testing::ValuesIn(builtDtypes()),
                         [](const ::testing::TestParamInfo<kiln::DType>& param_info) {
                           return std::string(kiln::dtypeName(param_info.param));
                         });

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). Thread t
// runs T = 5 + 3 t tokens over 16 experts, top 4, H 256, I 128.
TEST(MoeFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    kiln::moe::Problem probe;  // tokens = 0 skips the pointer checks
    probe.dtype = v.dtype;
    probe.experts = 16;
    probe.top_k = 4;
    probe.hidden = 256;
    probe.intermediate = 128;
    const kiln::Status s = kiln::moe::canImplement(probe, run().sm);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) {
        const auto& v = generated::kVariants[i];
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58)};
        prepared[t][i] = std::make_unique<PreparedCase>();
        const cases::Case cs{"fresh",   5 + 3 * t, 16, 4, 256, 128, cases::Routing::kRandom,
                             t % 2 == 1};
        return prepareCase(v.dtype, cs, rng, prepared[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        return runPrepared(*prepared[t][i], stream, kiln::moe::kAllSteps);
      },
      [&](int t, std::size_t i) {
        std::string note;
        return checkCase(*prepared[t][i], &note);
      });
  weightCache().clear();
}

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "moe";
  f.case_key = "case";
  f.show_multiprocessors = true;
  f.per_variant_totals = true;
  std::ostringstream shapes;
  for (const cases::Case& c : cases::kCases) {
    shapes << (shapes.tellp() > 0 ? ", " : "") << "[" << c.tokens << ", " << c.experts << ", "
           << c.top_k << ", " << c.hidden << ", " << c.intermediate << "]";
  }
  f.extra_json = "\"shapes_t_e_k_h_i\": [" + shapes.str() +
                 "], \"sampled_rows\": " + std::to_string(cases::kSampledRows);
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
