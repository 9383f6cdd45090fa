// GPU numerics of the decodeattn group: every variant of the linked artifact over the cases of
// kernels/decodeattn/tests/gpu/cases.h marked kNumerics (boundary lengths, long sequences, large
// batches, GQA ratios 1 / 4 / 8 / 40, every admitted page size, 1 to 8 query tokens per sequence
// (multi-token decoding, causal over them), and the benchmark's rows), against the float64
// reference in kernels/decodeattn/reference.h.
//
// Each case, on both page layouts (NHD and HND): fresh random q, K, V (the seed is printed;
// KILN_SEED=<n> replays a run), a paged cache whose pages are handed out in a random permutation,
// with every unused page and every row past a sequence's length poisoned (0xffff, NaN in fp16 and
// bf16) and page-table entries past the length set to -1; output, a guard past it and the workspace
// poisoned too. One run() on a non-default stream, then: status ok, every output element written
// and finite, the guard untouched, length-0 sequences exactly zero, relative L2 error within the
// bound. Some cases force the split count through Problem::multiprocessors, so both the single-pass
// and the split + merge path run on every variant. Runner errors (unbuilt head dim, misaligned q,
// small workspace, batch 0) are checked on the device too. The summary (stdout, and JSON at
// $KILN_EVIDENCE_OUT) records what docs/performance-method.md asks of evidence; the process exits
// non-zero on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/dtype_format.h"
#include "common/gpu_test_support.h"
#include "decodeattn/reference.h"
#include "decodeattn/tests/gpu/cases.h"
#include "kiln/groups/decodeattn.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/decodeattn.h"
#include "kiln/runtime.h"

#if !defined(KILN_DECODEATTN_ENABLED)
#error "the artifact has no decodeattn group: kiln build --gpu-arch sm_NN --kernels decodeattn"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::decodeattn::reference;
namespace generated = kiln::generated::decodeattn;
namespace da = kiln::decodeattn;
namespace cases = kiln::decodeattn::cases;

// Error bounds (docs/performance-method.md, Method 2): fp32 accumulation, 16-bit inputs, the
// output rounded once.
// The kernel also rounds P (softmax weights in [0, 1]) once to the dtype for the P.V mma, and
// sums the same rounded weights, so the output is a convex combination of V rows whose weights
// carry a relative error <= u (2^-11 fp16, 2^-8 bf16): that adds ~u/sqrt(3) relative L2, the
// same size as the output's own rounding, which the bounds already allow for twice over.

// ---- inputs -------------------------------------------------------------------------------

// ---- cases ----------------------------------------------------------------------------------

// The cases are kernels/decodeattn/tests/gpu/cases.h's marked kNumerics: those of any head dim on
// every variant, the benchmark's (head dim 128) on the variants of theirs.
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

// The reference, one slice of sequences per core: ref::decodeAttention of each slice is the same
// problem over its sequences' rows of q, the page table, the lengths and out.
void referenceAttention(const ref::PagedProblem& p, double* out) {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  const int per = (p.batch + static_cast<int>(threads) - 1) / static_cast<int>(threads);
  const std::size_t q_per_seq = static_cast<std::size_t>(p.query_tokens) * p.q_heads * p.head_dim;
  std::vector<std::thread> pool;
  for (int first = 0; first < p.batch; first += per) {
    ref::PagedProblem slice = p;
    slice.batch = std::min(per, p.batch - first);
    slice.q = p.q + static_cast<std::size_t>(first) * q_per_seq;
    slice.page_table = p.page_table + static_cast<std::size_t>(first) * p.max_pages_per_seq;
    slice.seq_lens = p.seq_lens + first;
    double* slice_out = out + static_cast<std::size_t>(first) * q_per_seq;
    pool.emplace_back([slice, slice_out]() { ref::decodeAttention(slice, slice_out); });
  }
  for (std::thread& t : pool) t.join();
}

// One (variant, case, layout), prepared: its host inputs, its device buffers (inputs uploaded;
// out, its guard and the workspace poisoned) and the problem that run() takes.
struct PreparedCase {
  const cases::Case* spec = nullptr;
  ref::Format f = ref::Format::kBFloat16;
  ref::Layout layout = ref::Layout::kNHD;
  int d = 0, batch = 0, max_pages_per_seq = 0;
  double scale = 0.0;
  std::size_t out_elems = 0, guard = 0, ws_bytes = 0;
  std::vector<int> lens;
  std::vector<std::int32_t> table, seq_lens;
  std::vector<std::uint16_t> q, k, vv;
  DeviceBuffer d_q, d_k, d_v, d_table, d_lens, d_out, d_ws;
  da::Problem p;
};

