// GPU numerics of the fmha group (prefill attention, TMA + wgmma, sm_90a): every variant of the
// linked artifact (head dim x dtype x mask) over the cases of kernels/fmha/tests/gpu/cases.h marked
// kNumerics: single sequences of every tile-boundary length (1, 2, 63, 64, 65, 127, 128, 129, 1000,
// 4097), ragged batches that mix them, GQA ratios 1 / 4 / 8 and MQA, fewer queries than keys
// (chunked prefill), more queries than keys (causal queries that see no key), sequences with no
// queries or no keys, softmax scales other than 1 / sqrt(d), with and without lse, and the
// benchmark's smallest rows, against the float64 reference in kernels/fmha/reference.h.
//
// Each case: fresh random q, k, v (the seed is printed; KILN_SEED=<n> replays a run); out, lse and
// a guard past each poisoned (0xffff / 0xffffffff, NaN); one run() on a non-default stream, then:
// status ok and canImplement agrees; every output element and every lse written and finite, except
// that a query that sees no key has out exactly 0 and lse exactly -inf; the guards untouched;
// relative L2 error of out within the bound, and of every (token, head) row within twice it; lse
// within its absolute bound. Runner errors (unbuilt head dim, misaligned and null pointers, bad
// head counts and scales, an SM without an image, batch 0) and the admitted problem's exact
// answer are checked per variant on the device, and the doctor's verdict per variant is printed
// and checked against the selector's. The summary (stdout, and JSON at $KILN_EVIDENCE_OUT) records
// what docs/performance-method.md asks of evidence; the process exits non-zero on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/dtype_format.h"
#include "common/gpu_test_support.h"
#include "fmha/reference.h"
#include "fmha/tests/gpu/cases.h"
#include "kiln/groups/fmha.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/fmha.h"
#include "kiln/runtime.h"

#if !defined(KILN_FMHA_ENABLED)
#error "the artifact has no fmha group: kiln build --gpu-arch sm_90 --kernels fmha"
#endif

