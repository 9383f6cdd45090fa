// Programmatic dependent launch (PDL), the device half: a kernel launched with
// kiln::LaunchConfig::programmatic_dependency may become resident while the kernel before it on
// the stream still runs. That earlier (primary) kernel may release it early; the dependent kernel
// must wait before it reads what the primary writes. Both are griddepcontrol instructions of
// sm_90 and newer; compiled for an older target (or as compute_80 PTX) they are no-ops, which is
// right there, since the runtime launches without PDL below sm_90 and stream order alone holds.
#pragma once

namespace kiln::common {

// In the dependent kernel: blocks until every block of the primary grid has completed and its
// memory operations are visible (a no-op when the kernel was not launched as a dependent).
__device__ __forceinline__ void waitForPrimaryGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// In the primary kernel: lets the dependent grid be scheduled now rather than at this grid's end.
// It says nothing about this kernel's writes, which the dependent's waitForPrimaryGrid covers.
__device__ __forceinline__ void releaseDependentGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

}  // namespace kiln::common
