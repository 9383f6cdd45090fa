// The parameters of the w4a16 entry kernels, filled by the runner on the host and read by the
// kernels on the device. Plain C++ (no CUDA types) so that the host compiler that builds the runner
// and nvcc that builds the kernels agree on the layout; the asserts pin it.
//
// Tensors (README.md, "Layouts", has every byte):
//   x        [m, k] dtype, row-major
//   weight   kiln's packed int4 layout: [n / 16][k / 64][32 lanes][4 words], n * k / 2 bytes
//   scales   [k / group, n] dtype, the 16 rows of each tile in pair order (row r, then r + 8)
//   zeros    [k / group, n] dtype holding the integers 0..16, same order; null when symmetric
//   bias     [n] dtype or null
//   y        [m, n] dtype, row-major
//   partials [splits, m, n] fp32, in the caller's workspace when splits > 1
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::w4a16 {

struct GemmParams {
  const void* x;
  const void* weight;
  const void* scales;
  const void* zeros;
  const void* bias;
  void* y;
  float* partials;
  std::int64_t m;                 // >= 1 when launched
  std::int32_t n;                 // a multiple of the tile's n
  std::int32_t k;                 // a multiple of 64 and of the group size
  std::int32_t chunks_per_split;  // 64-wide K chunks each split (grid.z) reduces
  std::int32_t splits;            // grid.z; 1: the GEMM writes y itself, else partials + reduction
};

static_assert(std::is_standard_layout_v<GemmParams> && std::is_trivially_copyable_v<GemmParams>,
              "GemmParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(GemmParams) == 80 && offsetof(GemmParams, m) == 56 &&
                  offsetof(GemmParams, splits) == 76,
              "host and device must agree on the GemmParams layout");

// RepackParams::format: the checkpoint layout repack() reads (kiln::w4a16::SourceFormat of the
// runner's header has the same values; the selector asserts it). README.md, "Layouts".
inline constexpr std::int32_t kFormatGptq = 0;  // qweight [k / 8, n], qzeros [k / g, n / 8]: z - 1
inline constexpr std::int32_t kFormatAwq = 1;   // qweight [k, n / 8], qzeros [k / g, n / 8]: z

struct RepackParams {
  const std::int32_t* qweight;  // the checkpoint's packed weights
  const std::int32_t* qzeros;   // the checkpoint's packed zero points; null: no zeros written
  const void* src_scales;       // [k / group, n] of src_scales_bf16 ? bf16 : fp16
  std::uint32_t* weight;        // out: kiln's packed layout
  void* scales;                 // out: [k / group, n] dtype, pair order
  void* zeros;  // out: [k / group, n] dtype, pair order; written when qzeros != null
  std::int32_t n;
  std::int32_t k;
  std::int32_t group_size;
  std::int32_t format;           // kFormatGptq or kFormatAwq
  std::int32_t src_scales_bf16;  // 1: the checkpoint's scales are bf16, 0: fp16
  std::int32_t pad;
};

static_assert(std::is_standard_layout_v<RepackParams> && std::is_trivially_copyable_v<RepackParams>,
              "RepackParams is passed by value to cuLaunchKernel");
static_assert(sizeof(RepackParams) == 72 && offsetof(RepackParams, n) == 48,
              "host and device must agree on the RepackParams layout");

}  // namespace kiln::w4a16