namespace {

using namespace kiln::gpu_test;  // NOLINT: Counts, run(), DeviceBuffer, allocate, download, ...
namespace ref = kiln::fmha::reference;
namespace generated = kiln::generated::fmha;
namespace fmha = kiln::fmha;
namespace cases = kiln::fmha::cases;

// Output bounds (docs/performance-method.md, Method 2): fp32 accumulation of exact 16-bit products,
// the output
// rounded once. The kernel also rounds P (softmax weights in [0, 1]) once to the dtype for the
// P.V wgmma, as decodeattn does (kernels/decodeattn/README.md): the output is then a combination
// of V rows whose weights each carry a relative error <= u (2^-11 fp16, 2^-8 bf16), which adds
// ~u/sqrt(3) relative L2 whether the row sums add the rounded or the unrounded weights, the same
// size as the output's own rounding, which the bounds already allow for twice over.
// Per (token, head) row: the same per-element errors over only head_dim (>= 64) elements, so a
// row's relative L2 scatters around the whole output's (the worst of ~10^4 rows ~2.5x the typical
// one, ~3e-3 bf16 / ~1e-3 fp16 expected). Twice the bound keeps 3x of room over that and catches
// what a norm over the whole output dilutes: one wrong row among 8194 moves the whole-output rel
// L2 by only ~1 / sqrt(8194) ~ 1.1e-2, under the bf16 bound.
constexpr double kRowBoundFactor = 2.0;
// lse, absolute (a log: an absolute error e is a relative error e of exp(lse)). The row sum l may
// add the weights rounded to the dtype (|dl / l| <= u/2: 2.4e-4 fp16, 2e-3 bf16); fp32 scores of
// head_dim exact products at these magnitudes (|q|, |k| < 2, scale <= 4 / sqrt(d)) are off by
// <= ~3e-4 worst case, fp32 sums of <= 4097 terms and the exp2 / log approximations by less.
// Each bound is ~2x that sum; an lse in log2 instead of ln, without the scale or without the max
// is off by >= 0.3.
constexpr double kLseAbsBoundFp16 = 1e-3;
constexpr double kLseAbsBoundBf16 = 4e-3;

constexpr std::uint32_t kPoison32 = 0xffffffffu;  // a NaN as float (what memset 0xff writes)

// ---- inputs -------------------------------------------------------------------------------

bool isCausal(const generated::VariantInfo& v) {
  return v.mask == fmha::Mask::kCausal;
}
std::uint16_t oneBits(ref::Format f) {
  return f == ref::Format::kFloat16 ? 0x3c00 : 0x3f80;
}

// ---- cases ----------------------------------------------------------------------------------

using cases::Seq;

// The cases are kernels/fmha/tests/gpu/cases.h's marked kNumerics: the boundary, ragged, GQA and
// chunked cases on every variant, the benchmark's smallest rows on the variants of their head dim.
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

// Whether case `c` is for variant `v` (its head dim, dtype and mask; paged K / V only on the mma
// kernel, a window only with the causal mask).
bool caseFor(const cases::Case& c, const generated::VariantInfo& v) {
  const bool mma_only = c.mma_only || c.page_size > 0;
  if (mma_only && v.kernel != fmha::Kernel::kMma) return false;
  if (c.window_left >= 0 && v.mask != fmha::Mask::kCausal) return false;
  const bool dtype_ok = c.dtypes == cases::Dtypes::kBoth ||
                        (c.dtypes == cases::Dtypes::kFp16) == (v.dtype == kiln::DType::kFloat16);
  const bool mask_ok = c.masks == cases::Masks::kBoth ||
                       (c.masks == cases::Masks::kCausal) == (v.mask == fmha::Mask::kCausal);
  return (c.head_dim == 0 || c.head_dim == v.head_dim) && dtype_ok && mask_ok;
}

// The packed batch of a case: its sequences, `repeat` times.
std::vector<Seq> sequencesOf(const cases::Case& c) {
  std::vector<Seq> seqs;
  for (int r = 0; r < c.repeat; ++r) {
    for (int i = 0; i < c.seqs.count; ++i) seqs.push_back(c.seqs.values[i]);
  }
  return seqs;
}

// ---- reference, spread over threads -------------------------------------------------------

// attendQuery for every (sequence, head, query) row, rows handed out in chunks to every core:
// rows differ in cost (causal, ragged), so a shared counter balances them.
void referenceAttention(const ref::Problem& p, double* out, double* lse) {
  struct Row {
    int b, h, i;
  };
  std::vector<Row> rows;
  for (int b = 0; b < p.batch; ++b) {
    const int sq = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
    for (int h = 0; h < p.q_heads; ++h) {
      for (int i = 0; i < sq; ++i) rows.push_back({b, h, i});
    }
  }
  constexpr std::size_t kChunk = 16;
  std::atomic<std::size_t> next{0};
  auto work = [&]() {
    std::vector<double> scores;
    for (;;) {
      const std::size_t begin = next.fetch_add(kChunk);
      if (begin >= rows.size()) return;
      const std::size_t end = std::min(rows.size(), begin + kChunk);
      for (std::size_t r = begin; r < end; ++r) {
        ref::attendQuery(p, rows[r].b, rows[r].h, rows[r].i, scores, out, lse);
      }
    }
  };
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

// ---- one case --------------------------------------------------------------------------------

struct CaseResult {
  double rel = 0.0;        // whole-output relative L2
  double worst_row = 0.0;  // worst (token, head) row relative L2
  double lse_err = 0.0;    // worst lse absolute error (0 when lse is not requested)
};

// One (variant, case), prepared: its host inputs, its device buffers (inputs uploaded; out, lse
// and a guard past each poisoned) and the problem that run() takes.
struct PreparedCase {
  const cases::Case* spec = nullptr;
  ref::Format f = ref::Format::kBFloat16;
  bool causal = false;
  int d = 0, batch = 0, total_q = 0, total_k = 0;
  double scale = 0.0;
  std::size_t q_elems = 0, lse_elems = 0, guard = 0, ws_bytes = 0;
  std::vector<std::int32_t> cu_q, cu_k;
  std::vector<std::uint16_t> q, k, vv;
  DeviceBuffer d_q, d_k, d_v, d_cu_q, d_cu_k, d_out, d_lse, d_ws;
  DeviceBuffer d_page_table, d_seq_lens;  // paged cases
  fmha::Problem p;
};

// Paged K / V for a case (case.page_size > 0): the contiguous keys of every sequence scattered over
// pages of the cache in random order (NHD or HND), the page table and the key counts; every cache
// row no sequence owns (past a sequence's keys, two spare pages) is poisoned (NaN), and unused
// page-table entries point past the cache.
struct PagedKv {
  int max_pages = 1, num_pages = 0;
  std::vector<std::int32_t> page_table, seq_lens;
  std::vector<std::uint16_t> k, v;
};
PagedKv scatterToPages(const cases::Case& spec, int d, const std::vector<std::int32_t>& cu_k,
                       const std::vector<std::uint16_t>& k, const std::vector<std::uint16_t>& v,
                       Rng& rng) {
  PagedKv paged;
  const int ps = spec.page_size, kvh = spec.kv_heads;
  const int batch = static_cast<int>(cu_k.size()) - 1;
  int total_pages = 0;
  for (int b = 0; b < batch; ++b) {
    const int pages = (cu_k[b + 1] - cu_k[b] + ps - 1) / ps;
    total_pages += pages;
    paged.max_pages = std::max(paged.max_pages, pages);
  }
  paged.num_pages = total_pages + 2;
  std::vector<std::int32_t> order(static_cast<std::size_t>(paged.num_pages));
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
  for (std::size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[static_cast<std::size_t>(rng.below(static_cast<int>(i)))]);
  }
  const std::size_t cache = static_cast<std::size_t>(paged.num_pages) * ps * kvh * d;
  paged.k.assign(cache, 0xffff);
  paged.v.assign(cache, 0xffff);
  paged.page_table.assign(static_cast<std::size_t>(batch) * paged.max_pages, paged.num_pages + 7);
  std::size_t next = 0;
  for (int b = 0; b < batch; ++b) {
    const int sk = cu_k[b + 1] - cu_k[b];
    paged.seq_lens.push_back(sk);
    for (int page_index = 0; page_index * ps < sk; ++page_index) {
      const std::int32_t page = order[next++];
      paged.page_table[static_cast<std::size_t>(b) * paged.max_pages + page_index] = page;
      for (int r = 0; r < ps && page_index * ps + r < sk; ++r) {
        const std::size_t key = static_cast<std::size_t>(cu_k[b]) + page_index * ps + r;
        for (int h = 0; h < kvh; ++h) {
          const std::size_t row = spec.hnd ? (static_cast<std::size_t>(page) * kvh + h) * ps + r
                                           : (static_cast<std::size_t>(page) * ps + r) * kvh + h;
          for (int c = 0; c < d; ++c) {
            paged.k[row * d + c] = k[(key * kvh + h) * d + c];
            paged.v[row * d + c] = v[(key * kvh + h) * d + c];
          }
        }
      }
    }
  }
  return paged;
}

// Draws the case's inputs and prepares it (canImplement must admit it); returns "" on success,
// else what failed.
std::string prepareCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                        PreparedCase* c) {
  const ref::Format f = formatOf(v.dtype);
  const bool causal = isCausal(v);
  const int d = v.head_dim;
  const std::vector<Seq> seqs = sequencesOf(spec);
  const int batch = static_cast<int>(seqs.size());
  std::vector<std::int32_t> cu_q{0}, cu_k{0};
  int max_sq = 0;
  for (const Seq& s : seqs) {
    cu_q.push_back(cu_q.back() + s.q);
    cu_k.push_back(cu_k.back() + s.k);
    max_sq = std::max(max_sq, s.q);
  }
  const int total_q = cu_q.back(), total_k = cu_k.back();
  const std::size_t q_elems = static_cast<std::size_t>(total_q) * spec.q_heads * d;
  const std::size_t kv_elems = static_cast<std::size_t>(total_k) * spec.kv_heads * d;
  const std::size_t lse_elems = static_cast<std::size_t>(spec.q_heads) * total_q;
  std::vector<std::uint16_t> q(q_elems), k(kv_elems), vv(kv_elems);
  for (auto& x : q) x = randomBits(rng, f, -3, 0);
  for (auto& x : k) x = randomBits(rng, f, -4, 0);
  for (auto& x : vv) x = randomBits(rng, f, -4, 0);
  const double scale = spec.scale_factor / std::sqrt(static_cast<double>(d));
  const PagedKv paged = spec.page_size > 0 ? scatterToPages(spec, d, cu_k, k, vv, rng) : PagedKv{};
  const std::vector<std::uint16_t>& k_in = spec.page_size > 0 ? paged.k : k;
  const std::vector<std::uint16_t>& v_in = spec.page_size > 0 ? paged.v : vv;

  const std::size_t guard = 64;  // elements past out and lse that must stay poisoned
  DeviceBuffer &d_q = c->d_q, &d_k = c->d_k, &d_v = c->d_v, &d_cu_q = c->d_cu_q,
               &d_cu_k = c->d_cu_k, &d_out = c->d_out, &d_lse = c->d_lse, &d_ws = c->d_ws;
  for (const std::string& e :
       {allocate(&d_q, q.size() * 2, q.data(), q.size() * 2),
        allocate(&d_k, k_in.size() * 2, k_in.data(), k_in.size() * 2),
        allocate(&d_v, v_in.size() * 2, v_in.data(), v_in.size() * 2),
        allocate(&d_cu_q, cu_q.size() * 4, cu_q.data(), cu_q.size() * 4),
        allocate(&d_cu_k, cu_k.size() * 4, cu_k.data(), cu_k.size() * 4),
        allocate(&d_out, (q_elems + guard) * 2, nullptr, 0),
        spec.lse ? allocate(&d_lse, (lse_elems + guard) * 4, nullptr, 0) : std::string()}) {
    if (!e.empty()) return e;
  }

  fmha::Problem& p = c->p;
  p.dtype = v.dtype;
  p.mask = v.mask;
  p.head_dim = d;
  p.batch = batch;
  p.q_heads = spec.q_heads;
  p.kv_heads = spec.kv_heads;
  p.total_q = total_q;
  p.total_k = total_k;
  p.max_seqlen_q = spec.max_seqlen_hint ? max_sq : 0;
  p.scale = static_cast<float>(scale);
  p.out = d_out.ptr;
  p.lse = spec.lse ? static_cast<float*>(d_lse.ptr) : nullptr;
  p.q = d_q.ptr;
  p.k = d_k.ptr;
  p.v = d_v.ptr;
  p.cu_seqlens_q = static_cast<const std::int32_t*>(d_cu_q.ptr);
  p.cu_seqlens_k = static_cast<const std::int32_t*>(d_cu_k.ptr);
  p.window_left = spec.window_left;
  p.kernel = v.kernel;  // each variant's own kernel, not the runner's choice
  if (spec.page_size > 0) {
    for (const std::string& e : {allocate(&c->d_page_table, paged.page_table.size() * 4,
                                          paged.page_table.data(), paged.page_table.size() * 4),
                                 allocate(&c->d_seq_lens, paged.seq_lens.size() * 4,
                                          paged.seq_lens.data(), paged.seq_lens.size() * 4)}) {
      if (!e.empty()) return e;
    }
    p.total_k = 0;
    p.cu_seqlens_k = nullptr;
    p.page_table = static_cast<const std::int32_t*>(c->d_page_table.ptr);
    p.seq_lens_k = static_cast<const std::int32_t*>(c->d_seq_lens.ptr);
    p.page_size = spec.page_size;
    p.max_pages_per_seq = paged.max_pages;
    p.num_pages = paged.num_pages;
    p.kv_layout = spec.hnd ? fmha::KvLayout::kHnd : fmha::KvLayout::kNhd;
  }
  if (const kiln::Status s = fmha::canImplement(p, run().sm); !s.ok()) {
    return "canImplement: " + s.toString();
  }
  const std::size_t ws_bytes = fmha::workspaceSize(p);
  if (ws_bytes > 0) {
    if (const std::string e = allocate(&d_ws, ws_bytes, nullptr, 0); !e.empty()) return e;
  }
  c->spec = &spec;
  c->f = f;
  c->causal = causal;
  c->d = d;
  c->batch = batch;
  c->total_q = total_q;
  c->total_k = total_k;
  c->scale = scale;
  c->q_elems = q_elems;
  c->lse_elems = lse_elems;
  c->guard = guard;
  c->ws_bytes = ws_bytes;
  c->cu_q = std::move(cu_q);
  c->cu_k = std::move(cu_k);
  c->q = std::move(q);
  c->k = std::move(k);
  c->vv = std::move(vv);
  return "";
}

