// The fmha selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant, grid, parameters and tensor maps does run() use?", so they
// cannot disagree. Pure logic over a table of variants: no generated header, no driver call, so
// it is unit-tested on the host with a fake table and a fake image check. runner.cpp feeds it the
// artifact's table and the stream's device, and encodes the tensor maps it describes.
#pragma once

#include <span>

#include "fmha/params.h"
#include "kiln/runner_support.h"
#include "kiln/runners/fmha.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::fmha {

inline constexpr const char kEntry[] = "kiln_fmha";
inline constexpr unsigned kTensorAlignment = 16;  // TMA global addresses; 16-byte stores of out
inline constexpr unsigned kIndexAlignment = 4;    // int32 cu_seqlens, fp32 lse

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // batch == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;
  int tiles = 0;        // m_blocks * q_heads * batch: the kernel's work items
  LaunchConfig launch;  // grid (tiles) until persistentGrid(), block kThreads,
                        // sharedBytes(head_dim, causal)
  // The maps run() encodes into params.tma_q / tma_k / tma_v (params.h describes them).
  TensorMapSpec tma_q;
  TensorMapSpec tma_k;
  TensorMapSpec tma_v;
  FmhaParams params{};  // every field but the three tensor maps, which stay zero
};

// "full" / "causal"; nullptr for a value outside the enum (dtypes: kiln::dtypeName).
const char* maskName(Mask mask);

// Admits `problem` against `table` and plans its launch. The checks, in order (the first failure
// is returned, its message naming the value and the limit):
//   dtype and mask are enum values; a variant of (head_dim, dtype, mask) is built
//                                               (kInvalidArgument / kNotSupported naming the built)
//   the variant has entry kiln_fmha                                 (kInternal)
//   batch >= 0; batch == 0: plan.no_op and nothing else is checked but the device
//   kv_heads >= 1, q_heads a positive multiple of kv_heads; total_q, total_k >= 1;
//   max_seqlen_q in 0..total_q (0: total_q); scale finite and > 0   (kInvalidArgument)
//   unless `pointers` is kSkip: q, k, v, out non-null and 16-byte aligned; cu_seqlens_q,
//   cu_seqlens_k non-null and 4-byte aligned; lse null or 4-byte aligned
//   q_heads, batch <= 65535; m_blocks * q_heads * batch <= 2^31 - 1 (the schedule's tile index);
//   the tensor maps within the TMA unit's limits
//   (kiln::checkTensorMap: row strides < 2^40, ...; run only when pointers are checked, since
//   the maps hold them)                                             (kInvalidArgument)
//   last, `device` (when given) is an sm_90 device with an image of the variant (kNoKernelImage)
inline constexpr int kMaxHeads = 65535;
inline constexpr int kMaxBatch = 65535;
inline constexpr long long kMaxTiles = 2147483647;
Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers = PointerChecks::kCheck);

// The kernel is persistent: at most one block per SM (the block holds a whole SM's shared memory
// and registers), each walking tiles blockIdx.x, + gridDim.x, ... Sets plan->launch.grid to
// min(tiles, multiprocessors) blocks.
void persistentGrid(Plan* plan, int multiprocessors);

// The device step of select() alone: the image check's verdict, and on any SM but sm_90 a refusal
// that says why no rebuild helps ("fmha_wgmma_d128_bf16_full: artifact has sm_90a only; device is
// sm_87; the fmha kernels (wgmma, TMA) run on sm_90 only").
Status checkDevice(const Plan& plan, const DeviceQuery& device);

}  // namespace kiln::fmha
