// The fmha group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (fmha_numerics_test.cpp) checks every case marked kNumerics against
//     the float64 reference, on every variant whose head dim, dtype and mask the case takes;
//   - the benchmark (bench/fmha_bridge.cpp exports the cases marked kBench, in this order, to
//     fmha_vs_torch.py) times every case marked kBench against cuDNN and FlashAttention-2, and
//     its --quick the ones also marked kQuick.
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

#include <initializer_list>

namespace kiln::fmha::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the float64 reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peers
inline constexpr unsigned kQuick = 1u << 2;     // with kBench: also in the bench's --quick

struct Seq {
  int q, k;  // query and key count of one sequence
};

// The sequences of a packed batch, in order, at most kMaxSeqs of them; more is a compile error.
inline constexpr int kMaxSeqs = 9;
struct Seqs {
  int count = 0;
  Seq values[kMaxSeqs] = {};
  constexpr Seqs() = default;
  constexpr Seqs(std::initializer_list<Seq> list) {
    for (const Seq& s : list) values[count++] = s;
  }
};

// Which variants a case is for, besides its head dim.
enum class Dtypes { kBoth, kFp16, kBf16 };
enum class Masks { kBoth, kFull, kCausal };

struct Case {
  const char* name;  // a bench case's starts with its workload: "fa3_", "gqa_"
  int q_heads;
  int kv_heads;
  Seqs seqs;                    // the packed batch, in order ...
  int repeat = 1;               // ... repeated this many times (a bench batch of equal sequences)
  double scale_factor = 1.0;    // softmax scale = scale_factor / sqrt(head_dim)
  bool lse = true;              // request lse
  bool max_seqlen_hint = true;  // pass the true max_seqlen_q (else 0: the runner takes total_q)
  int head_dim = 0;             // 0: every variant's head dim; else the variants of that one only
  Dtypes dtypes = Dtypes::kBoth;
  Masks masks = Masks::kBoth;
  unsigned readers = kNumerics;
};

