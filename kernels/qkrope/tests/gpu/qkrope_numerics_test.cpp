// GPU numerics of the qkrope group: every variant of the linked artifact over the cases of
// kernels/qkrope/tests/gpu/cases.h marked kNumerics (Qwen3's 16 / 8 and 32 / 8 heads, 1 to 16384
// tokens, GQA 8, MHA, MQA, 80 heads over several blocks, partial rotary, no QK norm, positions up
// to 128k, page sizes 16 to 256, padding slots and a slot past the cache, contiguous K / V), in
// both page layouts (NHD and HND), against the float64 reference in kernels/qkrope/reference.h.
//
// Each case: fresh random qkv (heads of different scales), weights, positions and distinct cache
// slots drawn from a cache with as many unused slots as used ones (the seed is printed;
// KILN_SEED=<n> replays a run); q_out, k_out, v_out and both caches poisoned (0xffff, NaN in fp16
// and bf16), with a guard past q_out, k_out and v_out. One run() on a non-default stream, then:
// status ok; q_out every element written, finite, relative L2 within the bound, guard untouched;
// every k and v row of a token whose slot is in the cache written at that slot (k within the bound,
// v bit for bit), every other cache element still poison (so padding and out-of-range slots are
// skipped and nothing lands elsewhere); k_out / v_out likewise for every token when given; qkv
// unchanged. Runner errors (unbuilt head dim, misaligned qkv, bad page size, zero tokens) are
// checked on the device too. The summary (stdout, and JSON at $KILN_EVIDENCE_OUT) records what
// docs/performance-method.md asks of evidence; the process exits non-zero on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/dtype_format.h"
#include "common/gpu_test_support.h"
#include "kiln/groups/qkrope.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/qkrope.h"
#include "kiln/runtime.h"
#include "qkrope/reference.h"
#include "qkrope/tests/gpu/cases.h"

#if !defined(KILN_QKROPE_ENABLED)
#error "the artifact has no qkrope group: kiln build --gpu-arch sm_NN --kernels qkrope"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::qkrope::reference;
namespace generated = kiln::generated::qkrope;
namespace qr = kiln::qkrope;
namespace cases = kiln::qkrope::cases;

// Error bounds: kRelL2BoundFp16 / Bf16 (gpu_test_support.h, docs/performance-method.md, Method 2).
// The reference uses the kernel's own fp32 inv_freq and fp32 angles (the same numbers) and rounds
// cos and sin to the dtype as the kernel does; beside each output's own rounding the kernel's
// other errors are fp32 arithmetic (rsqrtf, the products) and sincosf's 2 ulp in fp32, which
// changes a 16-bit cos or sin only when it straddles a rounding boundary (about one value in 2^12
// for fp16, in 2^15 for bf16), by one ulp of the dtype: far inside the bounds. v is exact.

constexpr float kEps = 1e-6f;

// The cases are cases.h's marked kNumerics: those of any head dim on every variant, the
// benchmark's (head dim 128) on the variants of theirs.
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

// The dims a case rotates: 0 is the whole head (as the runner reads it), -n a 1/n part.
int rotaryDimOf(const cases::Case& spec, int head_dim) {
  if (spec.rotary_dim == 0) return head_dim;
  return spec.rotary_dim < 0 ? head_dim / -spec.rotary_dim : spec.rotary_dim;
}

// One (variant, case, layout), prepared: its host inputs, its device buffers (inputs uploaded;
// outputs, caches and guards poisoned) and the problem that run() takes.
struct PreparedCase {
  const cases::Case* spec = nullptr;
  ref::Format f = ref::Format::kBFloat16;
  ref::Layout layout = ref::Layout::kNHD;
  int d = 0, rotary_dim = 0, num_pages = 0;
  std::size_t q_elems = 0, kv_elems = 0, cache_elems = 0, guard = 0;
  std::vector<std::uint16_t> qkv, wq, wk;
  std::vector<std::int64_t> positions, slots;
  DeviceBuffer d_qkv, d_pos, d_slots, d_wq, d_wk, d_q, d_kc, d_vc, d_ko, d_vo;
  qr::Problem p;
};

