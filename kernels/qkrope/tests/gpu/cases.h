// The qkrope group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (qkrope_numerics_test.cpp) checks every case marked kNumerics against
//     the float64 reference, on every variant whose head dim the case takes, in both page layouts
//     (NHD and HND; an HND case's result is named <name>_hnd);
//   - the benchmark (bench/qkrope_bridge.cpp exports the cases marked kBench, in this order, to
//     qkrope_vs_torch.py) times every case marked kBench against eager PyTorch.
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

namespace kiln::qkrope::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the float64 reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peer

struct Case {
  const char* name;
  int tokens;
  int q_heads;
  int kv_heads;
  int page_size = 16;
  int rotary_dim = 0;       // Problem::rotary_dim (0: the head dim); < 0: head dim / -rotary_dim
  bool qk_norm = true;      // Qwen3's q_norm / k_norm
  float theta = 1e6f;       // Qwen3's rope_theta
  bool contiguous = false;  // k_out and v_out too
  // Every padding-th token's slot is -1 (0: none); a token past the cache's slots (slot =
  // num_pages * page_size) when out_of_range: neither is written.
  int padding = 0;
  bool out_of_range = false;
  long long max_position = 8192;  // positions drawn in [0, max_position)
  int head_dim = 0;               // 0: every variant's head dim; else the variants of that one only
  unsigned readers = kNumerics;
};

inline constexpr Case kCases[] = {
    // Qwen3-0.6B..4B heads (16 q / 8 kv), decode of one token and of a small batch, prefill.
    {.name = "qwen3_16x8_t1", .tokens = 1, .q_heads = 16, .kv_heads = 8},
    {.name = "qwen3_16x8_t7", .tokens = 7, .q_heads = 16, .kv_heads = 8},
    {.name = "qwen3_16x8_t257_p256", .tokens = 257, .q_heads = 16, .kv_heads = 8, .page_size = 256},
    {.name = "qwen3_16x8_t4096", .tokens = 4096, .q_heads = 16, .kv_heads = 8},
    // Qwen3-8B / 14B / 32B-like 32 q / 8 kv heads; padding slots (-1) and a slot past the cache.
    {.name = "qwen3_32x8_t1_p256", .tokens = 1, .q_heads = 32, .kv_heads = 8, .page_size = 256},
    {.name = "qwen3_32x8_t33_pad",
     .tokens = 33,
     .q_heads = 32,
     .kv_heads = 8,
     .padding = 4,
     .out_of_range = true},
    {.name = "qwen3_32x8_t4096_p256",
     .tokens = 4096,
     .q_heads = 32,
     .kv_heads = 8,
     .page_size = 256,
     .padding = 97},
    // 64 q / 8 kv (Qwen3-32B): 80 heads, two blocks per token at head dim 128, three at 256.
    {.name = "gqa64x8_t65_p32_contiguous",
     .tokens = 65,
     .q_heads = 64,
     .kv_heads = 8,
     .page_size = 32,
     .contiguous = true},
    // Llama-style: no QK norm, theta 500000, positions up to 128k (fp32 angles of up to 131072
    // rad: sincosf's argument reduction), contiguous K / V too.
    {.name = "llama_32x8_t300_nonorm_long",
     .tokens = 300,
     .q_heads = 32,
     .kv_heads = 8,
     .page_size = 64,
     .qk_norm = false,
     .theta = 500000.0f,
     .contiguous = true,
     .max_position = 131072},
    // Partial rotary (half the head dim: dims past it pass through, normed), MHA and MQA, an odd
    // head count that leaves part of the last warp idle (12 + 2 * 1 = 14 heads).
    {.name = "partial_half_8x8_t40",
     .tokens = 40,
     .q_heads = 8,
     .kv_heads = 8,
     .page_size = 128,
     .rotary_dim = -2,
     .theta = 10000.0f},
    {.name = "partial_quarter_mqa12_t19",
     .tokens = 19,
     .q_heads = 12,
     .kv_heads = 1,
     .rotary_dim = -4,
     .contiguous = true,
     .padding = 3},
    // The benchmark's rows (bf16 in the bench, head dim 128, Qwen3-8B's 32 / 8 heads, NHD pages of
    // 16): decode batches 1, 8, 64, prefill chunks of 512 and 4096 tokens, and 16384 for bandwidth.
    {.name = "bench_t1",
     .tokens = 1,
     .q_heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_t8",
     .tokens = 8,
     .q_heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_t64",
     .tokens = 64,
     .q_heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_t512",
     .tokens = 512,
     .q_heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_t4096",
     .tokens = 4096,
     .q_heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .readers = kNumerics | kBench},
    {.name = "bench_t16384",
     .tokens = 16384,
     .q_heads = 32,
     .kv_heads = 8,
     .head_dim = 128,
     .readers = kNumerics | kBench},
};

}  // namespace kiln::qkrope::cases
