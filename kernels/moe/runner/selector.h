// The moe selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant, which launches, which workspace?" (run), so the two cannot
// disagree. Pure logic over a table of variants: no generated header, no driver call, so it is
// unit-tested on the host with a fake table and a fake image check.
#pragma once

#include <cstddef>
#include <span>

#include "kiln/runner_support.h"
#include "kiln/runners/moe.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"
#include "moe/launch.h"
#include "moe/params.h"

namespace kiln::moe {

inline constexpr const char* kEntries[] = {"kiln_moe_route", "kiln_moe_align", "kiln_moe_fc1",
                                           "kiln_moe_fc2", "kiln_moe_finalize"};
inline constexpr int kSteps = 5;                    // kEntries[i] runs Step bit 1 << i
inline constexpr unsigned kRequiredAlignment = 16;  // cp.async and the finalize's 16-byte accesses
inline constexpr long long kMaxRows = 1LL << 26;    // T * k: int32 slots and row offsets
inline constexpr long long kMaxDimension = 1LL << 20;  // H and I
inline constexpr long long kMaxGridYZ = 65535;         // CUDA's limit for grid.y

using runner::DeviceQuery;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;  // tokens == 0
  WorkspaceLayout layout;
  std::size_t workspace_bytes = 0;  // layout.bytes
  unsigned steps = 0;
  int entries[kSteps] = {-1, -1, -1, -1, -1};
  LaunchConfig launches[kSteps];
  MoeParams params{};  // the workspace pointers are filled by bindWorkspace()
};

// The workspace of `problem`'s shapes (no checks: select() admits them first).
WorkspaceLayout layoutFor(const Problem& problem);

// Admits `problem` against `table` and plans its launches. The checks, in order (the first
// failure is returned, its message naming the value and the limit):
//   dtype known and built                                          (kInvalidArgument/kNotSupported)
//   steps a non-empty contiguous run of Step bits; tokens >= 0; experts 1..512; top_k 1..16 and
//   <= experts; tokens * top_k <= 2^26; hidden a positive multiple of 32, intermediate of 64, both
//   <= 2^20; the GEMM grids within CUDA's limits                    (kInvalidArgument)
//   the variant has its entries                                    (kInternal)
//   tokens == 0: no_op, and the pointer checks are skipped
//   the pointers the steps use non-null and aligned (unless `pointers` is kSkip)
//   last, `device` (when given) has an image of the variant        (the check's status)
Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers = PointerChecks::kCheck);

// kInvalidArgument when `workspace` is null, misaligned or smaller than plan.workspace_bytes
// (naming both sizes); else points the plan's params at the intermediates in it.
Status bindWorkspace(Plan* plan, void* workspace, std::size_t workspace_bytes);

}  // namespace kiln::moe