// Draws the case's inputs and prepares it; returns "" on success, else what failed.
std::string prepareCase(const generated::VariantInfo& v, const cases::Case& spec,
                        ref::Layout layout, Rng& rng, PreparedCase* c) {
  const ref::Format f = formatOf(v.dtype);
  const int d = v.head_dim, t_count = spec.tokens, ps = spec.page_size;
  const int heads = spec.q_heads + 2 * spec.kv_heads;
  // As many unused slots as used ones, and three pages more, in which the slots land at random.
  const int num_pages = 2 * ((t_count + ps - 1) / ps) + 3;
  const std::int64_t num_slots = static_cast<std::int64_t>(num_pages) * ps;
  std::vector<std::int64_t> all(static_cast<std::size_t>(num_slots));
  for (std::int64_t s = 0; s < num_slots; ++s) all[static_cast<std::size_t>(s)] = s;
  std::vector<std::int64_t> slots(static_cast<std::size_t>(t_count));
  for (int t = 0; t < t_count; ++t) {  // a partial Fisher-Yates shuffle: distinct slots
    const auto j = static_cast<std::size_t>(t) +
                   static_cast<std::size_t>(rng.next() % static_cast<std::uint64_t>(num_slots - t));
    std::swap(all[static_cast<std::size_t>(t)], all[j]);
    slots[static_cast<std::size_t>(t)] = all[static_cast<std::size_t>(t)];
    if (spec.padding > 0 && t % spec.padding == spec.padding - 1) slots[t] = -1;
  }
  if (spec.out_of_range) slots[static_cast<std::size_t>(t_count / 2)] = num_slots;
  std::vector<std::int64_t> positions(static_cast<std::size_t>(t_count));
  for (auto& pos : positions) {
    pos = static_cast<std::int64_t>(rng.next() % static_cast<std::uint64_t>(spec.max_position));
  }
  // Heads of different scales (2^-3 .. 2^3 apart), so that each head's own rms matters.
  std::vector<std::uint16_t> qkv(static_cast<std::size_t>(t_count) * heads * d);
  for (std::size_t row = 0; row < qkv.size() / d; ++row) {
    const int shift = static_cast<int>(rng.next() % 7) - 3;
    for (int i = 0; i < d; ++i) qkv[row * d + i] = randomBits(rng, f, -4 + shift, 1 + shift);
  }
  std::vector<std::uint16_t> wq(static_cast<std::size_t>(d)), wk(static_cast<std::size_t>(d));
  for (auto& w : wq) w = randomBits(rng, f, -1, 0);  // |w| in [0.5, 2)
  for (auto& w : wk) w = randomBits(rng, f, -1, 0);

  c->spec = &spec;
  c->f = f;
  c->layout = layout;
  c->d = d;
  c->rotary_dim = rotaryDimOf(spec, d);
  c->num_pages = num_pages;
  c->q_elems = static_cast<std::size_t>(t_count) * spec.q_heads * d;
  c->kv_elems = static_cast<std::size_t>(t_count) * spec.kv_heads * d;
  c->cache_elems = static_cast<std::size_t>(num_slots) * spec.kv_heads * d;
  c->guard = static_cast<std::size_t>(d);
  for (const std::string& e : {
           allocate(&c->d_pos, positions.size() * 8, positions.data(), positions.size() * 8),
           allocate(&c->d_slots, slots.size() * 8, slots.data(), slots.size() * 8),
       }) {
    if (!e.empty()) return e;
  }
  for (auto r :
       {allocate(&c->d_qkv, qkv.size(), 0, &qkv), allocate(&c->d_wq, wq.size(), 0, &wq),
        allocate(&c->d_wk, wk.size(), 0, &wk), allocate(&c->d_q, c->q_elems, c->guard, nullptr),
        allocate(&c->d_kc, c->cache_elems, 0, nullptr),
        allocate(&c->d_vc, c->cache_elems, 0, nullptr)}) {
    if (!r) return r.message();
  }
  if (spec.contiguous) {
    for (auto r : {allocate(&c->d_ko, c->kv_elems, c->guard, nullptr),
                   allocate(&c->d_vo, c->kv_elems, c->guard, nullptr)}) {
      if (!r) return r.message();
    }
  }
  c->qkv = std::move(qkv);
  c->wq = std::move(wq);
  c->wk = std::move(wk);
  c->positions = std::move(positions);
  c->slots = std::move(slots);

  qr::Problem& p = c->p;
  p.dtype = v.dtype;
  p.tokens = t_count;
  p.q_heads = spec.q_heads;
  p.kv_heads = spec.kv_heads;
  p.head_dim = d;
  p.rotary_dim = spec.rotary_dim < 0 ? c->rotary_dim : spec.rotary_dim;
  p.rope_theta = spec.theta;
  p.qk_norm = spec.qk_norm;
  p.eps = kEps;
  p.page_size = ps;
  p.kv_layout = layout == ref::Layout::kNHD ? qr::KvLayout::kNHD : qr::KvLayout::kHND;
  p.num_pages = num_pages;
  p.qkv = c->d_qkv.ptr;
  p.positions = static_cast<const std::int64_t*>(c->d_pos.ptr);
  p.slot_mapping = static_cast<const std::int64_t*>(c->d_slots.ptr);
  p.q_norm_weight = c->d_wq.ptr;
  p.k_norm_weight = c->d_wk.ptr;
  p.q_out = c->d_q.ptr;
  p.k_cache = c->d_kc.ptr;
  p.v_cache = c->d_vc.ptr;
  p.k_out = spec.contiguous ? c->d_ko.ptr : nullptr;
  p.v_out = spec.contiguous ? c->d_vo.ptr : nullptr;
  return "";
}