// Draws the case's inputs and prepares it; returns "" on success, else what failed.
std::string prepareCase(const generated::VariantInfo& v, const cases::Case& spec,
                        ref::Layout layout, Rng& rng, PreparedCase* c) {
  const ref::Format f = formatOf(v.dtype);
  const int d = v.head_dim;
  std::vector<int> lens;
  for (int b = 0; b < cases::batchOf(spec); ++b) {
    lens.push_back(spec.lengths.count > 0 ? spec.lengths.values[b % spec.lengths.count]
                                          : 1 + rng.below(spec.max_random_len));
  }
  const int batch = static_cast<int>(lens.size());
  const int ps = spec.page_size;
  const int max_len = *std::max_element(lens.begin(), lens.end());
  const int max_pages_per_seq = (max_len + ps - 1) / ps + 1;  // one spare entry (set to -1)
  int used_pages = 0;
  for (int len : lens) used_pages += (len + ps - 1) / ps;
  const int num_pages = used_pages + used_pages / 8 + 3;  // unused pages stay poisoned

  // Pages handed out in a random permutation; table entries past a sequence's pages are -1.
  std::vector<std::int32_t> perm(static_cast<std::size_t>(num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  for (int i = num_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * max_pages_per_seq, -1);
  std::vector<std::int32_t> seq_lens(lens.begin(), lens.end());
  const std::size_t row_elems = static_cast<std::size_t>(spec.kv_heads) * d;  // one key, all heads
  const std::size_t cache_elems = static_cast<std::size_t>(num_pages) * ps * row_elems;
  std::vector<std::uint16_t> k(cache_elems, kPoison), vv(cache_elems, kPoison);
  int next = 0;
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < lens[b]; ++j) {
      if (j % ps == 0)
        table[static_cast<std::size_t>(b) * max_pages_per_seq + j / ps] = perm[next++];
      const std::size_t page =
          static_cast<std::size_t>(table[static_cast<std::size_t>(b) * max_pages_per_seq + j / ps]);
      for (int h = 0; h < spec.kv_heads; ++h) {
        const std::size_t base = ref::pageElement(layout, ps, spec.kv_heads, d, page, j % ps, h);
        for (int i = 0; i < d; ++i) {
          k[base + i] = randomBits(rng, f, -4, 0);
          vv[base + i] = randomBits(rng, f, -4, 0);
        }
      }
    }
  }
  const int tokens = spec.query_tokens;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * tokens * spec.q_heads * d;
  std::vector<std::uint16_t> q(out_elems);
  for (auto& x : q) x = randomBits(rng, f, -3, 0);
  const double scale = spec.scale_factor / std::sqrt(static_cast<double>(d));

  DeviceBuffer &d_q = c->d_q, &d_k = c->d_k, &d_v = c->d_v, &d_table = c->d_table,
               &d_lens = c->d_lens, &d_out = c->d_out, &d_ws = c->d_ws;
  const std::size_t guard = 64;  // elements past out that must stay poisoned
  for (const std::string& e :
       {allocate(&d_q, q.size() * 2, q.data(), q.size() * 2),
        allocate(&d_k, k.size() * 2, k.data(), k.size() * 2),
        allocate(&d_v, vv.size() * 2, vv.data(), vv.size() * 2),
        allocate(&d_table, table.size() * 4, table.data(), table.size() * 4),
        allocate(&d_lens, seq_lens.size() * 4, seq_lens.data(), seq_lens.size() * 4),
        allocate(&d_out, (out_elems + guard) * 2, nullptr, 0)}) {
    if (!e.empty()) return e;
  }

  da::Problem& p = c->p;
  p.dtype = v.dtype;
  p.batch = batch;
  p.q_heads = spec.q_heads;
  p.kv_heads = spec.kv_heads;
  p.head_dim = d;
  p.query_tokens = tokens;
  p.page_size = ps;
  p.kv_layout = layout == ref::Layout::kNHD ? da::KvLayout::kNHD : da::KvLayout::kHND;
  p.num_pages = num_pages;
  p.max_pages_per_seq = max_pages_per_seq;
  p.max_seq_len = spec.max_seq_len;
  p.multiprocessors = spec.multiprocessors;
  p.scale = static_cast<float>(scale);
  p.out = d_out.ptr;
  p.q = d_q.ptr;
  p.k_cache = d_k.ptr;
  p.v_cache = d_v.ptr;
  p.page_table = static_cast<const std::int32_t*>(d_table.ptr);
  p.seq_lens = static_cast<const std::int32_t*>(d_lens.ptr);
  const std::size_t ws_bytes = da::workspaceSize(p);
  if (const std::string e = allocate(&d_ws, ws_bytes, nullptr, 0); !e.empty()) return e;  // NaN
  c->spec = &spec;
  c->f = f;
  c->layout = layout;
  c->d = d;
  c->batch = batch;
  c->max_pages_per_seq = max_pages_per_seq;
  c->scale = scale;
  c->out_elems = out_elems;
  c->guard = guard;
  c->ws_bytes = ws_bytes;
  c->lens = std::move(lens);
  c->table = std::move(table);
  c->seq_lens = std::move(seq_lens);
  c->q = std::move(q);
  c->k = std::move(k);
  c->vv = std::move(vv);
  return "";
}