// Checks a case whose run() succeeded and whose stream is synchronized against the float64
// reference; returns "" on success, else what failed.
std::string checkCase(const PreparedCase& prepared, CaseResult* result) {
  const cases::Case& spec = *prepared.spec;
  const ref::Format f = prepared.f;
  const bool causal = prepared.causal;
  const int d = prepared.d, batch = prepared.batch, total_q = prepared.total_q,
            total_k = prepared.total_k;
  const double scale = prepared.scale;
  const std::size_t q_elems = prepared.q_elems, lse_elems = prepared.lse_elems,
                    guard = prepared.guard;
  const std::vector<std::int32_t>&cu_q = prepared.cu_q, &cu_k = prepared.cu_k;
  const std::vector<std::uint16_t>&q = prepared.q, &k = prepared.k, &vv = prepared.vv;
  // The reference, on the exact input values and the float scale the kernel was given.
  const ref::Decoder dec(f);
  const std::vector<double> q64 = dec(q), k64 = dec(k), v64 = dec(vv);
  ref::Problem rp;
  rp.causal = causal;
  rp.window_left = spec.window_left;
  rp.batch = batch;
  rp.q_heads = spec.q_heads;
  rp.kv_heads = spec.kv_heads;
  rp.head_dim = d;
  rp.scale = static_cast<double>(static_cast<float>(scale));
  rp.cu_seqlens_q = cu_q.data();
  rp.cu_seqlens_k = cu_k.data();
  rp.q = q64.data();
  rp.k = k64.data();
  rp.v = v64.data();
  std::vector<double> expected(q_elems), expected_lse(spec.lse ? lse_elems : 0);
  referenceAttention(rp, expected.data(), spec.lse ? expected_lse.data() : nullptr);

  const std::vector<std::uint16_t> out = download<std::uint16_t>(prepared.d_out);
  if (out.size() < q_elems + guard) return "download of out failed";
  std::ostringstream err;
  const OutputScan scan = scanOutput(out, q_elems, guard, dec);
  describe(err, scan, q_elems);

  // Per row: queries that see no key are exactly 0; the others within the row bound.
  const double bound = f == ref::Format::kFloat16 ? kRelL2BoundFp16 : kRelL2BoundBf16;
  const auto row_elems = static_cast<std::size_t>(d);
  std::size_t no_key_nonzero = 0, no_key_rows = 0;
  double worst_row = 0.0;
  std::string worst_where;
  for (int b = 0; b < batch; ++b) {
    const int sq = cu_q[b + 1] - cu_q[b], sk = cu_k[b + 1] - cu_k[b];
    for (int i = 0; i < sq; ++i) {
      const bool sees_none = ref::visibleRange(causal, spec.window_left, i, sq, sk).count() == 0;
      for (int h = 0; h < spec.q_heads; ++h) {
        const std::size_t at =
            (static_cast<std::size_t>(cu_q[b] + i) * spec.q_heads + h) * row_elems;
        if (sees_none) {
          ++no_key_rows;
          for (std::size_t c = 0; c < row_elems; ++c) no_key_nonzero += dec(out[at + c]) != 0.0;
          continue;
        }
        const double row_rel =
            ref::relativeL2(dec, row_elems, out.data() + at, expected.data() + at);
        if (!std::isnan(worst_row) && !(row_rel <= worst_row)) {  // a NaN row sticks
          worst_row = row_rel;
          worst_where = "sequence " + std::to_string(b) + " query " + std::to_string(i) + " head " +
                        std::to_string(h);
        }
      }
    }
  }
  if (no_key_nonzero) {
    err << no_key_nonzero << " outputs of the " << no_key_rows
        << " rows whose query sees no key are not 0; ";
  }
  const double rel = ref::relativeL2(dec, q_elems, out.data(), expected.data());
  result->rel = rel;
  result->worst_row = worst_row;
  if (!(rel <= bound)) err << "relative L2 error " << rel << " > bound " << bound << "; ";
  if (!(worst_row <= kRowBoundFactor * bound)) {
    err << "row relative L2 error " << worst_row << " at " << worst_where << " > "
        << kRowBoundFactor * bound << "; ";
  }

  if (spec.lse) {
    const std::vector<std::uint32_t> lse_bits = download<std::uint32_t>(prepared.d_lse);
    if (lse_bits.size() < lse_elems + guard) return "download of lse failed";
    const double lse_bound = f == ref::Format::kFloat16 ? kLseAbsBoundFp16 : kLseAbsBoundBf16;
    std::size_t unwritten = 0, nonfinite = 0, not_minus_inf = 0, guard_changed = 0;
    double lse_err = 0.0;
    std::string lse_where;
    for (std::size_t n = 0; n < lse_elems; ++n) {
      const std::size_t h = n / static_cast<std::size_t>(total_q);
      const std::size_t t = n % static_cast<std::size_t>(total_q);
      if (lse_bits[n] == kPoison32) {
        ++unwritten;
        continue;
      }
      const double got = static_cast<double>(std::bit_cast<float>(lse_bits[n]));
      if (std::isinf(expected_lse[n]) && expected_lse[n] < 0) {
        not_minus_inf += !(std::isinf(got) && got < 0);
        continue;
      }
      if (!std::isfinite(got)) {
        ++nonfinite;
        continue;
      }
      const double e = std::abs(got - expected_lse[n]);
      if (e > lse_err) {
        lse_err = e;
        lse_where = "token " + std::to_string(t) + " head " + std::to_string(h);
      }
    }
    for (std::size_t n = lse_elems; n < lse_elems + guard; ++n)
      guard_changed += lse_bits[n] != kPoison32;
    result->lse_err = lse_err;
    if (unwritten) err << unwritten << " of " << lse_elems << " lse not written (still poison); ";
    if (nonfinite) err << nonfinite << " lse of queries that see keys not finite; ";
    if (not_minus_inf) err << not_minus_inf << " lse of queries that see no key not -inf; ";
    if (guard_changed) err << guard_changed << " elements written past the end of lse; ";
    if (!(lse_err <= lse_bound)) {
      err << "lse error " << lse_err << " at " << lse_where << " > bound " << lse_bound << "; ";
    }
  }

  std::string message = err.str();
  if (!message.empty()) {
    std::ostringstream tail;
    tail << "(total_q " << total_q << ", total_k " << total_k << ", rel L2 " << rel
         << ", worst row " << worst_row << ")";
    message += tail.str();
  }
  return message;
}