// The reference, one slice of tokens per core: ref::qkNormRope of each slice is the same problem
// over its tokens' rows of qkv, positions, q and k.
void referenceQk(const ref::Problem& p, double* q, double* k) {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  const int per = (p.tokens + static_cast<int>(threads) - 1) / static_cast<int>(threads);
  const std::size_t heads = static_cast<std::size_t>(p.q_heads) + 2u * p.kv_heads;
  const std::size_t d = static_cast<std::size_t>(p.head_dim);
  std::vector<std::thread> pool;
  for (int first = 0; first < p.tokens; first += per) {
    ref::Problem slice = p;
    slice.tokens = std::min(per, p.tokens - first);
    slice.qkv = p.qkv + static_cast<std::size_t>(first) * heads * d;
    slice.positions = p.positions + first;
    double* q_slice = q + static_cast<std::size_t>(first) * p.q_heads * d;
    double* k_slice = k + static_cast<std::size_t>(first) * p.kv_heads * d;
    pool.emplace_back([slice, q_slice, k_slice]() { ref::qkNormRope(slice, q_slice, k_slice); });
  }
  for (std::thread& t : pool) t.join();
}

// Errors of a checked case: q and k relative L2 (k over the cache rows written, and k_out).
struct Errors {
  double q = 0.0, k = 0.0;
};

