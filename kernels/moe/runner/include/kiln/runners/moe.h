// The moe runner: a mixture-of-experts block (Qwen3-MoE, Mixtral) on the caller's stream, from
// router logits to the finalized output, with no host synchronisation (the block can be captured
// in a CUDA graph).
//
//   p[t, :]     = softmax(logits[t, :])                     fp32
//   ids[t, :]   = the top_k experts of p[t, :], best first (ties: the lower expert)
//   w[t, j]     = p[t, ids[t, j]] (/ sum_j p[t, ids[t, j]] when renormalize)
//   act[t, j]   = SiLU(x[t] . gate_e^T) * (x[t] . up_e^T),  e = ids[t, j]   rounded to the dtype
//   down[t, j]  = act[t, j] . w2_e^T                                        rounded to the dtype
//   y[t]        = sum_j w[t, j] * down[t, j] (+ residual[t])                fp32, rounded once
//
// x, weights, residual and y are of the problem's dtype (fp16 or bf16), GEMM accumulation fp32.
// w1 is [E, 2I, H]: each expert's I gate rows, then its I up rows (Mixtral's w1 then w3, Qwen3's
// gate_proj then up_proj); w2 is [E, H, I]. kernels/moe/README.md has the layouts and limits.
//
// The block is five steps (Step); run() runs the ones `problem.steps` names, in order, each
// reading what the steps before it left in the workspace (workspaceLayout() says where), so a
// caller can run them one by one, inspect the routing, or bring its own (write topk_ids and
// topk_weights, then run from kAlign).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::moe {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/moe.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "moe_bf16"
  DType dtype;                       // x, weights, residual, y, act, down
  const kiln_variant* (*variant)();  // the variant's images and entries
};

// The steps of the block, as bits of Problem::steps; run() runs those set, in this order.
enum Step : unsigned {
  kRoute = 1u,      // logits -> topk_ids, topk_weights
  kAlign = 2u,      // topk_ids -> expert_offsets, tile_offsets, sorted_slots
  kFc1 = 4u,        // x, w1 -> act
  kFc2 = 8u,        // act, w2 -> down
  kFinalize = 16u,  // down, topk_weights (+ residual) -> y
  kAllSteps = 31u,
};

struct Problem {
  DType dtype = DType::kBFloat16;
  std::int64_t tokens = 0;         // T; 0 is a no-op: pointers are not checked
  int experts = 0;                 // E, 1..512
  int top_k = 0;                   // k, 1..16 and at most E
  std::int64_t hidden = 0;         // H, a positive multiple of 32
  std::int64_t intermediate = 0;   // I, a positive multiple of 64
  bool renormalize = true;         // divide the k weights by their sum (Qwen3-MoE, Mixtral)
  bool logits_fp32 = false;        // logits are fp32 (else of the dtype, a gate linear's output)
  const void* x = nullptr;         // [T, H]
  const void* logits = nullptr;    // [T, E]
  const void* w1 = nullptr;        // [E, 2I, H]
  const void* w2 = nullptr;        // [E, H, I]
  const void* residual = nullptr;  // [T, H] or nullptr
  void* y = nullptr;               // [T, H]
  unsigned steps = kAllSteps;      // the Step bits to run (a contiguous run of them)
};

// Where each intermediate lives in run()'s workspace, as byte offsets from its start (each
// 256-byte aligned), and the total: what workspaceSize() returns.
struct WorkspaceLayout {
  std::size_t topk_ids = 0;        // int32 [T, k]
  std::size_t topk_weights = 0;    // fp32 [T, k]
  std::size_t expert_offsets = 0;  // int32 [E + 1]: expert e's rows are offsets[e] .. [e + 1]
  std::size_t tile_offsets = 0;    // int32 [E + 1]: its 64-row tiles likewise
  std::size_t sorted_slots = 0;    // int32 [T * k]: the slot t * k + j of each expert row
  std::size_t act = 0;             // dtype [T * k, I], in expert-row order
  std::size_t down = 0;            // dtype [T * k, H], in slot order
  std::size_t bytes = 0;
};

// Host-side admission: a variant of the dtype is built, the shapes are in range, the steps are a
// contiguous run of Step bits, the pointers those steps read or write are non-null and aligned
// (x, w1, w2, residual, y: 16 bytes; logits: its element); the message names the value and the
// limit ("moe: top_k 9 exceeds experts 8").
Status canImplement(const Problem& problem);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs (the intermediates above), from the shapes alone; 0 for a
// problem that is refused.
std::size_t workspaceSize(const Problem& problem);
// The layout of that workspace; all zero for a problem that is refused.
WorkspaceLayout workspaceLayout(const Problem& problem);
// Admits and launches the problem's steps on `stream`; tokens == 0 returns ok untouched.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::moe