// Runs one (variant, case); returns "" on success, else what failed.
std::string runCase(const generated::VariantInfo& v, const cases::Case& spec, Rng& rng,
                    cudaStream_t stream, CaseResult* result) {
  PreparedCase c;
  if (const std::string e = prepareCase(v, spec, rng, &c); !e.empty()) return e;
  const kiln::Status s =
      fmha::run(c.p, c.d_ws.ptr, c.ws_bytes, reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }
  return checkCase(c, result);
}

// The selector's own answer for this device: batch = 0 is admitted without pointers, so only the
// variant and image lookup speak.
kiln::Status probeDevice(const generated::VariantInfo& v) {
  fmha::Problem probe;
  probe.dtype = v.dtype;
  probe.mask = v.mask;
  probe.head_dim = v.head_dim;
  probe.kernel = v.kernel;
  probe.q_heads = 1;
  probe.kv_heads = 1;
  probe.scale = 1.0f;
  return fmha::canImplement(probe, run().sm);
}

// ---- tests -----------------------------------------------------------------------------------

// Issue 33: every variant run from threads that did nothing else (tests/gpu/README.md). On the
// main thread: per thread and variant one case of cases.h (chunked prefill with MQA, a ragged GQA
// 8 batch with a sharp softmax and no max_seqlen_q hint, or one 177-token sequence, by thread),
// with random inputs and out, lse and their guards poisoned, and one non-blocking stream per
// thread. Then kFreshThreads threads with no current CUDA context and one whose current context
// is another context of the device (runOnFreshThreads) call run() at once, for every variant, in
// an order that makes the first launch of a variant race on several threads (fmha's TMA tensor
// maps are encoded on them too). This plain TEST is defined before FmhaDoctor, and a plain TEST
// runs before every parameterized one: in a process of its own (--gtest_filter='*FreshThreads*')
// or first in a whole run, nothing (not the doctor's load either) has loaded a variant before
// these threads. Back on the main thread: every status ok, the streams synchronize, every output
// and lse matches the float64 reference within the bounds, counted as the variant's
// "fresh_threads" and "fresh_threads_other_context" results.
TEST(FmhaFreshThreads, EveryVariantFromFreshThreadsAndAnotherContext) {
  const std::size_t nv = std::size(generated::kVariants);
  constexpr const char* kCaseNames[] = {"chunk_q129_k300_mqa", "ragged_gqa8_scale4_nohint",
                                        "s177_gqa2"};
  auto specOf = [&](int t) -> const cases::Case* {
    for (const cases::Case* c : numericsCases()) {
      if (std::string(c->name) == kCaseNames[t % 3]) return c;
    }
    return nullptr;
  };
  std::vector<FreshThreadsVariant> variants;
  for (const auto& v : generated::kVariants) {
    const kiln::Status s = probeDevice(v);
    variants.push_back({kiln::dtypeName(v.dtype), v.name,
                        s.code() == kiln::StatusCode::kNoKernelImage ? s.toString() : ""});
  }
  std::vector<std::vector<std::unique_ptr<PreparedCase>>> prepared(kFreshThreads + 1);
  for (auto& per_thread : prepared) per_thread.resize(nv);
  runFreshThreadsTest(
      variants,
      [&](int t, std::size_t i) -> std::string {
        const cases::Case* spec = specOf(t);
        const auto& v = generated::kVariants[i];
        if (spec == nullptr) return std::string(kCaseNames[t % 3]) + ": no such numerics case";
        if (!caseFor(*spec, v)) return std::string(spec->name) + ": not a case of this variant";
        Rng rng{run().seed ^ (i * 0x100000001b3ULL) ^ (static_cast<std::uint64_t>(t + 1) << 58) ^
                0x33ULL};
        prepared[t][i] = std::make_unique<PreparedCase>();
        return prepareCase(v, *spec, rng, prepared[t][i].get());
      },
      [&](int t, std::size_t i, cudaStream_t stream) {
        const PreparedCase& c = *prepared[t][i];
        return fmha::run(c.p, c.d_ws.ptr, c.ws_bytes, reinterpret_cast<kiln::Stream>(stream));
      },
      [&](int t, std::size_t i) {
        CaseResult r;
        const std::string failure = checkCase(*prepared[t][i], &r);
        return failure.empty() ? failure : std::string(kCaseNames[t % 3]) + ": " + failure;
      });
}

