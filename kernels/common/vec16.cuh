// 16-byte global memory accesses: the widest a thread issues in one instruction (LDG.E.128 /
// STG.E.128), which memory-bound kernels need to reach HBM bandwidth with few instructions.
// The intrinsics name the state space explicitly (ld.global.*), so the compiler never falls back
// to generic loads when it cannot prove a pointer is global. Callers guarantee 16-byte alignment.
#pragma once

#include <cuda_runtime.h>

namespace kiln::common {

// Eight 16-bit elements (or four 32-bit ones), in memory order: the low half of .x is element 0.
using Vec16 = uint4;

// Data read once (activations): evict-first in L1 and L2 (ld.global.cs).
__device__ __forceinline__ Vec16 loadStreaming(const Vec16* p) {
  return __ldcs(p);
}

// Read-only data reused by many blocks (weights): the non-coherent read-only path (ld.global.nc).
// Only for memory that no thread writes while the kernel runs.
__device__ __forceinline__ Vec16 loadReadOnly(const Vec16* p) {
  return __ldg(p);
}

// A plain weak global store (st.global, STG.E.128): default caching, since the next kernel usually
// reads the result from L2. Not __stwb: its explicit .wb becomes a strong store
// (STG.E.128.STRONG.SM) in ptxas' output, an ordering guarantee this data does not need.
__device__ __forceinline__ void store(Vec16* p, const Vec16& v) {
  asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

}  // namespace kiln::common