// Checks a case whose run() succeeded and whose stream is synchronized against the float64
// reference; returns "" on success, else what failed.
std::string checkCase(const PreparedCase& c, Errors* errors) {
  const cases::Case& spec = *c.spec;
  const ref::Format f = c.f;
  const int d = c.d, t_count = spec.tokens, kv_heads = spec.kv_heads;
  const int heads = spec.q_heads + 2 * kv_heads;
  ref::Problem rp;
  rp.format = f;
  rp.tokens = t_count;
  rp.q_heads = spec.q_heads;
  rp.kv_heads = kv_heads;
  rp.head_dim = d;
  rp.rotary_dim = c.rotary_dim;
  rp.theta = spec.theta;
  rp.qk_norm = spec.qk_norm;
  rp.eps = static_cast<double>(kEps);
  rp.qkv = c.qkv.data();
  rp.positions = c.positions.data();
  rp.q_norm_weight = c.wq.data();
  rp.k_norm_weight = c.wk.data();
  std::vector<double> q_ref(c.q_elems), k_ref(c.kv_elems);
  referenceQk(rp, q_ref.data(), k_ref.data());

  std::ostringstream err;
  const ref::Decoder dec(f);
  const double bound = f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  const std::vector<std::uint16_t> q = download(c.d_q);
  if (q.size() < c.q_elems + c.guard) return "download of q_out failed";
  describe(err, scanOutput(q, c.q_elems, c.guard, dec), c.q_elems);
  errors->q = ref::relativeL2(f, c.q_elems, q.data(), q_ref.data());
  if (!(errors->q <= bound))
    err << "q_out relative L2 error " << errors->q << " > " << bound << "; ";

  // The caches: each written row gathered against its reference (k) or its input (v, exact);
  // every other element must still be poison.
  const std::vector<std::uint16_t> kc = download(c.d_kc), vc = download(c.d_vc);
  if (kc.size() < c.cache_elems || vc.size() < c.cache_elems) return "download of caches failed";
  std::vector<char> written(c.cache_elems, 0);
  std::vector<std::uint16_t> k_got;
  std::vector<double> k_want;
  std::size_t v_mismatched = 0, rows_written = 0;
  const std::int64_t num_slots = static_cast<std::int64_t>(c.num_pages) * spec.page_size;
  for (int t = 0; t < t_count; ++t) {
    const std::int64_t slot = c.slots[static_cast<std::size_t>(t)];
    if (slot < 0 || slot >= num_slots) continue;
    ++rows_written;
    for (int h = 0; h < kv_heads; ++h) {
      const std::size_t at = ref::cacheElement(c.layout, spec.page_size, kv_heads, d, slot, h);
      const std::size_t k_row = (static_cast<std::size_t>(t) * kv_heads + h) * d;
      const std::size_t v_in =
          (static_cast<std::size_t>(t) * heads + spec.q_heads + kv_heads + h) * d;
      for (int i = 0; i < d; ++i) {
        written[at + i] = 1;
        k_got.push_back(kc[at + i]);
        k_want.push_back(k_ref[k_row + i]);
        v_mismatched += vc[at + i] != c.qkv[v_in + i];
      }
    }
  }
  std::size_t k_stray = 0, v_stray = 0, k_unwritten = 0;
  for (std::size_t i = 0; i < c.cache_elems; ++i) {
    if (written[i]) {
      k_unwritten += kc[i] == kPoison;
    } else {
      k_stray += kc[i] != kPoison;
      v_stray += vc[i] != kPoison;
    }
  }
  errors->k = k_got.empty() ? 0.0 : ref::relativeL2(f, k_got.size(), k_got.data(), k_want.data());
  if (!(errors->k <= bound))
    err << "k_cache relative L2 error " << errors->k << " > " << bound << "; ";
  if (k_unwritten) err << k_unwritten << " k_cache elements of written rows still poison; ";
  if (v_mismatched) err << v_mismatched << " v_cache elements differ from v; ";
  if (k_stray || v_stray) {
    err << k_stray << " k_cache and " << v_stray
        << " v_cache elements written outside the slots of slot_mapping; ";
  }
  if (rows_written == 0) err << "no token has a slot in the cache (a bad case); ";

  if (spec.contiguous) {
    const std::vector<std::uint16_t> ko = download(c.d_ko), vo = download(c.d_vo);
    if (ko.size() < c.kv_elems + c.guard || vo.size() < c.kv_elems + c.guard) {
      return "download of k_out / v_out failed";
    }
    describe(err, scanOutput(ko, c.kv_elems, c.guard, dec), c.kv_elems);
    const double k_out_rel = ref::relativeL2(f, c.kv_elems, ko.data(), k_ref.data());
    if (!(k_out_rel <= bound))
      err << "k_out relative L2 error " << k_out_rel << " > " << bound << "; ";
    errors->k = std::max(errors->k, k_out_rel);
    std::size_t v_out_mismatched = 0;
    for (int t = 0; t < t_count; ++t) {
      for (int h = 0; h < kv_heads; ++h) {
        const std::size_t out = (static_cast<std::size_t>(t) * kv_heads + h) * d;
        const std::size_t in =
            (static_cast<std::size_t>(t) * heads + spec.q_heads + kv_heads + h) * d;
        for (int i = 0; i < d; ++i) v_out_mismatched += vo[out + i] != c.qkv[in + i];
      }
    }
    if (v_out_mismatched) err << v_out_mismatched << " v_out elements differ from v; ";
    if (const std::size_t g = countChanged(vo, c.kv_elems, c.kv_elems + c.guard)) {
      err << g << " elements written past the end of v_out; ";
    }
  }
  const std::vector<std::uint16_t> qkv_after = download(c.d_qkv);
  if (qkv_after.size() < c.qkv.size() ||
      std::memcmp(qkv_after.data(), c.qkv.data(), c.qkv.size() * 2) != 0) {
    err << "qkv was modified; ";
  }
  std::string message = err.str();
  if (!message.empty()) {
    message += "(rel L2 q " + std::to_string(errors->q) + ", k " + std::to_string(errors->k) + ")";
  }
  return message;
}

