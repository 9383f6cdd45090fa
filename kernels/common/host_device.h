// KILN_HOST_DEVICE: marks the small constexpr helpers that both a kernel (compiled by nvcc) and a
// runner (compiled by the plain host compiler, which has no __host__/__device__) evaluate, so a
// launch shape is computed by one function on both sides and never typed twice.
#pragma once

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
