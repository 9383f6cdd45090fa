// The rmsnorm launch shape, derived from the baked hidden size and the element size alone. The
// kernel evaluates it at compile time (block size, unroll counts, __launch_bounds__) and the runner
// at run time from the generated variant table (grid and block): one function, so the two can never
// disagree and no number is typed twice.
//
// A row is split into 16-byte vectors; each thread of a row keeps kVectorsPerThread of them in
// registers (loads, reduction, scale and store without re-reading memory). Threads of a row are a
// whole number of warps; a row that needs a single warp shares its block with other rows.
#pragma once

#include "common/host_device.h"

namespace kiln::rmsnorm {

inline constexpr int kVectorBytes = 16;  // one LDG.E.128 / STG.E.128 per vector
inline constexpr int kWarp = 32;
inline constexpr int kMaxBlockThreads = 1024;

// Tuning (H200 design estimate, to be replaced by measured numbers in kernels/rmsnorm/NOTES.md):
// 4 vectors (64 bytes of each tensor) per thread keeps >= 64 KiB of loads in flight per SM at half
// occupancy, above the ~30 KiB per SM that Little's law asks of H200 HBM (4.8 TB/s x ~800 ns over
// 132 SMs), while x, residual and weight of one thread stay in 48 registers. The search takes the
// smallest count >= 4 that splits a row into whole warps (2560 -> 5), then smaller counts for rows
// too short for 4 (hidden 256 bf16 -> 1).
inline constexpr int kPreferredVectorsPerThread = 4;
inline constexpr int kMaxVectorsPerThread = 16;
// Rows shorter than this many threads share a block, so that a block is at least 4 warps: one-warp
// blocks would hit the per-SM block limit (16 on sm_86/87, 24 on sm_89, 32 on sm_80/90) well before
// the thread limit and cap occupancy at 25-50%.
inline constexpr int kTargetBlockThreads = 128;

struct LaunchShape {
  bool valid = false;          // false: hidden * element_bytes does not split into whole warps
  int vectors_per_row = 0;     // hidden * element_bytes / 16
  int vectors_per_thread = 0;  // registers hold this many vectors of each tensor per thread
  int threads_per_row = 0;     // a multiple of 32
  int warps_per_row = 0;
  int rows_per_block = 0;     // > 1 when a row takes fewer than 128 threads, a divisor of 128
  int threads_per_block = 0;  // rows_per_block * threads_per_row, a multiple of 32, <= 1024
};

KILN_HOST_DEVICE constexpr LaunchShape makeShape(int vectors_per_row, int vectors_per_thread) {
  LaunchShape s;
  s.vectors_per_row = vectors_per_row;
  s.vectors_per_thread = vectors_per_thread;
  s.threads_per_row = vectors_per_row / vectors_per_thread;
  s.warps_per_row = s.threads_per_row / kWarp;
  s.rows_per_block =
      (s.threads_per_row < kTargetBlockThreads && kTargetBlockThreads % s.threads_per_row == 0)
          ? kTargetBlockThreads / s.threads_per_row
          : 1;
  s.threads_per_block = s.rows_per_block * s.threads_per_row;
  s.valid = true;
  return s;
}

KILN_HOST_DEVICE constexpr bool splitsIntoWarps(int vectors_per_row, int vectors_per_thread) {
  if (vectors_per_row % vectors_per_thread != 0) return false;
  const int threads = vectors_per_row / vectors_per_thread;
  return threads % kWarp == 0 && threads <= kMaxBlockThreads;
}

// The launch shape for rows of `hidden` elements of `element_bytes` bytes (2 for fp16 / bf16).
KILN_HOST_DEVICE constexpr LaunchShape launchShape(int hidden, int element_bytes) {
  if (hidden <= 0 || element_bytes <= 0 || hidden > (1 << 24)) return LaunchShape{};
  const int row_bytes = hidden * element_bytes;
  if (row_bytes % kVectorBytes != 0) return LaunchShape{};
  const int vectors = row_bytes / kVectorBytes;
  for (int v = kPreferredVectorsPerThread; v <= kMaxVectorsPerThread; ++v) {
    if (splitsIntoWarps(vectors, v)) return makeShape(vectors, v);
  }
  for (int v = kPreferredVectorsPerThread - 1; v >= 1; --v) {
    if (splitsIntoWarps(vectors, v)) return makeShape(vectors, v);
  }
  return LaunchShape{};
}

// Blocks for `rows` rows: one block per rows_per_block rows, the last one possibly partial.
// (Divides first, so that no rows value overflows.)
KILN_HOST_DEVICE constexpr long long blocksForRows(long long rows, const LaunchShape& s) {
  return rows / s.rows_per_block + (rows % s.rows_per_block != 0 ? 1 : 0);
}

// The largest grid.x a launch may have (CUDA's limit for the x dimension, every SM >= 3.0).
inline constexpr long long kMaxGridX = 2147483647LL;

}  // namespace kiln::rmsnorm
