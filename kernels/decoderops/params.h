// The parameters of the three decoderops entry kernels, one struct each, filled by the runner on
// the host and read by the kernels on the device (each entry takes its struct by value). Plain C++
// (no CUDA types) so that the host compiler that builds the runner and nvcc that builds the kernels
// agree on the layouts; the asserts pin them.
//
// Layouts (row-major, contiguous; "dtype" is the variant's fp16 / bf16 / fp32, elt its bytes):
//   kiln_embed     ids [tokens] int32, table [rows, width] dtype, out [tokens, width] dtype
//   kiln_silu_mul  in [tokens, 2 * width] dtype (gate then up), out [tokens, width] dtype
//   kiln_argmax    x [rows, width] dtype, out [rows] int32
// A "vector" is 16 bytes: 8 fp16 / bf16 or 4 fp32 elements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::decoderops {

struct EmbedParams {
  void* out;                 // [tokens, width]; 16-byte aligned
  const void* table;         // [rows, width]; 16-byte aligned
  const std::int32_t* ids;   // [tokens]; 4-byte aligned
  std::int64_t rows;         // ids in [0, rows) are read; any other id writes a zero row
  std::int32_t row_vectors;  // vectors per row: width * elt / 16
  std::int32_t chunks;       // chunks of kChunkVectors per row (launch.h); grid.y may be fewer
};

struct SiluMulParams {
  void* out;                 // [tokens, width]; 16-byte aligned
  const void* in;            // [tokens, 2 * width]; 16-byte aligned
  std::int32_t row_vectors;  // vectors per output row: width * elt / 16 (an input row has twice)
  std::int32_t chunks;       // chunks of kChunkVectors per output row; grid.y may be fewer
};

struct ArgmaxParams {
  std::int32_t* out;  // [rows]; 4-byte aligned
  const void* x;      // [rows, width]; element aligned (16-byte aligned when width * elt % 16 == 0)
  std::int32_t width;  // 1..2^31 - 1: every index fits int32 (kNoIndex = 2^31 - 1 is none)
  std::int32_t reserved;
};

static_assert(std::is_standard_layout_v<EmbedParams> && std::is_trivially_copyable_v<EmbedParams>,
              "EmbedParams is passed by value to cuLaunchKernel");
static_assert(std::is_standard_layout_v<SiluMulParams> &&
                  std::is_trivially_copyable_v<SiluMulParams>,
              "SiluMulParams is passed by value to cuLaunchKernel");
static_assert(std::is_standard_layout_v<ArgmaxParams> && std::is_trivially_copyable_v<ArgmaxParams>,
              "ArgmaxParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(EmbedParams) == 40 &&
                  offsetof(EmbedParams, rows) == 24 && offsetof(EmbedParams, row_vectors) == 32 &&
                  offsetof(EmbedParams, chunks) == 36,
              "host and device must agree on the EmbedParams layout");
static_assert(sizeof(SiluMulParams) == 24 && offsetof(SiluMulParams, row_vectors) == 16 &&
                  offsetof(SiluMulParams, chunks) == 20,
              "host and device must agree on the SiluMulParams layout");
static_assert(sizeof(ArgmaxParams) == 24 && offsetof(ArgmaxParams, width) == 16,
              "host and device must agree on the ArgmaxParams layout");

}  // namespace kiln::decoderops