// Checks a case whose run() succeeded and whose stream is synchronized against the float64
// reference; returns "" on success, else what failed. *error gets the rel L2.
std::string checkCase(const PreparedCase& c, double* error) {
  const cases::Case& spec = *c.spec;
  const ref::Format f = c.f;
  const ref::Layout layout = c.layout;
  const int d = c.d, batch = c.batch, max_pages_per_seq = c.max_pages_per_seq;
  const int tokens = spec.query_tokens, ps = spec.page_size;
  const double scale = c.scale;
  const std::size_t out_elems = c.out_elems, guard = c.guard;
  const std::vector<int>& lens = c.lens;
  const da::Problem& p = c.p;
  ref::PagedProblem rp;
  rp.format = f;
  rp.layout = layout;
  rp.batch = batch;
  rp.q_heads = spec.q_heads;
  rp.kv_heads = spec.kv_heads;
  rp.head_dim = d;
  rp.query_tokens = tokens;
  rp.page_size = ps;
  rp.max_pages_per_seq = max_pages_per_seq;
  rp.scale = static_cast<double>(static_cast<float>(scale));  // the float the kernel was given
  rp.q = c.q.data();
  rp.k_cache = c.k.data();
  rp.v_cache = c.vv.data();
  rp.page_table = c.table.data();
  rp.seq_lens = c.seq_lens.data();
  std::vector<double> expected(out_elems);
  referenceAttention(rp, expected.data());

  const std::vector<std::uint16_t> out = download<std::uint16_t>(c.d_out);
  if (out.size() < out_elems + guard) return "download of out failed";
  std::ostringstream err;
  const ref::Decoder dec(f);
  const OutputScan scan = scanOutput(out, out_elems, guard, dec);
  // Rows without a key (length 0, or a token whose causal limit is <= 0) must be exactly zero.
  std::size_t empty_nonzero = 0;
  const std::size_t per_row = static_cast<std::size_t>(spec.q_heads) * d;  // one (b, t)
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < tokens; ++t) {
      if (lens[b] - (tokens - 1 - t) > 0) continue;
      const std::size_t first = (static_cast<std::size_t>(b) * tokens + t) * per_row;
      for (std::size_t i = 0; i < per_row; ++i) empty_nonzero += dec(out[first + i]) != 0.0;
    }
  }
  describe(err, scan, out_elems);
  if (empty_nonzero) err << empty_nonzero << " outputs of rows without a key are not 0; ";
  const double bound = f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  const double rel = ref::relativeL2(f, out_elems, out.data(), expected.data());
  *error = rel;
  if (!(rel <= bound)) err << "relative L2 error " << rel << " > bound " << bound << "; ";
  const int splits =
      da::numSplits(p, p.multiprocessors > 0 ? p.multiprocessors : run().multiprocessors);
  std::string message = err.str();
  if (!message.empty()) {
    message += "(splits " + std::to_string(splits) + ", rel L2 " + std::to_string(rel) + ")";
  }
  return message;
}

