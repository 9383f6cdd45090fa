// The rmsnorm group's GPU problem cases, one list for both readers:
//   - the GPU numerics test (rmsnorm_numerics_test.cpp) checks every case marked kNumerics against
//     the float64 reference, on every variant whose hidden size the case takes, plain, fused and
//     plain in place;
//   - the benchmark (bench/rmsnorm_bridge.cpp exports the cases marked kBench, in this order, to
//     rmsnorm_vs_torch.py) times every case marked kBench against eager PyTorch.
// Plain constexpr data (no CUDA, no runtime), kept under tests/ so that editing a case never makes
// an artifact stale (tests/ and bench/ are no input of the artifact). tests/gpu/README.md has the
// convention.
#pragma once

#include <cstdint>

namespace kiln::rmsnorm::cases {

// Who reads a case: bits of Case::readers.
inline constexpr unsigned kNumerics = 1u << 0;  // checked against the float64 reference
inline constexpr unsigned kBench = 1u << 1;     // timed against the peer

struct Case {
  const char* name;
  std::int64_t rows;
  std::int64_t hidden;  // 0: every variant's hidden size; else the variant of that size only
  unsigned readers;
};

inline constexpr Case kCases[] = {
    // Batch shapes at every hidden size: single token, odd small batches, a partial block for
    // multi-row blocks (7, 33), a prefill chunk, and large odd / even counts that fill every SM
    // many times over.
    {"rows1", 1, 0, kNumerics},
    {"rows2", 2, 0, kNumerics},
    {"rows7", 7, 0, kNumerics},
    {"rows33", 33, 0, kNumerics},
    {"rows257", 257, 0, kNumerics},
    {"rows3001", 3001, 0, kNumerics},
    {"rows4096", 4096, 0, kNumerics},
    // The benchmark's: latency at 1 / 8 / 32 / 128 tokens of hidden 4096 (their input sets run
    // from L2, as inside a model), bandwidth at 4096 x 4096 and 16384 x 8192. The float64
    // reference of the largest is ~10^8 multiply-adds: every one is checked too.
    {"bench_1x4096", 1, 4096, kNumerics | kBench},
    {"bench_8x4096", 8, 4096, kNumerics | kBench},
    {"bench_32x4096", 32, 4096, kNumerics | kBench},
    {"bench_128x4096", 128, 4096, kNumerics | kBench},
    {"bench_4096x4096", 4096, 4096, kNumerics | kBench},
    {"bench_16384x8192", 16384, 8192, kNumerics | kBench},
};

}  // namespace kiln::rmsnorm::cases
