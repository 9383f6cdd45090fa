// The fmha launch shape, from the baked head dim alone: tile sizes, warpgroup roles, pipeline
// depth and dynamic shared memory. The kernel evaluates it at compile time (shared-memory
// carve-up, TMA boxes, __launch_bounds__) and the runner at run time (grid, block, shared bytes,
// the TMA boxes it encodes), so the two never disagree and no number is typed twice.
//
// Work decomposition (kernels/fmha/README.md has the picture):
//   block      = (kBlockM query rows of one sequence, one query head); grid (m_blocks, q_heads,
//                batch), m blocks launched longest-first for causal masks.
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
// Keys per K / V tile (the N of S = Q K^T). Tuning: FlashAttention-3's 128 for d128 (H100).
KILN_HOST_DEVICE constexpr int blockN(int head_dim) {
  return head_dim <= 64 ? 128 : 128;
}
// K / V ring depth: as deep as the 227 KiB of an sm_90 block allow with Q resident.
KILN_HOST_DEVICE constexpr int stages(int head_dim) {
  return head_dim <= 64 ? 3 : 2;
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
KILN_HOST_DEVICE constexpr int kvTileBytes(int head_dim) {
  return blockN(head_dim) * head_dim * kElementBytes;
}
// The mbarriers: Q full, and per stage K full, V full, K/V empty (8 bytes each), padded to 1 KiB
// so that every tile after them keeps the 1024-byte alignment the 128-byte swizzle needs.
inline constexpr int kBarrierBytes = 1024;
// Dynamic shared memory: Q, the K and V rings, the barriers, and 1 KiB of slack for aligning the
// base of dynamic shared memory up to 1024 bytes.
KILN_HOST_DEVICE constexpr int sharedBytes(int head_dim) {
  return qTileBytes(head_dim) + 2 * stages(head_dim) * kvTileBytes(head_dim) + kBarrierBytes + 1024;
}

// Grid limits (CUDA: grid.y and grid.z <= 65535).
inline constexpr int kMaxGridYZ = 65535;

}  // namespace kiln::fmha