// Runs one (variant, case); returns "" on success, else what failed. *error gets the rel L2.
std::string runCase(const generated::VariantInfo& v, const cases::Case& spec, ref::Layout layout,
                    Rng& rng, cudaStream_t stream, double* error) {
  PreparedCase c;
  if (const std::string e = prepareCase(v, spec, layout, rng, &c); !e.empty()) return e;
  const kiln::Status s =
      da::run(c.p, c.d_ws.ptr, c.ws_bytes, reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkCase(c, error);
}

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). On the
// main thread: per thread and variant one case of cases.h (the boundary lengths split over the
// device's SMs, the same on one split, or two query tokens; NHD or HND by thread), with random
// inputs and poisoned outputs and workspace, and one non-blocking stream per thread. Then
// kFreshThreads threads with no current CUDA context and one whose current context is another
// context of the device (runOnFreshThreads) call run() at once, for every variant, in an order
// that makes the first launch of a variant race on several threads. A plain TEST runs before
// every parameterized one, so in a process of its own (--gtest_filter='*FreshThreads*') or first
// in a whole run, nothing has loaded a variant before these threads. Back on the main thread:
// every status ok, the streams synchronize, every output matches the float64 reference within the
// bounds, counted as the variant's "fresh_threads" and "fresh_threads_other_context" results.
TEST(DecodeAttentionFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  constexpr const char* kCaseNames[] = {"lengths_gqa8_p16", "lengths_gqa8_p64_one_split",
                                        "mtp2_gqa4_p16"};
  auto specOf = [&](int t) -> const cases::Case* {
    for (const cases::Case* c : numericsCases()) {
      if (std::string(c->name) == kCaseNames[t % 3]) return c;
    }
    return nullptr;
  };
  auto layoutOf = [](int t) { return (t / 3) % 2 == 0 ? ref::Layout::kNHD : ref::Layout::kHND; };
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    da::Problem probe;  // batch = 0 skips the pointer checks
    probe.dtype = v.dtype;
    probe.head_dim = v.head_dim;
    const kiln::Status s = da::canImplement(probe, run().sm);
    variants.push_back({kiln::dtypeName(v.dtype), v.name, s.ok() ? "" : s.toString()});
  }
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  auto describeCase = [&](int t) {
    return std::string(kCaseNames[t % 3]) + (layoutOf(t) == ref::Layout::kHND ? "_hnd" : "");
  };
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) -> std::string {
        const cases::Case* spec = specOf(t);
        const auto& v = generated::kVariants[i];
        if (spec == nullptr) return describeCase(t) + ": no such numerics case in cases.h";
        if (spec->head_dim != 0 && spec->head_dim != v.head_dim) {
          return describeCase(t) + ": not a case of head dim " + std::to_string(v.head_dim);
        }
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        prepared[t][i] = std::make_unique<PreparedCase>();
        return prepareCase(v, *spec, layoutOf(t), rng, prepared[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        const PreparedCase& c = *prepared[t][i];
        return da::run(c.p, c.d_ws.ptr, c.ws_bytes, reinterpret_cast<kiln::Stream>(stream));
      },
      [&](int t, std::size_t i) {
        double rel = 0.0;
        const std::string failure = checkCase(*prepared[t][i], &rel);
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

class DecodeAttentionNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(DecodeAttentionNumerics, MatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *numericsCases()[GetParam().spec];
  const std::string name = caseName(GetParam());
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, name);

  // The selector's own answer for this device (batch = 0 skips the pointer checks).
  da::Problem probe;
  probe.dtype = v.dtype;
  probe.head_dim = v.head_dim;
  if (const kiln::Status s = da::canImplement(probe, run().sm); !s.ok()) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec) << 48) ^
          (static_cast<std::uint64_t>(GetParam().layout) << 40)};
  double rel = 0.0;
  const std::string failure = runCase(v, spec, GetParam().layout, rng, stream, &rel);
  counts.recordCase(failure, "rel L2 " + std::to_string(rel), std::string(v.name) + " " + name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, DecodeAttentionNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + caseName(param_info.param);
                         });

