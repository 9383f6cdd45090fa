// Warp-level tensor-core and asynchronous-copy primitives of sm_80 and every later SM (mma.sync,
// ldmatrix, cp.async): the portable path for kernels that one source must serve from Ampere to
// Blackwell, where wgmma / tcgen05 would need an arch-specific (`a`) target. Thin wrappers over the
// PTX instructions, so that a kernel reads as fragments and stages rather than as inline asm.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16"): lane = 4 * group + tid4.
//   A (16x16, row-major): reg0 = (row group,     cols 2*tid4 + {0,1}), reg1 = (row group + 8,
//   same),
//                         reg2 = (row group, cols 8 + 2*tid4 + {0,1}), reg3 = (row group + 8, same)
//   B (16x8, "col"):      reg0 = (rows 2*tid4 + {0,1}, col group), reg1 = (rows 8 + 2*tid4 + {0,1})
//   C (16x8, fp32):       c0, c1 = (row group, cols 2*tid4 + {0,1}); c2, c3 = (row group + 8, same)
// Each 32-bit register holds two 16-bit elements, the lower column (or row, for B) in the low half.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

namespace kiln::common {

// The 32-bit shared-state-space address of a pointer into shared memory.
__device__ __forceinline__ unsigned sharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, asynchronously, bypassing L1 (cp.async.cg). When `valid` is false
// nothing is read from `src` (it must still be a valid address expression) and the 16 bytes of
// shared memory are zero-filled: masked rows become zeros, never whatever memory held.
__device__ __forceinline__ void cpAsync16(unsigned dst_shared, const void* src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst_shared), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most kPending of this thread's committed groups are still in flight. The data of
// other lanes is visible only after a barrier (__syncwarp / __syncthreads) that follows.
template <int kPending>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 matrices of 16-bit elements from shared memory: lanes 8i..8i+7 give the row addresses
// (16 bytes each) of matrix i; register i receives matrix i in the A/B fragment order above.
__device__ __forceinline__ void ldmatrixX4(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// The same, each matrix transposed: lane (4 * group + tid4) receives the stored elements
// (rows 2*tid4 + {0,1}, column group) of each matrix.
__device__ __forceinline__ void ldmatrixX4Trans(unsigned (&r)[4], unsigned address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// c += a * b for one m16n8k16 tile, fp32 accumulation, T = __half or __nv_bfloat16.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>,
                "mma16816: fp16 or bf16 inputs only");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// 2^x with the SFU's approximation (ex2.approx.ftz: ~2 ulp, 2^-inf = +0): the exponential of an
// online softmax kept in the log2 domain.
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace kiln::common
