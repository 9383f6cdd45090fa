// The gemv group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (gemv_numerics_test.cpp) checks every case marked kNumerics on every
//     variant (fp16, bf16), with overlap_launch off and on, against reference.h;
//   - the benchmark (bench/gemv_bridge.cpp exports the cases marked kBench, in this order, to
//     gemv_vs_torch.py) times every case marked kBench against torch.nn.functional.linear.
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

namespace kiln::gemv::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peer

struct Case {
  const char* name;
  long long m;  // 1..8
  long long n;
  long long k;
  long long ldx_pad = 0;  // ldx = k + ldx_pad (a multiple of 8; 0: ldx passed as 0, meaning k)
  long long ldy_pad = 0;  // ldy = n + ldy_pad (0: ldy passed as 0, meaning n)
  bool bias = false;
  bool out_fp32 = false;  // y in float32, else in the variant's dtype
  unsigned readers = kNumerics;
};

inline constexpr Case kCases[] = {
    // Every m, 1..8 (rows past m neither read nor written), over n 2053 (the last block's 16 rows
    // hold 5 of w) and k 264 (33 vectors: 9 steps of 32, the last one a single vector), padded
    // rows of x and y, bias and the output dtype alternating.
    {.name = "m1_n2053_k264",
     .m = 1,
     .n = 2053,
     .k = 264,
     .ldx_pad = 8,
     .ldy_pad = 3,
     .bias = true},
    {.name = "m2_n2053_k264",
     .m = 2,
     .n = 2053,
     .k = 264,
     .ldx_pad = 16,
     .ldy_pad = 11,
     .out_fp32 = true},
    {.name = "m3_n2053_k264",
     .m = 3,
     .n = 2053,
     .k = 264,
     .ldx_pad = 8,
     .ldy_pad = 1,
     .bias = true,
     .out_fp32 = true},
    {.name = "m4_n2053_k264", .m = 4, .n = 2053, .k = 264, .ldx_pad = 24, .ldy_pad = 64},
    {.name = "m5_n2053_k264",
     .m = 5,
     .n = 2053,
     .k = 264,
     .ldx_pad = 8,
     .ldy_pad = 7,
     .bias = true},
    {.name = "m6_n2053_k264",
     .m = 6,
     .n = 2053,
     .k = 264,
     .ldx_pad = 40,
     .ldy_pad = 2,
     .out_fp32 = true},
    {.name = "m7_n2053_k264",
     .m = 7,
     .n = 2053,
     .k = 264,
     .ldx_pad = 8,
     .ldy_pad = 5,
     .bias = true,
     .out_fp32 = true},
    {.name = "m8_n2053_k264", .m = 8, .n = 2053, .k = 264, .ldx_pad = 8, .ldy_pad = 9},

    // n: one row of w (one warp of the one block stores, the other three hold past-n rows), a
    // partial block (7), one block (8), one and one row (9), 4096.
    {.name = "m3_n1_k256", .m = 3, .n = 1, .k = 256, .ldy_pad = 7, .bias = true},
    {.name = "m3_n7_k256", .m = 3, .n = 7, .k = 256, .ldx_pad = 8, .out_fp32 = true},
    {.name = "m3_n8_k256", .m = 3, .n = 8, .k = 256, .bias = true},
    {.name = "m3_n9_k256", .m = 3, .n = 9, .k = 256, .ldy_pad = 1, .out_fp32 = true},
    {.name = "m3_n4096_k256",
     .m = 3,
     .n = 4096,
     .k = 256,
     .ldx_pad = 8,
     .ldy_pad = 8,
     .bias = true},

    // k: one vector per row (8), three (24: lanes 3..31 have none), one per lane (256), 33 (264),
    // 2048, 6144 (Qwen3's MLP), 8200 (1025 vectors: a ragged last unrolled batch); at m 1 and 8.
    {.name = "m1_n64_k8", .m = 1, .n = 64, .k = 8, .ldx_pad = 8, .bias = true},
    {.name = "m8_n64_k8", .m = 8, .n = 64, .k = 8, .ldx_pad = 8, .ldy_pad = 1, .out_fp32 = true},
    {.name = "m1_n64_k24", .m = 1, .n = 64, .k = 24, .out_fp32 = true},
    {.name = "m8_n64_k24", .m = 8, .n = 64, .k = 24, .ldx_pad = 8, .bias = true},
    {.name = "m1_n40_k256", .m = 1, .n = 40, .k = 256, .ldy_pad = 3, .bias = true},
    {.name = "m8_n40_k256", .m = 8, .n = 40, .k = 256, .ldx_pad = 64, .out_fp32 = true},
    {.name = "m1_n33_k264", .m = 1, .n = 33, .k = 264, .out_fp32 = true},
    {.name = "m8_n33_k264", .m = 8, .n = 33, .k = 264, .ldy_pad = 31, .bias = true},
    {.name = "m1_n129_k2048", .m = 1, .n = 129, .k = 2048, .ldx_pad = 8, .bias = true},
    {.name = "m8_n129_k2048", .m = 8, .n = 129, .k = 2048, .ldy_pad = 1, .out_fp32 = true},
    {.name = "m1_n65_k6144", .m = 1, .n = 65, .k = 6144, .out_fp32 = true},
    {.name = "m8_n65_k6144", .m = 8, .n = 65, .k = 6144, .ldx_pad = 8, .bias = true},
    {.name = "m1_n31_k8200", .m = 1, .n = 31, .k = 8200, .ldy_pad = 1, .bias = true},
    {.name = "m8_n31_k8200", .m = 8, .n = 31, .k = 8200, .ldx_pad = 8, .out_fp32 = true},

    // The Qwen3 test model (hidden 2048, 16 query and 8 KV heads of 128, MLP 6144, vocab 32000):
    // qkv 4096 x 2048, o 2048 x 2048, gate+up 12288 x 2048, down 2048 x 6144 in the dtype, the
    // LM head 32000 x 2048 into float32 logits, at m 1, 2, 4, 8. The numerics check m 1 and 8 of
    // qkv, gate+up, down and the LM head; the benchmark times them all.
    {.name = "qwen3_qkv_m1", .m = 1, .n = 4096, .k = 2048, .readers = kNumerics | kBench},
    {.name = "qwen3_qkv_m2", .m = 2, .n = 4096, .k = 2048, .readers = kBench},
    {.name = "qwen3_qkv_m4", .m = 4, .n = 4096, .k = 2048, .readers = kBench},
    {.name = "qwen3_qkv_m8", .m = 8, .n = 4096, .k = 2048, .readers = kNumerics | kBench},
    {.name = "qwen3_o_m1", .m = 1, .n = 2048, .k = 2048, .readers = kBench},
    {.name = "qwen3_o_m2", .m = 2, .n = 2048, .k = 2048, .readers = kBench},
    {.name = "qwen3_o_m4", .m = 4, .n = 2048, .k = 2048, .readers = kBench},
    {.name = "qwen3_o_m8", .m = 8, .n = 2048, .k = 2048, .readers = kBench},
    {.name = "qwen3_gate_up_m1", .m = 1, .n = 12288, .k = 2048, .readers = kNumerics | kBench},
    {.name = "qwen3_gate_up_m2", .m = 2, .n = 12288, .k = 2048, .readers = kBench},
    {.name = "qwen3_gate_up_m4", .m = 4, .n = 12288, .k = 2048, .readers = kBench},
    {.name = "qwen3_gate_up_m8", .m = 8, .n = 12288, .k = 2048, .readers = kNumerics | kBench},
    {.name = "qwen3_down_m1", .m = 1, .n = 2048, .k = 6144, .readers = kNumerics | kBench},
    {.name = "qwen3_down_m2", .m = 2, .n = 2048, .k = 6144, .readers = kBench},
    {.name = "qwen3_down_m4", .m = 4, .n = 2048, .k = 6144, .readers = kBench},
    {.name = "qwen3_down_m8", .m = 8, .n = 2048, .k = 6144, .readers = kNumerics | kBench},
    {.name = "qwen3_lm_head_m1",
     .m = 1,
     .n = 32000,
     .k = 2048,
     .out_fp32 = true,
     .readers = kNumerics | kBench},
    {.name = "qwen3_lm_head_m2",
     .m = 2,
     .n = 32000,
     .k = 2048,
     .out_fp32 = true,
     .readers = kBench},
    {.name = "qwen3_lm_head_m4",
     .m = 4,
     .n = 32000,
     .k = 2048,
     .out_fp32 = true,
     .readers = kBench},
    {.name = "qwen3_lm_head_m8",
     .m = 8,
     .n = 32000,
     .k = 2048,
     .out_fp32 = true,
     .readers = kNumerics | kBench},

    // Llama-3-8B / Qwen3-8B's linear layers (N x K: qkv 6144 x 4096, o 4096 x 4096, gate+up
    // 28672 x 4096, down 4096 x 14336), at m 1, 2, 4, 8: the benchmark's (the bench checks them
    // against torch before timing).
    {.name = "llama8b_qkv_m1", .m = 1, .n = 6144, .k = 4096, .readers = kBench},
    {.name = "llama8b_qkv_m2", .m = 2, .n = 6144, .k = 4096, .readers = kBench},
    {.name = "llama8b_qkv_m4", .m = 4, .n = 6144, .k = 4096, .readers = kBench},
    {.name = "llama8b_qkv_m8", .m = 8, .n = 6144, .k = 4096, .readers = kBench},
    {.name = "llama8b_o_m1", .m = 1, .n = 4096, .k = 4096, .readers = kBench},
    {.name = "llama8b_o_m2", .m = 2, .n = 4096, .k = 4096, .readers = kBench},
    {.name = "llama8b_o_m4", .m = 4, .n = 4096, .k = 4096, .readers = kBench},
    {.name = "llama8b_o_m8", .m = 8, .n = 4096, .k = 4096, .readers = kBench},
    {.name = "llama8b_gate_up_m1", .m = 1, .n = 28672, .k = 4096, .readers = kBench},
    {.name = "llama8b_gate_up_m2", .m = 2, .n = 28672, .k = 4096, .readers = kBench},
    {.name = "llama8b_gate_up_m4", .m = 4, .n = 28672, .k = 4096, .readers = kBench},
    {.name = "llama8b_gate_up_m8", .m = 8, .n = 28672, .k = 4096, .readers = kBench},
    {.name = "llama8b_down_m1", .m = 1, .n = 4096, .k = 14336, .readers = kBench},
    {.name = "llama8b_down_m2", .m = 2, .n = 4096, .k = 14336, .readers = kBench},
    {.name = "llama8b_down_m4", .m = 4, .n = 4096, .k = 14336, .readers = kBench},
    {.name = "llama8b_down_m8", .m = 8, .n = 4096, .k = 14336, .readers = kBench},
};

}  // namespace kiln::gemv::cases