struct VariantCase {
  std::size_t variant;
  std::size_t spec;
};

std::vector<VariantCase> allCases() {
  std::vector<VariantCase> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) {
    for (std::size_t c = 0; c < numericsCases().size(); ++c) {
      if (caseFor(*numericsCases()[c], generated::kVariants[i])) all.push_back({i, c});
    }
  }
  return all;
}

class FmhaNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(FmhaNumerics, MatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const cases::Case& spec = *numericsCases()[GetParam().spec];
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, spec.name);
  // Only a device without an image is a skip; any other refusal fails in runCase, where the
  // whole problem is admitted.
  if (const kiln::Status s = probeDevice(v); s.code() == kiln::StatusCode::kNoKernelImage) {
    ++counts.skipped;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << v.name << ": " << s.toString();
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  Rng rng{run().seed ^ (GetParam().variant * 0x100000001b3ULL) ^
          (static_cast<std::uint64_t>(GetParam().spec) << 48)};
  CaseResult r;
  const std::string failure = runCase(v, spec, rng, stream, &r);
  std::ostringstream note;
  note << "rel L2 " << r.rel << ", worst row " << r.worst_row;
  if (spec.lse) note << ", lse max error " << r.lse_err;
  counts.recordCase(failure, note.str(), std::string(v.name) + " " + spec.name);
  CUDA_OK(cudaStreamDestroy(stream));
}

