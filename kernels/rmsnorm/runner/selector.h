// The rmsnorm selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant, entry and launch run it?" (run), so the two cannot disagree.
// Pure logic over a table of variants: no generated header, no driver call, so it is unit-tested
// on the host with a fake table and a fake image check. runner.cpp feeds it the artifact's table.
#pragma once

#include <span>

#include "kiln/runner_support.h"
#include "kiln/runners/rmsnorm.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"
#include "rmsnorm/params.h"

namespace kiln::rmsnorm {

inline constexpr const char kPlainEntry[] = "kiln_rmsnorm";
inline constexpr const char kFusedEntry[] = "kiln_add_rmsnorm";
inline constexpr unsigned kRequiredAlignment = 16;  // the kernel's 16-byte vector accesses

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // rows == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;                   // index into variant->entries of kPlainEntry / kFusedEntry
  LaunchConfig config;              // programmatic_dependency: the problem's overlap_launch
  RmsnormParams params{};
};

// Admits `problem` against `table` and plans its launch. The checks, in order (the first failure
// is returned, its message naming the value and the limit):
//   dtype is a known value and built; hidden is built for it       (kInvalidArgument/kNotSupported)
//   rows >= 0, eps finite and > 0                                   (kInvalidArgument)
//   the variant has the entry the op needs                          (kInternal)
//   rows == 0: plan.no_op, and the pointer and grid checks are skipped (an empty tensor may
//              have a null pointer)
//   out, x, weight non-null; out, x, residual, weight 16-byte aligned (kInvalidArgument)
//   the grid fits (rows <= 2^31 - 1 blocks' worth)                  (kInvalidArgument)
//   last, `device` (when given) has an image of the variant         (the check's status)
// So select(device) equals select(nullptr) followed by checkDevice(). run() selects on the host
// and leaves the device step to kiln::launch, which applies the same selectImage to the stream's
// device; for a no-op (rows == 0) it launches nothing and touches neither device nor stream.
Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan);

// The device step of select() alone, for a plan already admitted on the host.
Status checkDevice(const Plan& plan, const DeviceQuery& device);

}  // namespace kiln::rmsnorm
