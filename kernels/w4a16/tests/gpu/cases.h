// The w4a16 group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (w4a16_numerics_test.cpp) checks every case marked kNumerics, in both
//     dtypes and both weight forms (symmetric GPTQ, zero-point AWQ / GPTQ), through repack() from
//     a checkpoint and run() against the float64 reference: every output when m * n * k is small
//     enough for the host, else kSampledOutputs outputs spread over the matrix;
//   - the benchmark (bench/w4a16_bridge.cpp exports the cases marked kBench, in this order, to
//     w4a16_vs_torch.py) times every case marked kBench against cuBLAS fp16, tinygemm and gemlite.
// The selector picks the tile by m (16: m <= 16; 64: m <= 64; 128 above), so the m values below
// reach every tile; `splits` 0 lets the selector plan K's split for the device, else fixes it.
// Plain constexpr data, kept under tests/ so that editing a case never makes an artifact stale.
#pragma once

#include <cstdint>

namespace kiln::w4a16::cases {

inline constexpr unsigned kNumerics = 1u << 0;  // checked against the float64 reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peers

// Outputs checked per case when the whole reference (m * n * k multiply-adds) would exceed
// kFullReferenceMacs on the host.
inline constexpr std::int64_t kFullReferenceMacs = 1LL << 30;
inline constexpr int kSampledOutputs = 4096;

struct Case {
  const char* name;
  std::int64_t m;
  std::int64_t n;
  std::int64_t k;
  bool bias;
  int splits;  // 0: planned by the selector
  unsigned readers;
};

inline constexpr Case kCases[] = {
    // M across every tile: 1, 2, 3 and 16 (GEMV tile), 17 and 64 (tile 64), 257, 1000, 5000
    // (tile 128); K from 128 to 16384 with the MLP widths of Llama-2-7B (11008), Qwen2.5-3B
    // (11008 / 2 = 5504) and Qwen2.5-1.5B-ish (2816); N multiples of the tile.
    {"m1_n256_k128", 1, 256, 128, false, 0, kNumerics},
    {"m1_n4096_k4096", 1, 4096, 4096, true, 0, kNumerics},
    {"m2_n512_k2816", 2, 512, 2816, true, 0, kNumerics},
    {"m3_n128_k5504", 3, 128, 5504, false, 0, kNumerics},
    {"m8_n1024_k11008_split1", 8, 1024, 11008, false, 1, kNumerics},
    {"m16_n1024_k11008", 16, 1024, 11008, true, 0, kNumerics},
    {"m16_n256_k16384_split7", 16, 256, 16384, false, 7, kNumerics},
    {"m17_n256_k16384", 17, 256, 16384, true, 0, kNumerics},
    {"m64_n512_k5504", 64, 512, 5504, false, 0, kNumerics},
    {"m65_n384_k2816", 65, 384, 2816, true, 0, kNumerics},
    {"m257_n384_k2816", 257, 384, 2816, true, 0, kNumerics},
    {"m1000_n256_k4096_split1", 1000, 256, 4096, false, 1, kNumerics},
    {"m5000_n128_k1024", 5000, 128, 1024, true, 0, kNumerics},
    {"m4096_n4096_k4096", 4096, 4096, 4096, false, 0, kNumerics},

    // The benchmark: the linear layers of Llama-3-8B / Qwen3-8B (N x K: qkv 6144 x 4096, o 4096 x
    // 4096, gate+up 28672 x 4096, down 4096 x 14336) at decode (1, 4, 16 tokens), small and large
    // prefill batches. Checked by the bench against cuBLAS on the same dequantized weights.
    {"bench_qkv_m1", 1, 6144, 4096, false, 0, kBench},
    {"bench_qkv_m4", 4, 6144, 4096, false, 0, kBench},
    {"bench_qkv_m16", 16, 6144, 4096, false, 0, kBench},
    {"bench_qkv_m64", 64, 6144, 4096, false, 0, kBench},
    {"bench_qkv_m256", 256, 6144, 4096, false, 0, kBench},
    {"bench_qkv_m1024", 1024, 6144, 4096, false, 0, kBench},
    {"bench_qkv_m4096", 4096, 6144, 4096, false, 0, kBench},
    {"bench_o_m1", 1, 4096, 4096, false, 0, kBench},
    {"bench_o_m4", 4, 4096, 4096, false, 0, kBench},
    {"bench_o_m16", 16, 4096, 4096, false, 0, kBench},
    {"bench_o_m64", 64, 4096, 4096, false, 0, kBench},
    {"bench_o_m256", 256, 4096, 4096, false, 0, kBench},
    {"bench_o_m1024", 1024, 4096, 4096, false, 0, kBench},
    {"bench_o_m4096", 4096, 4096, 4096, false, 0, kBench},
    {"bench_gateup_m1", 1, 28672, 4096, false, 0, kBench},
    {"bench_gateup_m4", 4, 28672, 4096, false, 0, kBench},
    {"bench_gateup_m16", 16, 28672, 4096, false, 0, kBench},
    {"bench_gateup_m64", 64, 28672, 4096, false, 0, kBench},
    {"bench_gateup_m256", 256, 28672, 4096, false, 0, kBench},
    {"bench_gateup_m1024", 1024, 28672, 4096, false, 0, kBench},
    {"bench_gateup_m4096", 4096, 28672, 4096, false, 0, kBench},
    {"bench_down_m1", 1, 4096, 14336, false, 0, kBench},
    {"bench_down_m4", 4, 4096, 14336, false, 0, kBench},
    {"bench_down_m16", 16, 4096, 14336, false, 0, kBench},
    {"bench_down_m64", 64, 4096, 14336, false, 0, kBench},
    {"bench_down_m256", 256, 4096, 14336, false, 0, kBench},
    {"bench_down_m1024", 1024, 4096, 14336, false, 0, kBench},
    {"bench_down_m4096", 4096, 4096, 14336, false, 0, kBench},
};

}  // namespace kiln::w4a16::cases