INSTANTIATE_TEST_SUITE_P(Artifact, FmhaNumerics, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<VariantCase>& param_info) {
                           return std::string(generated::kVariants[param_info.param.variant].name) +
                                  "_" + numericsCases()[param_info.param.spec]->name;
                         });

// The doctor's verdict for every fmha variant on this device, printed, and checked against the
// selector's: runnable exactly when canImplement finds an image, and then the sm_90 image.
TEST(FmhaDoctor, VerdictAgreesWithSelector) {
  std::vector<const kiln_variant*> variants;
  for (const auto& v : generated::kVariants) variants.push_back(v.variant());
  int ordinal = 0;
  CUDA_OK(cudaGetDevice(&ordinal));
  kiln::DoctorReport report;
  const kiln::Status s = kiln::doctor(variants, ordinal, &report);
  std::printf("doctor: %s\n", s.toString().c_str());
  if (s.ok()) {
    std::printf("doctor: device %d %s, sm_%d, %d SMs, driver %d\n", report.device.ordinal,
                report.device.name.c_str(), report.device.sm, report.device.multiprocessors,
                report.driver_version);
  }
  for (const auto& v : generated::kVariants) {
    Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "doctor");
    const kiln::VariantReport* found = nullptr;
    for (const kiln::VariantReport& r : report.variants) {
      if (r.name == v.name) found = &r;
    }
    const kiln::Status probe = probeDevice(v);
    const bool selector_runs = probe.code() != kiln::StatusCode::kNoKernelImage;
    if (found != nullptr) {
      if (found->runnable) {
        std::printf("doctor:   %s: runs the sm_%d image\n", v.name, found->image_sm);
      } else {
        std::printf("doctor:   %s: cannot run: %s\n", v.name, found->reason.c_str());
      }
    }
    const bool ok = s.ok() && found != nullptr && report.device.sm == run().sm &&
                    found->runnable == selector_runs &&
                    (!found->runnable || found->image_sm <= run().sm);
    std::string what = "doctor " + s.toString();
    if (found == nullptr) {
      what += ": variant missing from the report";
    } else {
      what += ": runnable " + std::string(found->runnable ? "yes" : "no") + " (image sm_" +
              std::to_string(found->image_sm) + ", " + found->reason + "), canImplement " +
              probe.toString();
    }
    EXPECT_TRUE(counts.record(ok, what)) << v.name << ": " << what;
  }
}

// Runner errors on the device, per variant, and the admitted problem's exact answer.
class FmhaRunnerErrors : public ::testing::TestWithParam<std::size_t> {};