// The kernel's tiles are kBlockM = 128 query rows (two wgmma m64 halves) by blockN(head_dim, mask)
// keys (128 causal; 176 at d128 and 192 at d64 otherwise: launch.h), so the numerics lengths sit on
// either side of 64, 128, 176 and 192 and span several tiles. Head counts keep the float64
// reference (O(sq * sk * d * heads)) to a few seconds on 16 cores: 4097^2 only with 2 heads.
inline constexpr Case kCases[] = {
    {.name = "s1_gqa1", .q_heads = 4, .kv_heads = 4, .seqs = {{1, 1}}},
    {.name = "s2_gqa1", .q_heads = 4, .kv_heads = 4, .seqs = {{2, 2}}},
    {.name = "s63_gqa1", .q_heads = 4, .kv_heads = 4, .seqs = {{63, 63}}},
    {.name = "s64_gqa4", .q_heads = 4, .kv_heads = 1, .seqs = {{64, 64}}},
    {.name = "s65_gqa4", .q_heads = 4, .kv_heads = 1, .seqs = {{65, 65}}},
    {.name = "s127_gqa1", .q_heads = 4, .kv_heads = 4, .seqs = {{127, 127}}},
    {.name = "s175_gqa1", .q_heads = 2, .kv_heads = 2, .seqs = {{175, 175}}},
    {.name = "s177_gqa2", .q_heads = 4, .kv_heads = 2, .seqs = {{177, 177}}},
    {.name = "s193_gqa1", .q_heads = 2, .kv_heads = 2, .seqs = {{193, 193}}},
    {.name = "s128_gqa1_nolse", .q_heads = 4, .kv_heads = 4, .seqs = {{128, 128}}, .lse = false},
    {.name = "s129_gqa1", .q_heads = 4, .kv_heads = 4, .seqs = {{129, 129}}},
    // A sharp softmax (scale x 4: scores spread over ~+-10) exercises the running max.
    {.name = "s1000_gqa4_scale4",
     .q_heads = 8,
     .kv_heads = 2,
     .seqs = {{1000, 1000}},
     .scale_factor = 4.0},
    {.name = "s4097_gqa1", .q_heads = 2, .kv_heads = 2, .seqs = {{4097, 4097}}},
    // Every boundary length in one packed batch: Q and K tiles straddle sequence boundaries.
    {.name = "ragged_lengths_gqa4",
     .q_heads = 8,
     .kv_heads = 2,
     .seqs = {{129, 129},
              {1, 1},
              {64, 64},
              {1000, 1000},
              {2, 2},
              {127, 127},
              {65, 65},
              {128, 128},
              {63, 63}}},
    // GQA 8 with a sharp softmax and max_seqlen_q = 0 (the grid then covers total_q).
    {.name = "ragged_gqa8_scale4_nohint",
     .q_heads = 16,
     .kv_heads = 2,
     .seqs = {{300, 300}, {65, 65}, {1, 1}, {129, 129}, {64, 64}},
     .scale_factor = 4.0,
     .max_seqlen_hint = false},
    // MQA, a flat softmax (scale x 0.37), lse not requested.
    {.name = "ragged_mqa_scale037_nolse",
     .q_heads = 8,
     .kv_heads = 1,
     .seqs = {{1000, 1000}, {127, 127}, {2, 2}},
     .scale_factor = 0.37,
     .lse = false},
    // The GQA shape of the benchmark (32 query / 8 KV heads).
    {.name = "ragged_gqa32x8",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{257, 257}, {1, 1}, {128, 128}}},
    // Fewer queries than keys (chunked prefill over cached keys): the causal mask's diagonal is
    // offset by sk - sq.
    {.name = "chunk_q64_k1000_gqa8", .q_heads = 16, .kv_heads = 2, .seqs = {{64, 1000}}},
    {.name = "chunk_q1_k4097_gqa1", .q_heads = 8, .kv_heads = 8, .seqs = {{1, 4097}}},
    {.name = "chunk_q129_k300_mqa", .q_heads = 4, .kv_heads = 1, .seqs = {{129, 300}}},
    // A chunked-prefill batch with every odd sequence: more queries than keys (causal: the first
    // sq - sk queries see no key), no keys at all (no query sees a key, with or without the
    // mask), no queries.
    {.name = "ragged_chunks_edges_gqa4",
     .q_heads = 8,
     .kv_heads = 2,
     .seqs =
         {{64, 1000}, {1, 4097}, {129, 300}, {3, 3}, {0, 5}, {5, 0}, {129, 64}, {65, 1}, {2, 2}}},
    // The benchmark's FlashAttention-3 workload: 16k tokens = B x S, hidden 2048 (Hq = Hkv =
    // 2048 / d), S = 512 ... 16k, d 64 and 128, fp16 and bf16 (--dtypes), full and causal
    // (--masks). The float64 reference of a row is 2 * 16k * 2048 * S multiply-adds (halved for
    // causal), a few seconds on 16 cores at S = 512 and twice that per doubling: the numerics
    // check S = 512 only. --quick times S 4k and 16k at d128 (bf16).
    {.name = "fa3_d64_s512",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{512, 512}},
     .repeat = 32,
     .head_dim = 64,
     .readers = kNumerics | kBench},
    {.name = "fa3_d64_s1024",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{1024, 1024}},
     .repeat = 16,
     .head_dim = 64,
     .readers = kBench},
    {.name = "fa3_d64_s2048",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{2048, 2048}},
     .repeat = 8,
     .head_dim = 64,
     .readers = kBench},
    {.name = "fa3_d64_s4096",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 64,
     .readers = kBench},
    {.name = "fa3_d64_s8192",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{8192, 8192}},
     .repeat = 2,
     .head_dim = 64,
     .readers = kBench},
    {.name = "fa3_d64_s16384",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{16384, 16384}},
     .repeat = 1,
     .head_dim = 64,
     .readers = kBench},
    {.name = "fa3_d128_s512",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{512, 512}},
     .repeat = 32,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "fa3_d128_s1024",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{1024, 1024}},
     .repeat = 16,
     .head_dim = 128,
     .readers = kBench},
    {.name = "fa3_d128_s2048",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{2048, 2048}},
     .repeat = 8,
     .head_dim = 128,
     .readers = kBench},
    {.name = "fa3_d128_s4096",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 128,
     .readers = kBench | kQuick},
    {.name = "fa3_d128_s8192",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{8192, 8192}},
     .repeat = 2,
     .head_dim = 128,
     .readers = kBench},
    {.name = "fa3_d128_s16384",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{16384, 16384}},
     .repeat = 1,
     .head_dim = 128,
     .readers = kBench | kQuick},
    // The benchmark's GQA row: 32 query / 8 KV heads, d 128, bf16, B 4 x S 4k, full and causal
    // (--masks). Its float64 reference (~5 * 10^11 multiply-adds) is past what the numerics
    // afford; ragged_gqa32x8 checks the head shape.
    {.name = "gqa_d128_s4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .readers = kBench | kQuick},
};

}  // namespace kiln::fmha::cases
