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
  // A sliding window (causal variants only; FlashAttention's window_size_left), and paged K / V
  // (the mma variants only): the keys scattered over pages of page_size keys in random order
  // (NHD, or HND when hnd), two pages that no sequence owns and every row past a sequence's keys
  // poisoned (NaN).
  int window_left = -1;
  int page_size = 0;  // 0: contiguous K / V
  bool hnd = false;
  bool mma_only = false;  // the mma kernel only (a shape wgmma serves too, timed on mma)
};

// The wgmma kernel's tiles are kBlockM = 128 query rows (two wgmma m64 halves) by blockN(head_dim,
// mask) keys (128 causal; 176 at d128 and 192 at d64 otherwise: launch.h), so the numerics lengths
// sit on either side of 64, 128, 176 and 192 and span several tiles. Head counts keep the float64
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
    // Sliding windows (causal variants of both kernels): W = 0 (the diagonal key alone), 1, 64
    // (tile edges inside and across 64-key tiles), 4096 at 4097 keys (the first key drops out of
    // the last query's window), longer than any sequence (the causal mask alone), and windows over
    // cached keys (sq < sk) in a ragged batch.
    {.name = "win0_s300_gqa4", .q_heads = 8, .kv_heads = 2, .seqs = {{300, 300}}, .window_left = 0},
    {.name = "win1_ragged_gqa1",
     .q_heads = 4,
     .kv_heads = 4,
     .seqs = {{1, 1}, {2, 2}, {3, 3}, {127, 127}, {129, 129}},
     .window_left = 1},
    {.name = "win64_ragged_gqa4",
     .q_heads = 8,
     .kv_heads = 2,
     .seqs = {{1000, 1000}, {127, 127}, {129, 129}, {1, 1}, {65, 65}},
     .window_left = 64},
    {.name = "win4096_s4097_gqa1",
     .q_heads = 2,
     .kv_heads = 2,
     .seqs = {{4097, 4097}},
     .window_left = 4096},
    {.name = "win10000_ragged_mqa",
     .q_heads = 4,
     .kv_heads = 1,
     .seqs = {{1000, 1000}, {3, 3}},
     .window_left = 10000},
    {.name = "win100_chunks_gqa8",
     .q_heads = 16,
     .kv_heads = 2,
     .seqs = {{64, 1000}, {1, 4097}, {129, 300}, {5, 3}},
     .window_left = 100},
    // Paged K / V (mma kernel): decodeattn's cache, pages in random order, lengths that are not
    // multiples of the page size, NHD and HND, page sizes 16, 64, 256.
    {.name = "paged16_ragged_gqa4",
     .q_heads = 8,
     .kv_heads = 2,
     .seqs = {{1, 1}, {2, 2}, {3, 3}, {127, 127}, {129, 129}, {1000, 1000}},
     .page_size = 16},
    {.name = "paged64_hnd_s4097_gqa1",
     .q_heads = 2,
     .kv_heads = 2,
     .seqs = {{4097, 4097}},
     .page_size = 64,
     .hnd = true},
    {.name = "paged256_chunks_gqa8",
     .q_heads = 16,
     .kv_heads = 2,
     .seqs = {{64, 1000}, {129, 300}, {1, 17}, {0, 5}, {65, 1}},
     .page_size = 256},
    {.name = "paged16_hnd_window64_mqa",
     .q_heads = 4,
     .kv_heads = 1,
     .seqs = {{300, 300}, {33, 700}},
     .window_left = 64,
     .page_size = 16,
     .hnd = true},
    // Speculative verification: 2 to 8 query tokens per sequence over a cache of 500-4097 keys
    // (the tokens' own keys last), GQA 4 and 8.
    {.name = "verify_t2to8_paged16_gqa4",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{2, 500}, {3, 4097}, {4, 1031}, {5, 65}, {6, 2000}, {7, 129}, {8, 4096}},
     .page_size = 16},
    {.name = "verify_t4_paged64_hnd_gqa8",
     .q_heads = 16,
     .kv_heads = 2,
     .seqs = {{4, 1000}, {4, 77}, {4, 3000}},
     .page_size = 64,
     .hnd = true},
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
    // The mma kernel on the same workload (16k tokens, hidden 2048), d 64 / 128 / 256, S 1k-16k,
    // against FlashAttention-2 (SDPA's flash backend): the portable kernel pinned on the Hopper
    // GPU.
    {.name = "mma_d64_s1024",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{1024, 1024}},
     .repeat = 16,
     .head_dim = 64,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d64_s4096",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 64,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d64_s16384",
     .q_heads = 32,
     .kv_heads = 32,
     .seqs = {{16384, 16384}},
     .repeat = 1,
     .head_dim = 64,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d128_s1024",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{1024, 1024}},
     .repeat = 16,
     .head_dim = 128,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d128_s4096",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 128,
     .readers = kBench | kQuick,
     .mma_only = true},
    {.name = "mma_d128_s16384",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{16384, 16384}},
     .repeat = 1,
     .head_dim = 128,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d256_s1024",
     .q_heads = 8,
     .kv_heads = 8,
     .seqs = {{1024, 1024}},
     .repeat = 16,
     .head_dim = 256,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d256_s4096",
     .q_heads = 8,
     .kv_heads = 8,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 256,
     .readers = kBench,
     .mma_only = true},
    {.name = "mma_d256_s16384",
     .q_heads = 8,
     .kv_heads = 8,
     .seqs = {{16384, 16384}},
     .repeat = 1,
     .head_dim = 256,
     .readers = kBench,
     .mma_only = true},
    // Paged against contiguous K / V, the same kernel and shape (mma, d128, 4 x 4k, GQA 32 / 8):
    // pages of 16 and 64 keys in random order.
    {.name = "mma_gqa_d128_s4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .readers = kBench,
     .mma_only = true},
    {.name = "paged16_gqa_d128_s4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .readers = kBench,
     .page_size = 16},
    {.name = "paged64_gqa_d128_s4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{4096, 4096}},
     .repeat = 4,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .readers = kBench,
     .page_size = 64},
    // Speculative verification on the paged cache (mma kernel): batch 32, 4096 cached keys, T = 2,
    // 4, 8 query tokens, GQA 32 / 8, page 16: bound by reading K and V once (% of copy bandwidth).
    {.name = "verify_t2_b32_k4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{2, 4096}},
     .repeat = 32,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .masks = Masks::kCausal,
     .readers = kBench,
     .page_size = 16},
    {.name = "verify_t4_b32_k4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{4, 4096}},
     .repeat = 32,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .masks = Masks::kCausal,
     .readers = kBench | kQuick,
     .page_size = 16},
    {.name = "verify_t8_b32_k4096",
     .q_heads = 32,
     .kv_heads = 8,
     .seqs = {{8, 4096}},
     .repeat = 32,
     .head_dim = 128,
     .dtypes = Dtypes::kBf16,
     .masks = Masks::kCausal,
     .readers = kBench,
     .page_size = 16},
    // A sliding window of 4096 keys at S 16k: TFLOP/s over the visible pairs, against the same
    // kernel's causal rate at S 16k (fa3_d128_s16384 on wgmma, mma_d128_s16384 on mma).
    {.name = "window4096_d128_s16384",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{16384, 16384}},
     .head_dim = 128,
     .masks = Masks::kCausal,
     .readers = kBench | kQuick,
     .window_left = 4096},
    {.name = "mma_window4096_d128_s16384",
     .q_heads = 16,
     .kv_heads = 16,
     .seqs = {{16384, 16384}},
     .head_dim = 128,
     .masks = Masks::kCausal,
     .readers = kBench,
     .window_left = 4096,
     .mma_only = true},
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
