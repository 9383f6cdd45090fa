// The decodeattn group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (decodeattn_numerics_test.cpp) checks every case marked kNumerics
//     against the float64 reference, on every variant whose head dim the case takes, in both page
//     layouts (NHD and HND; an HND case's result is named <name>_hnd);
//   - the benchmark (bench/decodeattn_bridge.cpp exports the cases marked kBench, in this order,
//     to decodeattn_vs_torch.py) times every case marked kBench against cuDNN and FlashAttention.
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

#include <initializer_list>

namespace kiln::decodeattn::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the float64 reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peers

// Sequence lengths (keys per sequence), at most kMaxLengths of them; more is a compile error.
inline constexpr int kMaxLengths = 8;
struct Lengths {
  int count = 0;
  int values[kMaxLengths] = {};
  constexpr Lengths() = default;
  constexpr Lengths(std::initializer_list<int> list) {
    for (int len : list) values[count++] = len;
  }
};

struct Case {
  const char* name;
  int q_heads;
  int kv_heads;
  // The batch: sequence b has lengths[b % count] keys, for batch sequences (0: one per length);
  // with no lengths, batch sequences of random lengths in [1, max_random_len].
  Lengths lengths = {};
  int batch = 0;
  int max_random_len = 0;
  int page_size = 16;
  double scale_factor = 1.0;  // softmax scale = scale_factor / sqrt(head_dim)
  int multiprocessors = 0;    // Problem::multiprocessors (0: the device's); forces the split count
  int max_seq_len = 0;        // Problem::max_seq_len (0: the page table's capacity)
  int query_tokens = 1;       // Problem::query_tokens: > 1 is multi-token decoding (causal)
  int head_dim = 0;           // 0: every variant's head dim; else the variants of that one only
  unsigned readers = kNumerics;
};

// The number of sequences of a case.
constexpr int batchOf(const Case& c) {
  return c.batch > 0 ? c.batch : c.lengths.count;
}

