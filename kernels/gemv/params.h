// The parameters of the gemv entry kernels, one struct filled by the runner on the host and read
// by the kernels on the device (each entry takes it by value). Plain C++ (no CUDA types) so that
// the host compiler that builds the runner and nvcc that builds the kernels agree on the layout;
// the asserts pin it.
//
// Layouts (row-major; "dtype" is the variant's fp16 / bf16):
//   x     [m, ldx] dtype, the first k elements of each row read; rows 16-byte aligned
//   w     [n, k] dtype, contiguous (a PyTorch Linear weight); 16-byte aligned
//   bias  [n] dtype, or null
//   y     [m, ldy] dtype or float32 (y_fp32), the first n elements of each row written
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::gemv {

struct GemvParams {
  void* y;
  const void* x;
  const void* w;
  const void* bias;        // null: no bias
  std::int64_t ldx;        // elements between rows of x; a multiple of 8, >= k
  std::int64_t ldy;        // elements between rows of y; >= n
  std::int32_t m;          // rows of x and y: 1 .. the entry's bucket (launch.h)
  std::int32_t n;          // rows of w, columns of y
  std::int32_t k_vectors;  // k / 8: 16-byte vectors per row of w
  std::int32_t y_fp32;     // 1: y is float32; 0: y is the variant's dtype
};

static_assert(std::is_standard_layout_v<GemvParams> && std::is_trivially_copyable_v<GemvParams>,
              "GemvParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(GemvParams) == 64 && offsetof(GemvParams, ldx) == 32 &&
                  offsetof(GemvParams, m) == 48 && offsetof(GemvParams, y_fp32) == 60,
              "host and device must agree on the GemvParams layout");

}  // namespace kiln::gemv
