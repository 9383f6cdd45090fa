// RmsnormParams: the one argument of both rmsnorm entry kernels, filled by the runner on the host
// and read by the kernel on the device. Plain C++ (no CUDA types) so the host compiler that builds
// the runner and nvcc that builds the kernel agree on its layout; the asserts pin that layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::rmsnorm {

struct RmsnormParams {
  void* out;           // [rows, hidden] dtype; may equal x (in place)
  const void* x;       // [rows, hidden] dtype
  void* residual;      // [rows, hidden] dtype, updated in place (kiln_add_rmsnorm only)
  const void* weight;  // [hidden] dtype
  std::int64_t rows;   // >= 1 when launched
  float eps;           // finite, > 0
};

static_assert(std::is_standard_layout_v<RmsnormParams> &&
                  std::is_trivially_copyable_v<RmsnormParams>,
              "RmsnormParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(RmsnormParams) == 48 &&
                  offsetof(RmsnormParams, rows) == 32 && offsetof(RmsnormParams, eps) == 40,
              "host and device must agree on the RmsnormParams layout");

}  // namespace kiln::rmsnorm
