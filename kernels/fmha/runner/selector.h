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

inline constexpr const char kEntry[] = "kiln_fmha";         // the wgmma kernel
inline constexpr const char kMmaEntry[] = "kiln_fmha_mma";  // the mma kernel, prefill blocks
inline constexpr const char kMmaRows64Entry[] = "kiln_fmha_mma_rows64";  // <= 64 rows per head
inline constexpr int kWgmmaSm = 90;               // wgmma, setmaxnreg, TMA: sm_90a images only
inline constexpr unsigned kTensorAlignment = 16;  // TMA / cp.async global addresses; 16-byte rows
inline constexpr unsigned kIndexAlignment = 4;  // int32 cu_seqlens, seq_lens, page table; fp32 lse

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
// info->kernel says which kernel: wgmma reads tma_* and params, mma reads mma_params.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // batch == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;
  int tiles = 0;        // wgmma: m_blocks * q_heads * batch, the kernel's work items; mma: 0
  LaunchConfig launch;  // wgmma: grid (tiles) until persistentGrid(), block kThreads,
                        // sharedBytes(head_dim, causal); mma: grid (m_blocks, kv_heads, batch),
                        // block mma::threads(shape), mma::sharedBytes(head_dim, shape) for the
                        // entry's shape (mma::kSmall or mma::prefillShape(head_dim))
  // The maps run() encodes into params.tma_q / tma_k / tma_v (params.h describes them).
  TensorMapSpec tma_q;
  TensorMapSpec tma_k;
  TensorMapSpec tma_v;
  FmhaParams params{};  // every field but the three tensor maps, which stay zero
  FmhaMmaParams mma_params{};
};

// "full" / "causal"; nullptr for a value outside the enum (dtypes: kiln::dtypeName).
const char* maskName(Mask mask);
// "wgmma" / "mma"; nullptr outside the enum.
const char* kernelName(Kernel kernel);

// Admits `problem` against `table` and plans its launch. The checks, in order (the first failure
// is returned, its message naming the value and the limit):
//   dtype, mask and (paged) kv_layout are enum values; a variant of (head_dim, dtype, mask) is
//   built by either kernel                      (kInvalidArgument / kNotSupported naming the built)
//   the kernel: problem.kernel when set (not built, or wgmma for a problem it does not implement:
//   kNotSupported), else wgmma where it is built and implements the problem (contiguous K / V,
//   and with `device` an sm_90 device with its image), else mma; a problem only mma implements
//   without mma built is kNotSupported naming why ("fmha: page_table: paged K / V needs the mma
//   kernel; fmha_mma_d128_bf16_causal is not built (the wgmma kernel has no such mode)")
//   the variant has its entry (kiln_fmha; kiln_fmha_mma, and kiln_fmha_mma_rows64 where
//   max_seqlen_q x group <= 64 or the head dim's blocks have 4 warps anyway)   (kInternal)
//   batch >= 0; batch == 0: plan.no_op and nothing else is checked but the device
//   kv_heads >= 1, q_heads a positive multiple of kv_heads; total_q >= 1; contiguous: total_k
//   >= 1, paged: total_k == 0 and cu_seqlens_k null, page_size a power of two in 16..256,
//   max_pages_per_seq >= 1, num_pages >= 1, max_pages_per_seq * page_size <= 2^31 - 1;
//   max_seqlen_q in 0..total_q (0: total_q); scale finite and > 0; window_left >= -1 and -1 unless
//   causal                                                          (kInvalidArgument)
//   unless `pointers` is kSkip: q, k, v, out non-null and 16-byte aligned; cu_seqlens_q and
//   cu_seqlens_k (contiguous) or seq_lens_k and page_table (paged) non-null and 4-byte aligned;
//   lse null or 4-byte aligned
//   q_heads, batch <= 65535; wgmma: m_blocks * q_heads * batch <= 2^31 - 1 (the schedule's tile
//   index) and the tensor maps within the TMA unit's limits (kiln::checkTensorMap: row strides
//   < 2^40, ...; run only when pointers are checked, since the maps hold them); mma: total_q *
//   group size <= 2^31 - 1 (the packed rows)                         (kInvalidArgument)
//   last, `device` (when given) has an image of the chosen variant  (kNoKernelImage)
inline constexpr int kMaxHeads = 65535;
inline constexpr int kMaxBatch = 65535;
inline constexpr long long kMaxTiles = 2147483647;
inline constexpr int kMinPageSize = 16;  // decodeattn's page sizes: a 16-key tile never straddles
inline constexpr int kMaxPageSize = 256;
inline constexpr long long kMaxKeys = 2147483647;  // keys of a sequence, packed rows: int indices
Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers = PointerChecks::kCheck);

// The wgmma kernel is persistent: at most one block per SM (the block holds a whole SM's shared
// memory and registers), each walking tiles blockIdx.x, + gridDim.x, ... Sets plan->launch.grid
// to min(tiles, multiprocessors) blocks. The mma kernel's grid is its tiles: a no-op for it.
void persistentGrid(Plan* plan, int multiprocessors);

// The device step of select() alone: the image check's verdict on the planned variant, and for a
// wgmma variant on any SM but sm_90 a refusal that says why no rebuild of it helps
// ("fmha_wgmma_d128_bf16_full: artifact has sm_90a only; device is sm_87; the fmha wgmma kernel
// (TMA, wgmma) runs on sm_90 only").
Status checkDevice(const Plan& plan, const DeviceQuery& device);

// run()'s step once the stream's device is known: a plan made without a device that chose wgmma
// (not asked for) for a device wgmma cannot serve is planned again for it (mma, if built); any
// other plan gets checkDevice.
Status planForDevice(std::span<const VariantInfo> table, const Problem& problem,
                     const DeviceQuery& device, Plan* plan);

}  // namespace kiln::fmha
