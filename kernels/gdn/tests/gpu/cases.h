// The gdn group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (gdn_numerics_test.cpp) checks every case marked kNumerics against
//     the float64 reference, on every variant of the case's entry kernel (gdn_decode,
//     gdn_decode_mtp, or gdn_mtp_commit after a gdn_decode_mtp verify) whose head dims and gate
//     form the case takes;
//   - the benchmark (bench/gdn_bridge.cpp exports the cases marked kBench, in this order, to
//     gdn_vs_torch.py) times every case marked kBench against flash-linear-attention and PyTorch,
//     in the table of its op (benchOp).
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

namespace kiln::gdn::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the float64 reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peers

// The entry kernel of the variants a case is for, and so the problem it poses: kiln_gdn_decode,
// gdn::Problem (one token, the state updated in place), or kiln_gdn_decode_mtp, gdn::MtpProblem
// (T tokens, every state to a cache, the pool only read), or kiln_gdn_mtp_commit,
// gdn::CommitProblem (the accepted state of a [batch, T] cache into the pool; the numerics test
// runs a gdn_decode_mtp verify of the case first, then the commit, then a gdn_decode step from the
// committed pool).
enum class Entry { kDecode, kMtp, kCommit };

// Where the multi-token states go (MtpProblem): cache[b, t] of a [batch, T, ...] cache; a mapped
// entry cache[cache_slots[b, t]] of a larger cache (a random permutation of its entries, three
// left unmapped, every third token's entry negative: not kept); a mapped entry of the state pool
// itself (cache == state: the slots the batch reads, the slots it writes and some unused ones, all
// distinct; every fourth token's entry negative); or in the pool the last token's state alone,
// into the sequence's own slot (entries -1, ..., -1, slots[b]: T tokens decoded in place).
enum class CacheLayout { kBatch, kMapped, kPool, kPoolFinal };

// The gate form of the variants a case is for: both (given g and beta, and the `_gating` variants
// that compute them from a, b, A_log, dt_bias), or one of them.
enum class Gates { kBoth, kGiven, kFused };

// The accepted counts of a commit case (kCommit), per sequence b: none (0: the pool keeps its
// state), one, all T, or mixed: b cycles through 0, 1, T, a random count in 1 .. T, T + 1 and -1
// (the last two out of contract: the pool slot is left untouched, kiln::gdn::CommitProblem).
enum class Accepted { kNone, kOne, kAll, kMixed };

struct Case {
  const char* name;
  Entry entry;
  int tokens;  // T (kMtp); 1 for kDecode
  int batch;
  int heads_qk;        // H
  int heads_v;         // Hv
  int skip_every = 0;  // every n-th sequence (b % n == n - 1) gets a negative slot; 0: none
  CacheLayout layout = CacheLayout::kBatch;  // kMtp only
  Gates gates = Gates::kBoth;
  int head_dim_k = 0;  // 0: every variant's head dims; else the variants of these only
  int head_dim_v = 0;
  unsigned readers = kNumerics;
  Accepted accepted = Accepted::kMixed;  // kCommit only
};

// The benchmark's table of a case (gdn_vs_torch.py --ops, the JSON rows' "op"): decode (one token,
// given gates), mtp (T tokens, every state to a [batch, T] cache), final (T tokens, only the last
// state kept, in place), gating (one token, fused gating); kNone for another kind of case.
enum class BenchOp { kNone = -1, kDecode, kMtp, kFinal, kGating };
constexpr BenchOp benchOp(const Case& c) {
  if (c.entry == Entry::kCommit) return BenchOp::kNone;
  if (c.entry == Entry::kDecode) {
    return c.gates == Gates::kGiven   ? BenchOp::kDecode
           : c.gates == Gates::kFused ? BenchOp::kGating
                                      : BenchOp::kNone;
  }
  if (c.gates != Gates::kGiven) return BenchOp::kNone;
  return c.layout == CacheLayout::kBatch       ? BenchOp::kMtp
         : c.layout == CacheLayout::kPoolFinal ? BenchOp::kFinal
                                               : BenchOp::kNone;
}

