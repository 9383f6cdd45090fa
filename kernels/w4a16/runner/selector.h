// The w4a16 selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant, which tile, how many splits, which launches?" (run), so the
// two cannot disagree. Pure logic over a table of variants: no generated header, no driver call,
// so it is unit-tested on the host with a fake table and a fake image check.
#pragma once

#include <cstddef>
#include <span>

#include "kiln/runner_support.h"
#include "kiln/runners/w4a16.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"
#include "w4a16/launch.h"
#include "w4a16/params.h"

namespace kiln::w4a16 {

inline constexpr const char kGemmEntry[] = "kiln_w4a16_gemm";
inline constexpr const char kReduceEntry[] = "kiln_w4a16_reduce";
inline constexpr const char kRepackWeightsEntry[] = "kiln_w4a16_repack_weights";
inline constexpr const char kRepackScalesEntry[] = "kiln_w4a16_repack_scales";
inline constexpr unsigned kRequiredAlignment = 16;  // cp.async and the reduction's 16-byte stores
inline constexpr long long kMaxGridX = 2147483647;  // CUDA's limit for grid.x
inline constexpr long long kMaxGridYZ = 65535;      // CUDA's limit for grid.y and grid.z
inline constexpr long long kMaxDimension = 1LL << 30;  // n and k: int32 indices with room

using runner::DeviceQuery;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // m == 0
  std::size_t workspace_bytes = 0;  // splits * m * n * 4 when K is split, else 0
  int gemm_entry = -1;
  int reduce_entry = -1;
  TileConfig tile;
  SplitPlan split;
  LaunchConfig gemm;
  LaunchConfig reduce;  // launched only when split.splits > 1, as a programmatic dependent
  GemmParams params{};
};

// Admits `problem` against `table` and plans its launches for `multiprocessors` SMs (> 0). The
// checks, in order (the first failure is returned, its message naming the value and the limit):
//   dtype known and built; group_size built for it; the zero-point form built for both
//                                                                  (kInvalidArgument/kNotSupported)
//   m >= 0; k > 0, a multiple of 64 and of group_size; n > 0 and a multiple of the chosen tile's
//   tile_n; m's blocks within grid.y; splits 0..32                 (kInvalidArgument)
//   the variant has its entries                                    (kInternal)
//   m == 0: no_op, and the pointer checks are skipped
//   x, weight, scales, y non-null, every pointer 16-byte aligned (unless `pointers` is kSkip)
//   last, `device` (when given) has an image of the variant        (the check's status)
// The tile is the smallest built tile_m >= m (8 and 16: the GEMV kernel), else the largest built.
Status select(std::span<const VariantInfo> table, const Problem& problem, int multiprocessors,
              const DeviceQuery* device, Plan* plan,
              PointerChecks pointers = PointerChecks::kCheck);

// The device step of select() alone, for a plan already admitted on the host.
Status checkDevice(const Plan& plan, const DeviceQuery& device);

// kInvalidArgument when the plan needs a workspace and `workspace` is null, misaligned, or
// smaller than plan.workspace_bytes (naming both sizes).
Status checkWorkspace(const Plan& plan, const void* workspace, std::size_t workspace_bytes);

struct RepackPlan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // n == 0
  std::size_t workspace_bytes = 0;  // none
  int weights_entry = -1;
  int scales_entry = -1;
  LaunchConfig weights;
  LaunchConfig scales;
  RepackParams params{};
};

// Admits a repack: format and dtypes known, a variant of the dtype and group size is built (any
// tile or zero-point form carries the repack kernels), n and k as select() admits them, qweight,
// src_scales, weight and scales non-null and 16-byte aligned, zeros non-null with qzeros.
Status selectRepack(std::span<const VariantInfo> table, const RepackProblem& problem,
                    const DeviceQuery* device, RepackPlan* plan,
                    PointerChecks pointers = PointerChecks::kCheck);

}  // namespace kiln::w4a16