inline constexpr Case kCases[] = {
    // The boundary lengths in one batch, GQA 8, split path (device SM count).
    {.name = "lengths_gqa8_p16",
     .q_heads = 16,
     .kv_heads = 2,
     .lengths = {1, 15, 16, 17, 255, 256, 257, 4097}},
    // The same lengths on one simulated SM: one split, the single-pass path on long sequences.
    {.name = "lengths_gqa8_p64_one_split",
     .q_heads = 16,
     .kv_heads = 2,
     .lengths = {4097, 257, 256, 255, 17, 16, 15, 1},
     .page_size = 64,
     .multiprocessors = 1},
    // 32k keys, GQA 4, many splits; a sharp softmax (scale x 4) exercises the running max.
    {.name = "long32768_gqa4_p32",
     .q_heads = 8,
     .kv_heads = 2,
     .lengths = {32768},
     .page_size = 32,
     .scale_factor = 4.0},
    // 32k keys next to a 1-key sequence, GQA 1 (4 pairs: 33 splits on 132 SMs, > 32 partials
    // per row in the merge).
    {.name = "long32768_and_1_gqa1_p16", .q_heads = 4, .kv_heads = 4, .lengths = {32768, 1}},
    // The benchmark's 1 x 32768 row (bf16 bench, GQA 32/8, page 16) planned for an H100 /
    // H200's 132 SMs: 8 pairs -> 16 splits of 2048 keys. (Its wrong output on the H200 in
    // 2026-12-02 run 2 was the bench's strided cache.)
    {.name = "bench1x32768_gqa32x8_p16_sm132",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {32768},
     .multiprocessors = 132,
     .max_seq_len = 32768},
    // The same planned for 264 SMs: 33 splits, 32 ranges of 1024 keys and an empty last one.
    {.name = "bench1x32768_gqa32x8_p16_sm264",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {32768},
     .multiprocessors = 264,
     .max_seq_len = 32768},
    // Batch 256 of short random lengths, GQA 1: fills the GPU, one split.
    {.name = "batch256_gqa1_p32",
     .q_heads = 4,
     .kv_heads = 4,
     .batch = 256,
     .max_random_len = 300,
     .page_size = 32},
    // Batch 256, GQA 8, forced splits (256 SMs): many empty splits of short sequences.
    {.name = "batch256_gqa8_p16_split",
     .q_heads = 8,
     .kv_heads = 1,
     .batch = 256,
     .max_random_len = 600,
     .multiprocessors = 256},
    // The benchmark's head shape (GQA 32/8), sharp softmax.
    {.name = "gqa32x8_p16",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {4097, 1000, 33},
     .scale_factor = 8.0},
    // MQA with 40 query heads: two 32-row chunks (32, 8: the second's upper row tile all
    // padding) per KV head.
    {.name = "mqa40_p128", .q_heads = 40, .kv_heads = 1, .lengths = {257, 1031}, .page_size = 128},
    // Empty sequences give zeros, next to others; page 256.
    {.name = "zero_lengths_gqa4_p256",
     .q_heads = 8,
     .kv_heads = 2,
     .lengths = {0, 5, 0, 300},
     .page_size = 256},
    // A max_seq_len hint below the table's capacity (fewer splits), and page 32.
    {.name = "max_len_hint_p32",
     .q_heads = 16,
     .kv_heads = 2,
     .lengths = {2000, 100},
     .page_size = 32,
     .max_seq_len = 2000},
    // A max_seq_len hint below the longest sequence (it only sizes the split count; the
    // longer sequence must still be exact): split and single-pass paths.
    {.name = "hint_below_length_p16",
     .q_heads = 16,
     .kv_heads = 2,
     .lengths = {3000, 500},
     .max_seq_len = 1000},
    {.name = "hint_below_length_p16_one_split",
     .q_heads = 16,
     .kv_heads = 2,
     .lengths = {3000, 500},
     .multiprocessors = 1,
     .max_seq_len = 1000},
    // Multi-token decoding: T query tokens per sequence, causal over the last T keys. Length 1
    // with T = 2 leaves token 0 without a key (zeros); lengths at and around a subtile.
    {.name = "mtp2_gqa4_p16",
     .q_heads = 8,
     .kv_heads = 2,
     .lengths = {1, 2, 17, 1000, 16},
     .query_tokens = 2},
    // The bench's head shape, 4 tokens: 4 x 4 = 16 rows, one tile per KV head; split path.
    {.name = "mtp4_gqa32x8_p16",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {4097, 300},
     .scale_factor = 4.0,
     .query_tokens = 4},
    // 8 tokens x GQA 8 = 64 rows: two 32-row chunks per KV head; lengths below and at T.
    {.name = "mtp8_gqa8_p32_one_split",
     .q_heads = 16,
     .kv_heads = 2,
     .lengths = {8, 7, 3000, 5},
     .page_size = 32,
     .multiprocessors = 1,
     .query_tokens = 8},
    // Batch 64, GQA 1, 3 tokens, forced splits (many empty ones for short sequences).
    {.name = "mtp3_batch64_gqa1_p64_split",
     .q_heads = 4,
     .kv_heads = 4,
     .batch = 64,
     .max_random_len = 500,
     .page_size = 64,
     .multiprocessors = 256,
     .query_tokens = 3},
    // MQA 40 x 5 tokens = 200 rows: 7 chunks of 32, the last one partial.
    {.name = "mtp5_mqa40_p16",
     .q_heads = 40,
     .kv_heads = 1,
     .lengths = {257, 33},
     .query_tokens = 5},
    // 5 tokens x GQA 4 = 20 rows: one 32-row chunk whose second row tile holds the last token
    // alone (rows 16..19); sharp softmax, split path, a length below T.
    {.name = "mtp5_gqa4_p16",
     .q_heads = 16,
     .kv_heads = 4,
     .lengths = {4097, 3, 300},
     .scale_factor = 4.0,
     .query_tokens = 5},
    // The benchmark's rows (issue 6): batch x keys, every sequence the same length, bf16 (the
    // bench's --dtype), GQA 32 query / 8 KV heads, head dim 128, page 16 (--page-size), one
    // query token (--query-tokens), the split count planned for the device (--plan-sms), the
    // keys as max_seq_len. Every one is checked too: the float64 reference is ~10^9
    // multiply-adds at most (256 x 1024), spread over the cores.
    {.name = "bench_b1_s32768",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {32768},
     .batch = 1,
     .max_seq_len = 32768,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_b8_s8192",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {8192},
     .batch = 8,
     .max_seq_len = 8192,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_b32_s4096",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {4096},
     .batch = 32,
     .max_seq_len = 4096,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_b64_s2048",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {2048},
     .batch = 64,
     .max_seq_len = 2048,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_b256_s1024",
     .q_heads = 32,
     .kv_heads = 8,
     .lengths = {1024},
     .batch = 256,
     .max_seq_len = 1024,
     .head_dim = 128,
     .readers = kNumerics | kBench},
};

}  // namespace kiln::decodeattn::cases
