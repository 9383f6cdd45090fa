// The rmsnorm runner: plain RMSNorm and fused residual add + RMSNorm on the caller's stream.
//
//   plain (residual == nullptr):  out = x * rsqrt(mean(x^2) + eps) * weight
//   fused (residual != nullptr):  residual += x (rounded to the dtype, stored in place);
//                                 out = residual * rsqrt(mean(residual^2) + eps) * weight
//
// All tensors are contiguous, row-major, of the problem's dtype, with fp32 accumulation inside;
// each stored value is rounded once to nearest even (the fused op normalizes the rounded residual).
// The hidden size is baked per variant; rows and eps are run-time values. The kernels, variants
// and limits are described in kernels/rmsnorm/README.md.
//
// One selector (kernels/rmsnorm/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::rmsnorm {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/rmsnorm.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "rmsnorm_h4096_bf16"
  int hidden;                        // baked hidden size
  DType dtype;                       // baked dtype
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct Problem {
  DType dtype = DType::kBFloat16;
  std::int64_t rows = 0;    // 0 is a no-op: pointers are not checked and nothing is touched
  std::int64_t hidden = 0;  // must be one of the artifact's baked sizes
  float eps = 1e-6f;
  void* out = nullptr;           // [rows, hidden]; may equal x (in place)
  const void* x = nullptr;       // [rows, hidden]
  void* residual = nullptr;      // [rows, hidden], updated in place; nullptr selects plain RMSNorm
  const void* weight = nullptr;  // [hidden]
  // Programmatic dependent launch (kiln::LaunchConfig::programmatic_dependency). On sm_90 and
  // newer the kernel may become resident while the kernel before it on the stream still runs (as
  // soon as that kernel completes or releases its dependents, griddepcontrol.launch_dependents),
  // hiding its launch latency behind that kernel's tail. Its first act is to wait
  // (griddepcontrol.wait: the kernel before complete, its writes visible), before it reads or
  // writes any global memory, so every input (x, residual, weight) may be written, and out read
  // or written, by the kernel before. Whatever overlap_launch is, the kernel releases its own
  // dependents right after its wait: a kernel launched after it as a programmatic dependent runs
  // beside it and must wait before it reads out or residual or writes x, residual, weight or out.
  // Below sm_90 (an image compiled below sm_90, or a driver without cuLaunchKernelEx) the launch
  // is an ordinary one; the results are the same either way.
  bool overlap_launch = false;
};

// Host-side admission: a variant for (hidden, dtype) is in the artifact (else kNotSupported,
// "rmsnorm: hidden 4000 is not built for bf16; built for bf16: 1024, ..."), pointers are non-null
// and 16-byte aligned ("rmsnorm: pointer x (0x...) is not 16-byte aligned"), rows >= 0 and eps
// finite and > 0 (else kInvalidArgument). Names the value and the limit on failure.
Status canImplement(const Problem& problem);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs (0 for this group; the contract is uniform across groups).
std::size_t workspaceSize(const Problem& problem);
// Admits and launches on `stream`; the device is the one that owns the stream (its SM picks the
// image). The workspace is unused (may be null). rows == 0 returns ok without touching the device.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::rmsnorm