// Runs one (variant, case, layout); returns "" on success, else what failed.
std::string runCase(const generated::VariantInfo& v, const cases::Case& spec, ref::Layout layout,
                    Rng& rng, cudaStream_t stream, Errors* errors) {
  PreparedCase c;
  if (const std::string e = prepareCase(v, spec, layout, rng, &c); !e.empty()) return e;
  const kiln::Status s = qr::run(c.p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkCase(c, errors);
}

// The selector's own answer for a variant on this device (tokens = 0 skips the pointer checks).
kiln::Status deviceVerdict(const generated::VariantInfo& v) {
  qr::Problem probe;
  probe.dtype = v.dtype;
  probe.head_dim = v.head_dim;
  return qr::canImplement(probe, run().sm);
}

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). On the
// main thread: per thread and variant one case of cases.h (Qwen3's decode batch, the padded
// batch, or the partial-rotary MQA case; NHD or HND by thread), with random inputs and poisoned
// outputs and caches, and one non-blocking stream per thread. Then kFreshThreads threads with no
// current CUDA context and one whose current context is another context of the device
// (runOnFreshThreads) call run() at once, for every variant, in an order that makes the first
// launch of a variant race on several threads. A plain TEST runs before every parameterized one,
// so in a process of its own (--gtest_filter='*FreshThreads*') or first in a whole run, nothing
// has loaded a variant before these threads. Back on the main thread: every status ok, the
// streams synchronize, every output matches the float64 reference within the bounds, counted as
// the variant's "fresh_threads" and "fresh_threads_other_context" results.
TEST(QkropeFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  constexpr const char* kCaseNames[] = {"qwen3_16x8_t7", "qwen3_32x8_t33_pad",
                                        "partial_quarter_mqa12_t19"};
  auto specOf = [&](int t) -> const cases::Case* {
    for (const cases::Case* c : numericsCases()) {
      if (std::string(c->name) == kCaseNames[t % 3]) return c;
    }
    return nullptr;
  };
  auto layoutOf = [](int t) { return (t / 3) % 2 == 0 ? ref::Layout::kNHD : ref::Layout::kHND; };
  auto describeCase = [&](int t) {
    return std::string(kCaseNames[t % 3]) + (layoutOf(t) == ref::Layout::kHND ? "_hnd" : "");
  };
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    const kiln::Status s = deviceVerdict(v);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) -> std::string {
        const cases::Case* spec = specOf(t);
        if (spec == nullptr) return describeCase(t) + ": no such numerics case in cases.h";
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        prepared[t][i] = std::make_unique<PreparedCase>();
        return prepareCase(generated::kVariants[i], *spec, layoutOf(t), rng, prepared[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        return qr::run(prepared[t][i]->p, nullptr, 0, reinterpret_cast<kiln::Stream>(stream));
      },
      [&](int t, std::size_t i) {
        Errors errors;
        const std::string failure = checkCase(*prepared[t][i], &errors);
        return failure.empty() ? failure : describeCase(t) + ": " + failure;
      });
}

// Every case runs on both page layouts; an HND case's name ends in "_hnd".
struct VariantCase {
  std::size_t variant;
  std::size_t spec;
  ref::Layout layout;
};

std::vector<VariantCase> allCases() {
  std::vector<VariantCase> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
    for (const ref::Layout layout : {ref::Layout::kNHD, ref::Layout::kHND}) {
      for (std::size_t c = 0; c < numericsCases().size(); ++c) {
        const int head_dim = numericsCases()[c]->head_dim;
        if (head_dim == 0 || head_dim == generated::kVariants[i].head_dim) {
          all.push_back({i, c, layout});
        }
      }
    }
  }
  return all;
}