// Runner errors on the device, once per built dtype (its first variant).
class DecodeAttentionRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(DecodeAttentionRunnerErrors, RefusesBadProblemsAndTreatsZeroBatchAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  da::Problem probe;
  probe.dtype = v.dtype;
  probe.head_dim = v.head_dim;
  if (const kiln::Status s = da::canImplement(probe, run().sm); !s.ok()) {
    counts.skipped += 5;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const int batch = 2, q_heads = 8, kv_heads = 2, d = v.head_dim, ps = 16, len = 4096;
  const int pages_per_seq = len / ps;
  const std::size_t cache_elems = static_cast<std::size_t>(batch) * len * kv_heads * d;
  const std::size_t out_elems = static_cast<std::size_t>(batch) * q_heads * d;
  const std::vector<std::uint16_t> ones(cache_elems, 0x3c00 /* 1.0 fp16; 1.0078 bf16 */);
  std::vector<std::int32_t> table(static_cast<std::size_t>(batch) * pages_per_seq);
  std::iota(table.begin(), table.end(), 0);
  const std::vector<std::int32_t> lens(batch, len);
  DeviceBuffer d_q, d_k, d_v, d_table, d_lens, d_out;
  ASSERT_EQ(allocate(&d_q, out_elems * 2 + 16, ones.data(), out_elems * 2), "");
  ASSERT_EQ(allocate(&d_k, cache_elems * 2, ones.data(), cache_elems * 2), "");
  ASSERT_EQ(allocate(&d_v, cache_elems * 2, ones.data(), cache_elems * 2), "");
  ASSERT_EQ(allocate(&d_table, table.size() * 4, table.data(), table.size() * 4), "");
  ASSERT_EQ(allocate(&d_lens, lens.size() * 4, lens.data(), lens.size() * 4), "");
  ASSERT_EQ(allocate(&d_out, out_elems * 2, nullptr, 0), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);

  da::Problem good;
  good.dtype = v.dtype;
  good.batch = batch;
  good.q_heads = q_heads;
  good.kv_heads = kv_heads;
  good.head_dim = d;
  good.page_size = ps;
  good.num_pages = batch * pages_per_seq;
  good.max_pages_per_seq = pages_per_seq;
  good.scale = 0.125f;
  good.out = d_out.ptr;
  good.q = d_q.ptr;
  good.k_cache = d_k.ptr;
  good.v_cache = d_v.ptr;
  good.page_table = static_cast<const std::int32_t*>(d_table.ptr);
  good.seq_lens = static_cast<const std::int32_t*>(d_lens.ptr);
  good.multiprocessors = run().multiprocessors;  // 2 x 2 pairs: split on any real GPU
  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << what;
  };
  auto outUntouched = [&]() { return allPoison(download<std::uint16_t>(d_out)); };

  {  // A head dim no variant has.
    da::Problem p = good;
    p.head_dim = 96;
    const kiln::Status s = da::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kNotSupported &&
               s.message().find("head_dim 96") != std::string::npos,
           "unbuilt head_dim: " + s.toString());
  }
  {  // q one element past an aligned address.
    da::Problem p = good;
    p.q = static_cast<const std::uint16_t*>(d_q.ptr) + 1;
    const kiln::Status s = da::run(p, nullptr, 0, kstream);
    record(s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find("pointer q") != std::string::npos,
           "misaligned q: " + s.toString());
  }
  const std::size_t ws_bytes = da::workspaceSize(good);
  DeviceBuffer d_ws;
  ASSERT_EQ(allocate(&d_ws, ws_bytes, nullptr, 0), "");
  {  // A workspace one byte short (the problem splits: 4 blocks cannot fill a GPU).
    const kiln::Status s = da::run(good, d_ws.ptr, ws_bytes - 1, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(ws_bytes > 0 && s.code() == kiln::StatusCode::kInvalidArgument &&
               s.message().find("workspace") != std::string::npos && outUntouched(),
           "small workspace (" + std::to_string(ws_bytes) + " bytes needed): " + s.toString());
  }
  {  // batch = 0: ok, nothing written.
    da::Problem p = good;
    p.batch = 0;
    const kiln::Status s = da::run(p, nullptr, 0, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s.ok() && outUntouched(), "batch 0: " + s.toString());
  }
  {  // The admitted problem runs (and canImplement agrees); equal values: out = that value.
    const kiln::Status can = da::canImplement(good, run().sm);
    const kiln::Status s = da::run(good, d_ws.ptr, ws_bytes, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto out = download<std::uint16_t>(d_out);
    bool all_one = !out.empty();
    for (std::uint16_t b : out) all_one = all_one && b == 0x3c00;
    record(can.ok() && s.ok() && all_one,
           "valid problem: canImplement " + can.toString() + ", run " + s.toString() +
               (all_one ? "" : ", output is not exactly the (constant) value"));
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, DecodeAttentionRunnerErrors,
                         ::testing::ValuesIn(firstVariantPerDtype(generated::kVariants)),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "decodeattn";
  f.case_key = "case";
  f.show_multiprocessors = true;
  f.per_variant_totals = true;
  std::ostringstream json;
  json << "\"cases\": [";
  for (std::size_t i = 0; i < numericsCases().size(); ++i) {
    const cases::Case& c = *numericsCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"q_heads\": " << c.q_heads
         << ", \"kv_heads\": " << c.kv_heads << ", \"page_size\": " << c.page_size
         << ", \"multiprocessors\": " << c.multiprocessors << "}";
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
