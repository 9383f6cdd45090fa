// The fmha launch shape, from the baked head dim alone: tile sizes, warpgroup roles, pipeline
// depth and dynamic shared memory. The kernel evaluates it at compile time (shared-memory
// carve-up, TMA boxes, __launch_bounds__) and the runner at run time (grid, block, shared bytes,
// the TMA boxes it encodes), so the two never disagree and no number is typed twice.
//
// Work decomposition of the wgmma kernel (kernels/fmha/README.md, "Design of the wgmma kernel"):
//   tile       = (kBlockM query rows of one sequence, one query head): m_blocks x q_heads x batch
//                tiles, query blocks of one (sequence, head) consecutive, longest first for causal
//                masks.
//   block      = persistent: at most one per SM, one tile per round, in snake order
//   warpgroup 0: the producer: one thread issues the TMA loads (Q once, then K and V tiles of
//                kBlockN keys into a kStages-deep ring), the rest idle at a low register count.
//   warpgroups 1..kConsumerWarpgroups: consumers, kBlockM / kConsumerWarpgroups = 64 query rows
//                each: S = Q K^T (wgmma, both operands in shared memory), online softmax in
//                registers, O += P V (wgmma, P from registers), then O / l to global memory.
#pragma once

#include "common/host_device.h"

namespace kiln::fmha {

inline constexpr int kConsumerWarpgroups = 2;
inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kThreads = (1 + kConsumerWarpgroups) * kWarpgroupThreads;
inline constexpr int kRowsPerConsumer = 64;  // one wgmma m64 tile per consumer warpgroup
inline constexpr int kBlockM = kConsumerWarpgroups * kRowsPerConsumer;
// Keys per K / V tile (the N of S = Q K^T) and K / V ring depth, per head dim and mask.
// Tuning (H200, bf16, FA3 workload; NOTES.md v2): at d64 without a mask, 192 keys amortise the
// per-tile costs (barrier waits, row max shuffles, the O rescale) over more work: +3% against
// 128 at S = 4k and 16k. At d128, 176 keys (FlashAttention-3's choice) ran 26% slower than 128
// (S, P and O live together no longer fit the registers well), so d128 keeps 128; causal keeps
// 128 so that diagonal tiles waste less. Stages: as deep as an sm_90 block's 227 KiB allow with Q
// resident.
KILN_HOST_DEVICE constexpr int blockN(int head_dim, bool causal) {
  return causal ? 128 : (head_dim <= 64 ? 192 : 128);
}
KILN_HOST_DEVICE constexpr int stages(int head_dim, bool causal) {
  return head_dim <= 64 ? 3 : (causal ? 2 : 2);
}
// A TMA box spans 64 elements of head_dim: 128 bytes, the width of the 128-byte swizzle.
inline constexpr int kTmaBoxCols = 64;
inline constexpr int kElementBytes = 2;  // fp16 / bf16

// Register budgets (setmaxnreg): the producer gives its registers to the consumers.
// 128 x (24 + 2 x 240) = 64512 <= 65536 registers per SM.
inline constexpr int kProducerRegisters = 24;
inline constexpr int kConsumerRegisters = 240;

KILN_HOST_DEVICE constexpr int qTileBytes(int head_dim) {
  return kBlockM * head_dim * kElementBytes;
}
KILN_HOST_DEVICE constexpr int kvTileBytes(int head_dim, bool causal) {
  return blockN(head_dim, causal) * head_dim * kElementBytes;
}
// The mbarriers: Q full, and per stage K full, V full, K/V empty (8 bytes each), padded to 1 KiB
// so that every tile after them keeps the 1024-byte alignment the 128-byte swizzle needs.
inline constexpr int kBarrierBytes = 1024;
// Dynamic shared memory: Q, the K and V rings, the barriers, and 1 KiB of slack for aligning the
// base of dynamic shared memory up to 1024 bytes.
KILN_HOST_DEVICE constexpr int sharedBytes(int head_dim, bool causal) {
  return qTileBytes(head_dim) + 2 * stages(head_dim, causal) * kvTileBytes(head_dim, causal) +
         kBarrierBytes + 1024;
}

// The portable kernel (mma_attention.cuh, every SM from sm_80): warps of m_tiles 16-row mma tiles
// each, K and V tiles of blockN(head_dim, shape) keys in a ring of stages(head_dim, shape) (K, V)
// pairs. Two entries:
//   kiln_fmha_mma         prefillShape(head_dim): at d64 / d128 4 warps of 32 rows (128 rows), so
//                         each K / V fragment a warp reads from shared memory feeds two row tiles
//                         (FlashAttention-2's warp shape; half the ldmatrix traffic per FLOP of
//                         16-row warps) and each K / V tile loaded feeds 128 rows (half the L2
//                         traffic of 64-row blocks); two blocks per SM where shared memory allows.
//                         At d256 4 warps of 16 rows (the O accumulators of two row tiles would
//                         not fit the registers);
//   kiln_fmha_mma_rows64  kSmall, 4 warps of 16 rows (64 rows), for problems of at most 64 rows
//                         per (sequence, KV head): verification and decode-like chunks, where
//                         more, smaller blocks keep more loads in flight.
// Shared memory at most 96 KiB: every head dim fits the 99 KiB a block may have on sm_86 / 89 /
// 120; d256 takes 32-key tiles to keep two stages in it.
namespace mma {
// A block's shape: `warps` warps, each owning `m_tiles` 16-row mma tiles.
struct Shape {
  int warps;
  int m_tiles;
};
inline constexpr Shape kSmall{4, 1};  // kiln_fmha_mma_rows64
KILN_HOST_DEVICE constexpr Shape prefillShape(int head_dim) {
  return head_dim <= 128 ? Shape{4, 2} : Shape{4, 1};
}
KILN_HOST_DEVICE constexpr int threads(Shape s) {
  return s.warps * 32;
}
KILN_HOST_DEVICE constexpr int blockM(Shape s) {
  return s.warps * 16 * s.m_tiles;
}
// Keys per K / V tile and tiles in the ring: 64 keys at d64 (3 stages) and for 16-row warps at
// d128 (2 stages); 32 keys where a warp holds two row tiles at d128 (their O and S accumulators,
// 192 registers, leave no room for 64-key S tiles), in 3 stages; 32 keys, 2 stages at d256.
KILN_HOST_DEVICE constexpr int blockN(int head_dim, Shape s) {
  return head_dim <= 64 || (head_dim <= 128 && s.m_tiles == 1) ? 64 : 32;
}
KILN_HOST_DEVICE constexpr int stages(int head_dim, Shape s) {
  return head_dim <= 64 || (head_dim <= 128 && s.m_tiles > 1) ? 3 : 2;
}
KILN_HOST_DEVICE constexpr int sharedBytes(int head_dim, Shape s) {
  return (blockM(s) + 2 * stages(head_dim, s) * blockN(head_dim, s)) * head_dim * kElementBytes;
}
// Blocks per SM the kernel is compiled for (__launch_bounds__): 64K registers over the block's
// threads, so two 4-warp blocks at d64 / d128 (at most 255 registers a thread), one at d256.
KILN_HOST_DEVICE constexpr int minBlocksPerSm(int head_dim, Shape s) {
  return s.warps == 4 && head_dim <= 128 ? 2 : 1;
}
}  // namespace mma

}  // namespace kiln::fmha