inline constexpr Case kCases[] = {
    // gdn_decode: batches 1 .. 256, Hv / H 1, 2, 3, 4, 24, skipped and permuted slots.
    {"b1_h16_hv16", Entry::kDecode, 1, 1, 16, 16},
    {"b1_h16_hv64", Entry::kDecode, 1, 1, 16, 64},
    {"b7_h16_hv32_skip", Entry::kDecode, 1, 7, 16, 32, 3},
    {"b32_h16_hv64_skip", Entry::kDecode, 1, 32, 16, 64, 5},
    {"b32_h16_hv16_skip", Entry::kDecode, 1, 32, 16, 16, 4},
    {"b256_h16_hv32_skip", Entry::kDecode, 1, 256, 16, 32, 7},
    {"b256_h4_hv16_skip", Entry::kDecode, 1, 256, 4, 16, 2},
    // Ratios that are not powers of two: the multi-token kernel computes a value head's query /
    // key head as a float32 product (gdn_rule.qk_head), exact only if rounding never crosses
    // an integer.
    {"b5_h6_hv18_skip", Entry::kDecode, 1, 5, 6, 18, 2},
    {"b3_h2_hv48", Entry::kDecode, 1, 3, 2, 48},
    // gdn_decode_mtp: every T in 1 .. 8, batches 1 .. 256, Hv / H = 1, 2, 3, 4, 24, skipped and
    // permuted slots, the four cache layouts. The cache of the two batch-256 [batch, T] cases is
    // 512 MiB each (T x Hv x 64 KiB per sequence).
    {"t1_b1_h16_hv16", Entry::kMtp, 1, 1, 16, 16},
    {"t8_b1_h16_hv32", Entry::kMtp, 8, 1, 16, 32},
    {"t2_b3_h16_hv64", Entry::kMtp, 2, 3, 16, 64},
    {"t3_b7_h16_hv32_skip", Entry::kMtp, 3, 7, 16, 32, 3},
    {"t4_b8_h8_hv8_skip", Entry::kMtp, 4, 8, 8, 8, 4},
    {"t5_b32_h16_hv16_skip", Entry::kMtp, 5, 32, 16, 16, 4},
    {"t6_b32_h8_hv32_skip", Entry::kMtp, 6, 32, 8, 32, 5},
    {"t7_b64_h4_hv8_skip", Entry::kMtp, 7, 64, 4, 8, 3},
    {"t8_b32_h4_hv16_skip", Entry::kMtp, 8, 32, 4, 16, 6},
    {"t2_b256_h4_hv16_skip", Entry::kMtp, 2, 256, 4, 16, 7},
    {"t4_b256_h8_hv8_skip", Entry::kMtp, 4, 256, 8, 8, 5},
    {"t3_b5_h16_hv32_skip_mapped", Entry::kMtp, 3, 5, 16, 32, 2, CacheLayout::kMapped},
    {"t8_b32_h8_hv16_skip_mapped", Entry::kMtp, 8, 32, 8, 16, 5, CacheLayout::kMapped},
    {"t1_b7_h16_hv32_skip_pool", Entry::kMtp, 1, 7, 16, 32, 3, CacheLayout::kPool},
    {"t4_b32_h16_hv32_skip_pool", Entry::kMtp, 4, 32, 16, 32, 4, CacheLayout::kPool},
    {"t8_b64_h4_hv16_skip_pool", Entry::kMtp, 8, 64, 4, 16, 7, CacheLayout::kPool},
    {"t1_b3_h16_hv32_final", Entry::kMtp, 1, 3, 16, 32, 0, CacheLayout::kPoolFinal},
    {"t4_b32_h16_hv32_skip_final", Entry::kMtp, 4, 32, 16, 32, 5, CacheLayout::kPoolFinal},
    {"t8_b256_h4_hv16_skip_final", Entry::kMtp, 8, 256, 4, 16, 9, CacheLayout::kPoolFinal},
    // Hv / H 3 and 24: the float head index (qk_head).
    {"t3_b5_h6_hv18_skip", Entry::kMtp, 3, 5, 6, 18, 2},
    {"t2_b3_h2_hv48", Entry::kMtp, 2, 3, 2, 48},
    // gdn_mtp_commit after a gdn_decode_mtp verify into a [batch, T] cache (given gates): 0, 1 and
    // all T tokens accepted, then every count in one batch with the out-of-contract ones; T = 1
    // and 8; skipped and permuted slots; batch 256.
    {"commit_t4_b8_h16_hv32_skip_none", Entry::kCommit, 4, 8, 16, 32, 3, CacheLayout::kBatch,
     Gates::kGiven, 0, 0, kNumerics, Accepted::kNone},
    {"commit_t4_b8_h16_hv32_skip_one", Entry::kCommit, 4, 8, 16, 32, 3, CacheLayout::kBatch,
     Gates::kGiven, 0, 0, kNumerics, Accepted::kOne},
    {"commit_t4_b8_h16_hv32_skip_all", Entry::kCommit, 4, 8, 16, 32, 3, CacheLayout::kBatch,
     Gates::kGiven, 0, 0, kNumerics, Accepted::kAll},
    {"commit_t1_b7_h16_hv32_all", Entry::kCommit, 1, 7, 16, 32, 0, CacheLayout::kBatch,
     Gates::kGiven, 0, 0, kNumerics, Accepted::kAll},
    {"commit_t8_b32_h8_hv16_skip_mixed", Entry::kCommit, 8, 32, 8, 16, 5, CacheLayout::kBatch,
     Gates::kGiven, 0, 0, kNumerics, Accepted::kMixed},
    {"commit_t3_b256_h4_hv16_skip_mixed", Entry::kCommit, 3, 256, 4, 16, 7, CacheLayout::kBatch,
     Gates::kGiven, 0, 0, kNumerics, Accepted::kMixed},
    // The benchmark's rows: H 16, Hv 32, d_k = d_v = 128, batch 1 / 8 / 32 / 256, no skipped
    // sequence, in the bench's dtype (--dtype) and tables (--ops): decode (given gates), mtp and
    // final (T = 4), gating (fused gating). Every one is checked too: the float64 reference is
    // ~2 * 10^9 multiply-adds at most, the batch-256 mtp cache 2 GiB.
    {"bench_decode_b1", Entry::kDecode, 1, 1, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_decode_b8", Entry::kDecode, 1, 8, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_decode_b32", Entry::kDecode, 1, 32, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_decode_b256", Entry::kDecode, 1, 256, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven,
     128, 128, kNumerics | kBench},
    {"bench_mtp_t4_b1", Entry::kMtp, 4, 1, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128, 128,
     kNumerics | kBench},
    {"bench_mtp_t4_b8", Entry::kMtp, 4, 8, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128, 128,
     kNumerics | kBench},
    {"bench_mtp_t4_b32", Entry::kMtp, 4, 32, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_mtp_t4_b256", Entry::kMtp, 4, 256, 16, 32, 0, CacheLayout::kBatch, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_final_t4_b1", Entry::kMtp, 4, 1, 16, 32, 0, CacheLayout::kPoolFinal, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_final_t4_b8", Entry::kMtp, 4, 8, 16, 32, 0, CacheLayout::kPoolFinal, Gates::kGiven, 128,
     128, kNumerics | kBench},
    {"bench_final_t4_b32", Entry::kMtp, 4, 32, 16, 32, 0, CacheLayout::kPoolFinal, Gates::kGiven,
     128, 128, kNumerics | kBench},
    {"bench_final_t4_b256", Entry::kMtp, 4, 256, 16, 32, 0, CacheLayout::kPoolFinal, Gates::kGiven,
     128, 128, kNumerics | kBench},
    {"bench_gating_b1", Entry::kDecode, 1, 1, 16, 32, 0, CacheLayout::kBatch, Gates::kFused, 128,
     128, kNumerics | kBench},
    {"bench_gating_b8", Entry::kDecode, 1, 8, 16, 32, 0, CacheLayout::kBatch, Gates::kFused, 128,
     128, kNumerics | kBench},
    {"bench_gating_b32", Entry::kDecode, 1, 32, 16, 32, 0, CacheLayout::kBatch, Gates::kFused, 128,
     128, kNumerics | kBench},
    {"bench_gating_b256", Entry::kDecode, 1, 256, 16, 32, 0, CacheLayout::kBatch, Gates::kFused,
     128, 128, kNumerics | kBench},
};

