// GPU numerics of the decodeattn group: every variant of the linked artifact over boundary
// lengths, long sequences, large batches, GQA ratios 1 / 4 / 8 / 40, every admitted page size and
// 1 to 8 query tokens per sequence (multi-token decoding, causal over them), against the float64
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
// $KILN_EVIDENCE_OUT) is the evidence format of DESIGN.md contract 10; the process exits non-zero
// on any failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "common/gpu_test_support.h"
#include "decodeattn/reference.h"
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

// Error bounds (PERF.md, Method 2): fp32 accumulation, 16-bit inputs, the output rounded once.
// The kernel also rounds P (softmax weights in [0, 1]) once to the dtype for the P.V mma, and
// sums the same rounded weights, so the output is a convex combination of V rows whose weights
// carry a relative error <= u (2^-11 fp16, 2^-8 bf16): that adds ~u/sqrt(3) relative L2, the
// same size as the output's own rounding, which the bounds already allow for twice over.

// ---- inputs -------------------------------------------------------------------------------

ref::Format formatOf(const char* name) {
  return std::strcmp(name, "fp16") == 0 ? ref::Format::kFloat16 : ref::Format::kBFloat16;
}

// ---- cases ----------------------------------------------------------------------------------

// One numerics case. lengths empty: `batch` random lengths in [1, max_random_len].
struct CaseSpec {
  const char* name;
  int q_heads;
  int kv_heads;
  std::vector<int> lengths;
  int batch;
  int max_random_len;
  int page_size;
  double scale_factor;   // softmax scale = scale_factor / sqrt(head_dim)
  int multiprocessors;   // Problem::multiprocessors (0: the device's); forces the split count
  int max_seq_len_hint;  // Problem::max_seq_len
  int query_tokens = 1;  // Problem::query_tokens: > 1 is multi-token decoding (causal over them)
};

const std::vector<CaseSpec>& cases() {
  static const std::vector<CaseSpec> c = {
      // The boundary lengths in one batch, GQA 8, split path (device SM count).
      {"lengths_gqa8_p16", 16, 2, {1, 15, 16, 17, 255, 256, 257, 4097}, 0, 0, 16, 1.0, 0, 0},
      // The same lengths on one simulated SM: one split, the single-pass path on long sequences.
      {"lengths_gqa8_p64_one_split",
       16,
       2,
       {4097, 257, 256, 255, 17, 16, 15, 1},
       0,
       0,
       64,
       1.0,
       1,
       0},
      // 32k keys, GQA 4, many splits; a sharp softmax (scale x 4) exercises the running max.
      {"long32768_gqa4_p32", 8, 2, {32768}, 0, 0, 32, 4.0, 0, 0},
      // 32k keys next to a 1-key sequence, GQA 1 (4 pairs: 33 splits on 132 SMs, > 32 partials
      // per row in the merge).
      {"long32768_and_1_gqa1_p16", 4, 4, {32768, 1}, 0, 0, 16, 1.0, 0, 0},
      // The benchmark's 1 x 32768 row (bf16 bench, GQA 32/8, page 16) planned for an H100 /
      // H200's 132 SMs: 8 pairs -> 16 splits of 2048 keys. (Its wrong output on the H200 in
      // 2026-12-02 run 2 was the bench's strided cache.)
      {"bench1x32768_gqa32x8_p16_sm132", 32, 8, {32768}, 0, 0, 16, 1.0, 132, 32768},
      // The same planned for 264 SMs: 33 splits, 32 ranges of 1024 keys and an empty last one.
      {"bench1x32768_gqa32x8_p16_sm264", 32, 8, {32768}, 0, 0, 16, 1.0, 264, 32768},
      // Batch 256 of short random lengths, GQA 1: fills the GPU, one split.
      {"batch256_gqa1_p32", 4, 4, {}, 256, 300, 32, 1.0, 0, 0},
      // Batch 256, GQA 8, forced splits (256 SMs): many empty splits of short sequences.
      {"batch256_gqa8_p16_split", 8, 1, {}, 256, 600, 16, 1.0, 256, 0},
      // The benchmark's head shape (GQA 32/8), sharp softmax.
      {"gqa32x8_p16", 32, 8, {4097, 1000, 33}, 0, 0, 16, 8.0, 0, 0},
      // MQA with 40 query heads: two 32-row chunks (32, 8: the second's upper row tile all
      // padding) per KV head.
      {"mqa40_p128", 40, 1, {257, 1031}, 0, 0, 128, 1.0, 0, 0},
      // Empty sequences give zeros, next to others; page 256.
      {"zero_lengths_gqa4_p256", 8, 2, {0, 5, 0, 300}, 0, 0, 256, 1.0, 0, 0},
      // A max_seq_len hint below the table's capacity (fewer splits), and page 32.
      {"max_len_hint_p32", 16, 2, {2000, 100}, 0, 0, 32, 1.0, 0, 2000},
      // A max_seq_len hint below the longest sequence (it only sizes the split count; the
      // longer sequence must still be exact): split and single-pass paths.
      {"hint_below_length_p16", 16, 2, {3000, 500}, 0, 0, 16, 1.0, 0, 1000},
      {"hint_below_length_p16_one_split", 16, 2, {3000, 500}, 0, 0, 16, 1.0, 1, 1000},
      // Multi-token decoding: T query tokens per sequence, causal over the last T keys. Length 1
      // with T = 2 leaves token 0 without a key (zeros); lengths at and around a subtile.
      {"mtp2_gqa4_p16", 8, 2, {1, 2, 17, 1000, 16}, 0, 0, 16, 1.0, 0, 0, 2},
      // The bench's head shape, 4 tokens: 4 x 4 = 16 rows, one tile per KV head; split path.
      {"mtp4_gqa32x8_p16", 32, 8, {4097, 300}, 0, 0, 16, 4.0, 0, 0, 4},
      // 8 tokens x GQA 8 = 64 rows: two 32-row chunks per KV head; lengths below and at T.
      {"mtp8_gqa8_p32_one_split", 16, 2, {8, 7, 3000, 5}, 0, 0, 32, 1.0, 1, 0, 8},
      // Batch 64, GQA 1, 3 tokens, forced splits (many empty ones for short sequences).
      {"mtp3_batch64_gqa1_p64_split", 4, 4, {}, 64, 500, 64, 1.0, 256, 0, 3},
      // MQA 40 x 5 tokens = 200 rows: 7 chunks of 32, the last one partial.
      {"mtp5_mqa40_p16", 40, 1, {257, 33}, 0, 0, 16, 1.0, 0, 0, 5},
      // 5 tokens x GQA 4 = 20 rows: one 32-row chunk whose second row tile holds the last token
      // alone (rows 16..19); sharp softmax, split path, a length below T.
      {"mtp5_gqa4_p16", 16, 4, {4097, 3, 300}, 0, 0, 16, 4.0, 0, 0, 5},
  };
  return c;
}