TEST_P(FmhaRunnerErrors, RefusesBadProblemsAndTreatsZeroBatchAsNoOp) {
  const auto& v = generated::kVariants[GetParam()];
  const ref::Format f = formatOf(v.dtype);
  Counts& counts = run().at(kiln::dtypeName(v.dtype), v.name, "runner_errors");
  if (const kiln::Status s = probeDevice(v); s.code() == kiln::StatusCode::kNoKernelImage) {
    counts.skipped += 17;
    counts.notes.push_back(s.toString());
    GTEST_SKIP() << s.toString();
  }
  const bool causal = isCausal(v);
  // Two sequences with sq <= sk, so that every query sees >= 1 key with either mask.
  const std::vector<Seq> seqs = {{128, 128}, {200, 333}};
  const int q_heads = 8, kv_heads = 2, d = v.head_dim;
  const std::vector<std::int32_t> cu_q = {0, 128, 328}, cu_k = {0, 128, 461};
  const int total_q = cu_q.back(), total_k = cu_k.back();
  const std::size_t q_elems = static_cast<std::size_t>(total_q) * q_heads * d;
  const std::size_t kv_elems = static_cast<std::size_t>(total_k) * kv_heads * d;
  const std::size_t lse_elems = static_cast<std::size_t>(q_heads) * total_q;
  // q = k = v = 1 and scale = 1 / d (a power of two): every score is exactly 1, every weight
  // exp(0) = 1 exactly (also after rounding P), so out = n / n = 1 exactly and
  // lse = 1 + ln(visible keys).
  const std::vector<std::uint16_t> ones(std::max(q_elems, kv_elems), oneBits(f));
  DeviceBuffer d_q, d_k, d_v, d_cu_q, d_cu_k, d_out, d_lse;
  ASSERT_EQ(allocate(&d_q, q_elems * 2 + 16, ones.data(), q_elems * 2), "");
  ASSERT_EQ(allocate(&d_k, kv_elems * 2, ones.data(), kv_elems * 2), "");
  ASSERT_EQ(allocate(&d_v, kv_elems * 2, ones.data(), kv_elems * 2), "");
  ASSERT_EQ(allocate(&d_cu_q, cu_q.size() * 4, cu_q.data(), cu_q.size() * 4), "");
  ASSERT_EQ(allocate(&d_cu_k, cu_k.size() * 4, cu_k.data(), cu_k.size() * 4), "");
  ASSERT_EQ(allocate(&d_out, q_elems * 2, nullptr, 0), "");
  ASSERT_EQ(allocate(&d_lse, lse_elems * 4 + 16, nullptr, 0), "");
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto kstream = reinterpret_cast<kiln::Stream>(stream);

  fmha::Problem good;
  good.dtype = v.dtype;
  good.mask = v.mask;
  good.head_dim = d;
  good.batch = static_cast<int>(seqs.size());
  good.q_heads = q_heads;
  good.kv_heads = kv_heads;
  good.total_q = total_q;
  good.total_k = total_k;
  good.max_seqlen_q = 200;
  good.scale = 1.0f / static_cast<float>(d);
  good.out = d_out.ptr;
  good.lse = static_cast<float*>(d_lse.ptr);
  good.q = d_q.ptr;
  good.k = d_k.ptr;
  good.v = d_v.ptr;
  good.cu_seqlens_q = static_cast<const std::int32_t*>(d_cu_q.ptr);
  good.cu_seqlens_k = static_cast<const std::int32_t*>(d_cu_k.ptr);
  good.kernel = v.kernel;
  const std::size_t ws_bytes = fmha::workspaceSize(good);
  DeviceBuffer d_ws;
  if (ws_bytes > 0) {
    ASSERT_EQ(allocate(&d_ws, ws_bytes, nullptr, 0), "");
  }

  auto record = [&](bool ok, const std::string& what) {
    EXPECT_TRUE(counts.record(ok, what)) << v.name << ": " << what;
  };
  auto untouched = [&]() {
    const auto out = download<std::uint16_t>(d_out);
    const auto lse = download<std::uint32_t>(d_lse);
    bool lse_poison = !lse.empty();
    for (std::uint32_t b : lse) lse_poison = lse_poison && b == kPoison32;
    return allPoison(out) && lse_poison;
  };
  auto refused = [&](const fmha::Problem& p, kiln::StatusCode code, const std::string& needle,
                     const std::string& what) {
    const kiln::Status s = fmha::run(p, d_ws.ptr, ws_bytes, kstream);
    const kiln::Status c = fmha::canImplement(p, run().sm);
    const cudaError_t e = cudaStreamSynchronize(stream);
    record(e == cudaSuccess && s.code() == code && c.code() == code &&
               s.message().find(needle) != std::string::npos && untouched(),
           what + ": run " + s.toString() + ", canImplement " + c.toString());
  };

  {  // A head dim no variant has.
    fmha::Problem p = good;
    p.head_dim = 96;
    refused(p, kiln::StatusCode::kNotSupported, "head_dim 96", "unbuilt head_dim");
  }
  {  // q one element past an aligned address.
    fmha::Problem p = good;
    p.q = static_cast<const std::uint16_t*>(d_q.ptr) + 1;
    refused(p, kiln::StatusCode::kInvalidArgument, "pointer q", "misaligned q");
  }
  {  // lse two bytes past an aligned address.
    fmha::Problem p = good;
    p.lse = reinterpret_cast<float*>(static_cast<char*>(d_lse.ptr) + 2);
    refused(p, kiln::StatusCode::kInvalidArgument, "lse", "misaligned lse");
  }
  {  // v null.
    fmha::Problem p = good;
    p.v = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "v is null", "null v");
  }
  {  // cu_seqlens_k null.
    fmha::Problem p = good;
    p.cu_seqlens_k = nullptr;
    refused(p, kiln::StatusCode::kInvalidArgument, "cu_seqlens_k", "null cu_seqlens_k");
  }
  {  // q_heads not a multiple of kv_heads.
    fmha::Problem p = good;
    p.q_heads = 6;
    p.kv_heads = 4;
    refused(p, kiln::StatusCode::kInvalidArgument, "q_heads 6", "q_heads 6 on kv_heads 4");
  }
  {  // More query heads than the grid's y dimension holds.
    fmha::Problem p = good;
    p.q_heads = 65536;
    p.kv_heads = 1;
    refused(p, kiln::StatusCode::kInvalidArgument, "q_heads", "q_heads 65536");
  }
  {  // A zero and a NaN scale.
    fmha::Problem p = good;
    p.scale = 0.0f;
    refused(p, kiln::StatusCode::kInvalidArgument, "scale", "scale 0");
    p.scale = std::numeric_limits<float>::quiet_NaN();
    refused(p, kiln::StatusCode::kInvalidArgument, "scale", "scale NaN");
  }
  {  // A negative window other than -1 (no window).
    fmha::Problem p = good;
    p.window_left = -2;
    refused(p, kiln::StatusCode::kInvalidArgument, "window_left -2", "window_left -2");
  }
  const bool mma = v.kernel == fmha::Kernel::kMma;
  // Paged K / V over the (contiguous) k and v buffers as one page each: the mma kernel refuses a
  // page size that is not a power of two and a total_k left set; wgmma has no paged mode.
  fmha::Problem paged = good;
  paged.total_k = 0;
  paged.cu_seqlens_k = nullptr;
  paged.page_table = static_cast<const std::int32_t*>(d_cu_q.ptr);  // any aligned int32 array
  paged.seq_lens_k = static_cast<const std::int32_t*>(d_cu_k.ptr);
  paged.page_size = 48;
  paged.max_pages_per_seq = 1;
  paged.num_pages = 1;
  refused(paged, mma ? kiln::StatusCode::kInvalidArgument : kiln::StatusCode::kNotSupported,
          mma ? "page_size 48" : "paged K / V needs the mma kernel", "paged, page_size 48");
  paged.page_size = 16;
  paged.total_k = total_k;
  refused(paged, mma ? kiln::StatusCode::kInvalidArgument : kiln::StatusCode::kNotSupported,
          mma ? "total_k 461" : "paged K / V needs the mma kernel", "paged with total_k set");
  {  // An SM below every image of the artifact (sm_90 cubins, or compute_80 PTX).
    const kiln::Status c = fmha::canImplement(good, 75);
    record(c.code() == kiln::StatusCode::kNoKernelImage &&
               c.message().find("sm_75") != std::string::npos,
           "device sm_75: canImplement " + c.toString());
  }
  {  // batch = 0: ok, nothing written.
    fmha::Problem p = good;
    p.batch = 0;
    const kiln::Status s = fmha::run(p, d_ws.ptr, ws_bytes, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    record(s.ok() && untouched(), "batch 0: " + s.toString());
  }

  // The admitted problem: first without lse (lse stays poisoned), then with it.
  auto outExactlyOne = [&]() {
    const auto out = download<std::uint16_t>(d_out);
    bool all_one = out.size() == q_elems;
    for (std::uint16_t b : out) all_one = all_one && b == oneBits(f);
    return all_one;
  };
  {
    fmha::Problem p = good;
    p.lse = nullptr;
    const kiln::Status can = fmha::canImplement(p, run().sm);
    const kiln::Status s = fmha::run(p, d_ws.ptr, ws_bytes, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto lse = download<std::uint32_t>(d_lse);
    bool lse_poison = !lse.empty();
    for (std::uint32_t b : lse) lse_poison = lse_poison && b == kPoison32;
    const bool one = outExactlyOne();
    record(can.ok() && s.ok() && one && lse_poison,
           "valid problem, lse nullptr: canImplement " + can.toString() + ", run " + s.toString() +
               (one ? "" : ", out is not exactly 1") + (lse_poison ? "" : ", lse was written"));
  }
  {
    const kiln::Status can = fmha::canImplement(good, run().sm);
    const kiln::Status s = fmha::run(good, d_ws.ptr, ws_bytes, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    const bool one = outExactlyOne();
    const auto lse = download<std::uint32_t>(d_lse);
    const double lse_bound = f == ref::Format::kFloat16 ? kLseAbsBoundFp16 : kLseAbsBoundBf16;
    double lse_err = lse.size() >= lse_elems ? 0.0 : std::numeric_limits<double>::infinity();
    for (int b = 0; b < good.batch && lse.size() >= lse_elems; ++b) {
      const int sq = cu_q[b + 1] - cu_q[b], sk = cu_k[b + 1] - cu_k[b];
      for (int i = 0; i < sq; ++i) {
        const double want =
            1.0 + std::log(static_cast<double>(ref::visibleKeys(causal, i, sq, sk)));
        for (int h = 0; h < q_heads; ++h) {
          const float got =
              std::bit_cast<float>(lse[static_cast<std::size_t>(h) * total_q + cu_q[b] + i]);
          const double e = std::abs(static_cast<double>(got) - want);
          lse_err = std::isnan(e) ? std::numeric_limits<double>::infinity() : std::max(lse_err, e);
        }
      }
    }
    record(can.ok() && s.ok() && one && lse_err <= lse_bound,
           "valid problem with lse: canImplement " + can.toString() + ", run " + s.toString() +
               (one ? "" : ", out is not exactly 1") + ", lse max error " +
               std::to_string(lse_err));
  }
  {  // A window of 8 keys: refused without the causal mask; with it every visible key still
     // weighs 1, so out stays exactly 1.
    fmha::Problem p = good;
    p.window_left = 8;
    const kiln::Status s = fmha::run(p, d_ws.ptr, ws_bytes, kstream);
    CUDA_OK(cudaStreamSynchronize(stream));
    if (!causal) {
      record(s.code() == kiln::StatusCode::kInvalidArgument &&
                 s.message().find("needs the causal mask") != std::string::npos,
             "window on the full mask: " + s.toString());
    } else {
      record(s.ok() && outExactlyOne(), "window_left 8: " + s.toString());
    }
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

std::vector<std::size_t> allVariants() {
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < std::size(generated::kVariants); ++i) all.push_back(i);
  return all;
}

INSTANTIATE_TEST_SUITE_P(Artifact, FmhaRunnerErrors, ::testing::ValuesIn(allVariants()),
                         [](const ::testing::TestParamInfo<std::size_t>& param_info) {
                           return std::string(generated::kVariants[param_info.param].name);
                         });

// ---- summary ---------------------------------------------------------------------------------

ReportFormat reportFormat() {
  ReportFormat f;
  f.group = "fmha";
  f.case_key = "case";
  f.show_multiprocessors = true;
  f.per_variant_totals = true;
  std::ostringstream json;
  json << "\"cases\": [";
  for (std::size_t i = 0; i < numericsCases().size(); ++i) {
    const cases::Case& c = *numericsCases()[i];
    json << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"q_heads\": " << c.q_heads
         << ", \"kv_heads\": " << c.kv_heads << ", \"scale_factor\": " << c.scale_factor
         << ", \"lse\": " << (c.lse ? "true" : "false") << ", \"seqs_q_k\": [";
    const std::vector<Seq> seqs = sequencesOf(c);
    for (std::size_t s = 0; s < seqs.size(); ++s) {
      json << (s ? ", " : "") << "[" << seqs[s].q << ", " << seqs[s].k << "]";
    }
    json << "]}";
  }
  json << "], \"row_bound_factor\": " << kRowBoundFactor
       << ", \"lse_abs_bounds\": {\"fp16\": " << kLseAbsBoundFp16
       << ", \"bf16\": " << kLseAbsBoundBf16 << "}";
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