// gdn_prefill's cases (gdn::PrefillProblem): `count` sequences packed into one batch, their
// lengths in tokens taken from `lengths` in turn (a length 0 is a sequence with no token, which
// writes its starting state back), each sequence starting from its pool slot (a random
// permutation of a pool with more slots than sequences) or from zero, and some skipped.
// then_decode: after the prefill, one gdn_decode step per sequence from the state it wrote, checked
// against the float64 rule over the concatenated tokens.
inline constexpr int kMaxPrefillLengths = 8;
struct PrefillCase {
  const char* name;
  int count;                        // sequences
  int lengths[kMaxPrefillLengths];  // sequence b's: lengths[b % kMaxPrefillLengths]
  int heads_qk;                     // H
  int heads_v;                      // Hv
  int skip_every = 0;   // every n-th sequence (b % n == n - 1) gets a negative slot; 0: none
  int fresh_every = 0;  // every n-th sequence starts from zero (has_initial_state[b] = 0; the
                        // others 1); 0: has_initial_state null, every sequence from its slot
  Gates gates = Gates::kBoth;
  bool then_decode = false;
  unsigned readers = kNumerics;
};

inline constexpr PrefillCase kPrefillCases[] = {
    // The lengths in one ragged batch: inside, at and around a chunk of 64, and long.
    {"ragged_h2_hv4", 7, {1, 2, 63, 64, 65, 1000, 4097}, 2, 4},
    // Skipped and fresh sequences, a sequence of no token, 16 sequences over 8 lengths.
    {"ragged_b16_h4_hv16_skip_fresh", 16, {0, 129, 1, 64, 200, 3, 127, 65}, 4, 16, 3, 2},
    // GQA 8 and a ratio that is not a power of two; MQA-like H 1.
    {"gqa_h1_hv8", 3, {300, 17, 64}, 1, 8},
    {"ratio3_h2_hv6_skip", 4, {100, 1, 130, 2}, 2, 6, 2},
    // Prefill, then decode from the written state (every second sequence fresh).
    {"then_decode_h2_hv4_fresh", 5, {1, 64, 65, 300, 0}, 2, 4, 0, 2, Gates::kBoth, true},
    // The benchmark's rows (H 16, Hv 32, given gates): 1k, 4k, 16k tokens in one sequence and in
    // 8; checked too (the float64 reference of 16k tokens is ~7 x 10^10 multiply-adds, split over
    // the host's cores). 64k tokens is timed only.
    {"bench_prefill_t1k_b1", 1, {1024}, 16, 32, 0, 0, Gates::kGiven, false, kNumerics | kBench},
    {"bench_prefill_t4k_b1", 1, {4096}, 16, 32, 0, 0, Gates::kGiven, false, kNumerics | kBench},
    {"bench_prefill_t16k_b1", 1, {16384}, 16, 32, 0, 0, Gates::kGiven, false, kNumerics | kBench},
    {"bench_prefill_t64k_b1", 1, {65536}, 16, 32, 0, 0, Gates::kGiven, false, kBench},
    {"bench_prefill_t1k_b8",
     8,
     {128, 128, 128, 128, 128, 128, 128, 128},
     16,
     32,
     0,
     0,
     Gates::kGiven,
     false,
     kNumerics | kBench},
    {"bench_prefill_t4k_b8",
     8,
     {512, 512, 512, 512, 512, 512, 512, 512},
     16,
     32,
     0,
     0,
     Gates::kGiven,
     false,
     kNumerics | kBench},
    {"bench_prefill_t16k_b8",
     8,
     {2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048},
     16,
     32,
     0,
     0,
     Gates::kGiven,
     false,
     kNumerics | kBench},
    {"bench_prefill_t64k_b8",
     8,
     {8192, 8192, 8192, 8192, 8192, 8192, 8192, 8192},
     16,
     32,
     0,
     0,
     Gates::kGiven,
     false,
     kBench},
};

// Sequence b's length in case c.
constexpr int prefillLength(const PrefillCase& c, int b) {
  return c.lengths[b % kMaxPrefillLengths];
}

}  // namespace kiln::gdn::cases