// Runs one (variant, case); returns "" on success, else what failed. *error gets the rel L2.
std::string runCase(const generated::VariantEntry& v, const CaseSpec& spec, ref::Layout layout,
                    Rng& rng, cudaStream_t stream, double* error) {
  const ref::Format f = formatOf(v.dtype);
  const int d = v.head_dim;
  std::vector<int> lens = spec.lengths;
  if (lens.empty()) {
    for (int b = 0; b < spec.batch; ++b) lens.push_back(1 + rng.below(spec.max_random_len));
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

  DeviceBuffer d_q, d_k, d_v, d_table, d_lens, d_out, d_ws;
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

  da::Problem p;
  p.dtype = kiln::dtypeFromName(v.dtype).value();
  p.batch = batch;
  p.q_heads = spec.q_heads;
  p.kv_heads = spec.kv_heads;
  p.head_dim = d;
  p.query_tokens = tokens;
  p.page_size = ps;
  p.kv_layout = layout == ref::Layout::kNHD ? da::KvLayout::kNHD : da::KvLayout::kHND;
  p.num_pages = num_pages;
  p.max_pages_per_seq = max_pages_per_seq;
  p.max_seq_len = spec.max_seq_len_hint;
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
  const kiln::Status s = da::run(p, d_ws.ptr, ws_bytes, reinterpret_cast<kiln::Stream>(stream));
  if (!s.ok()) return "run: " + s.toString();
  if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
    return std::string("kernel: ") + cudaGetErrorString(e);
  }

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
  rp.q = q.data();
  rp.k_cache = k.data();
  rp.v_cache = vv.data();
  rp.page_table = table.data();
  rp.seq_lens = seq_lens.data();
  std::vector<double> expected(out_elems);
  ref::decodeAttention(rp, expected.data());

  const std::vector<std::uint16_t> out = download<std::uint16_t>(d_out);
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

// ---- tests -----------------------------------------------------------------------------------

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
      for (std::size_t c = 0; c < cases().size(); ++c) all.push_back({i, c, layout});
    }
  }
  return all;
}

std::string caseName(const VariantCase& c) {
  return std::string(cases()[c.spec].name) + (c.layout == ref::Layout::kHND ? "_hnd" : "");
}

class DecodeAttentionNumerics : public ::testing::TestWithParam<VariantCase> {};

TEST_P(DecodeAttentionNumerics, MatchesFloat64Reference) {
  const auto& v = generated::kVariants[GetParam().variant];
  const CaseSpec& spec = cases()[GetParam().spec];
  const std::string name = caseName(GetParam());
  Counts& counts = run().at(v.dtype, v.name, name);

  // The selector's own answer for this device (batch = 0 skips the pointer checks).
  da::Problem probe;
  probe.dtype = kiln::dtypeFromName(v.dtype).value();
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
  Counts& counts = run().at(v.dtype, v.name, "runner_errors");
  da::Problem probe;
  probe.dtype = kiln::dtypeFromName(v.dtype).value();
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
  good.dtype = kiln::dtypeFromName(v.dtype).value();
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
  for (std::size_t i = 0; i < cases().size(); ++i) {
    const CaseSpec& c = cases()[i];
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
