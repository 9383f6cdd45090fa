// Conversions between packed 16-bit floats (fp16 / bf16, eight to a Vec16) and fp32, for kernels
// that load and store 16-bit data and compute in fp32. Every fp32 -> 16-bit conversion rounds to
// nearest even (the _rn intrinsics), so results match a host reference that rounds the same way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "common/vec16.cuh"

namespace kiln::common {

template <typename T>
inline constexpr bool kIsHalf16 = std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

// Two 16-bit values packed in a 32-bit word (element 0 in the low half) -> two floats.
template <typename T>
__device__ __forceinline__ float2 unpack2(unsigned word) {
  static_assert(kIsHalf16<T>, "unpack2: fp16 or bf16 only");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    // bf16 is the high half of an fp32: widening is a shift, exact.
    return make_float2(__uint_as_float(word << 16), __uint_as_float(word & 0xffff0000u));
  } else {
    const __half2 h = __halves2half2(__ushort_as_half(static_cast<unsigned short>(word & 0xffffu)),
                                     __ushort_as_half(static_cast<unsigned short>(word >> 16)));
    return __half22float2(h);
  }
}

// Two floats -> two 16-bit values rounded to nearest even, packed as unpack2 reads them.
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi) {
  static_assert(kIsHalf16<T>, "pack2: fp16 or bf16 only");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return static_cast<unsigned>(__bfloat16_as_ushort(h.x)) |
           (static_cast<unsigned>(__bfloat16_as_ushort(h.y)) << 16);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    return static_cast<unsigned>(__half_as_ushort(__low2half(h))) |
           (static_cast<unsigned>(__half_as_ushort(__high2half(h))) << 16);
  }
}

// A Vec16 of eight 16-bit values -> eight floats (f[i] is element i in memory order).
template <typename T>
__device__ __forceinline__ void unpack8(const Vec16& v, float (&f)[8]) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 pair = unpack2<T>(words[i]);
    f[2 * i] = pair.x;
    f[2 * i + 1] = pair.y;
  }
}

// Eight floats -> a Vec16 of eight 16-bit values, each rounded once to nearest even.
template <typename T>
__device__ __forceinline__ Vec16 pack8(const float (&f)[8]) {
  Vec16 v;
  v.x = pack2<T>(f[0], f[1]);
  v.y = pack2<T>(f[2], f[3]);
  v.z = pack2<T>(f[4], f[5]);
  v.w = pack2<T>(f[6], f[7]);
  return v;
}

// One 16-bit value <-> fp32 (rounded to nearest even).
template <typename T>
__device__ __forceinline__ float toFloat(T v) {
  static_assert(kIsHalf16<T>, "toFloat: fp16 or bf16 only");
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else {
    return __bfloat162float(v);
  }
}
template <typename T>
__device__ __forceinline__ T fromFloat(float v) {
  static_assert(kIsHalf16<T>, "fromFloat: fp16 or bf16 only");
  if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

}  // namespace kiln::common