std::string caseName(const VariantCase& c) {
  return std::string(numericsCases()[c.spec]->name) + (c.layout == ref::Layout::kHND ? "_hnd" : "");
}

class QkropeNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(QkropeNumerics, MatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *numericsCases()[GetParam().spec];
  const std::string name = caseName(GetParam());
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, name);
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec) << 48) ^
          (static_cast<std::uint64_t>(GetParam().layout) << 40)};
  Errors errors;
  const std::string failure = runCase(v, spec, GetParam().layout, rng, stream, &errors);
  counts.recordCase(failure,
                    "rel L2 q " + std::to_string(errors.q) + ", k " + std::to_string(errors.k),
                    std::string(v.name) + " " + name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, QkropeNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + caseName(param_info.param);
                         });

// Runner errors on the device, once per built dtype (its first variant).
class QkropeRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(QkropeRunnerErrors, RefusesBadProblemsAndTreatsZeroTokensAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = deviceVerdict(v); !s.ok()) {
    counts.skipped += 5;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const cases::Case* spec = nullptr;
  for (const cases::Case* c : numericsCases()) {
    if (std::string(c->name) == "qwen3_16x8_t7") spec = c;
  }
  ASSERT_NE(spec, nullptr) << "cases.h has no qwen3_16x8_t7";
  Rng rng{run().seed ^ 0x5eedULL ^ GetParam()};
  PreparedCase c;
  ASSERT_EQ(prepareCase(v, *spec, ref::Layout::kNHD, rng, &c), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto untouched = [&]() {
    return allPoison(download(c.d_q)) && allPoison(download(c.d_kc)) && allPoison(download(c.d_vc));
  };

  {  // A head dim no variant has.
    qr::Problem p = c.p;
    p.head_dim = 96;
    const kiln::Status s = qr::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kNotSupported &&
               s.message().find("head_dim 96") != std::string::npos,
           "unbuilt head_dim: " + s.toString());
  }
  {  // qkv one element past an aligned address.
    qr::Problem p = c.p;
    p.qkv = static_cast<const std::uint16_t*>(c.d_qkv.ptr) + 1;
    const kiln::Status s = qr::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find("pointer qkv") != std::string::npos,
           "misaligned qkv: " + s.toString());
  }
  {  // A page size the caches' readers do not take.
    qr::Problem p = c.p;
    p.page_size = 8;
    const kiln::Status s = qr::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find("page_size 8") != std::string::npos,
           "page_size 8: " + s.toString());
  }
  {  // tokens = 0: ok, nothing written.
    qr::Problem p = c.p;
    p.tokens = 0;
    const kiln::Status s = qr::run(p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s.ok() && untouched(), "tokens 0: " + s.toString());
  }
  {  // The admitted problem runs (and canImplement agrees) and checks out.
    const kiln::Status can = qr::canImplement(c.p, run().sm);
    const kiln::Status s = qr::run(c.p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    Errors errors;
    const std::string failure = s.ok() ? checkCase(c, &errors) : "";
    record(can.ok() && s.ok() && failure.empty(), "valid problem: canImplement " + can.toString() +
                                                      ", run " + s.toString() + " " + failure);
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, QkropeRunnerErrors,
                         ::testing::ValuesIn(firstVariantPerDtype(generated::kVariants)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "qkrope";
  f.case_key = "case";
  f.per_variant_totals = true;
  std::ostringstream json;
  json << "\"cases\": [";
  for (std::size_t i = 0; i < numericsCases().size(); ++i) {
    const cases::Case& c = *numericsCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"tokens\": " << c.tokens
         << ", \"q_heads\": " << c.q_heads << ", \"kv_heads\": " << c.kv_heads
         << ", \"page_size\": " << c.page_size << ", \"rotary_dim\": " << c.rotary_dim
         << ", \"qk_norm\": " << (c.qk_norm ? "true" : "false") << "}";
  }
  json << "]";
  f.extra_json = json.str();
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
