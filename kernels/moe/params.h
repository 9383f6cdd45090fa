// The parameters of the moe entry kernels, filled by the runner on the host and read by the
// kernels on the device: one struct for all five entries, since each step reads what the one
// before it wrote. Plain C++ (no CUDA types) so that the host compiler that builds the runner and
// nvcc that builds the kernels agree on the layout; the asserts pin it.
//
// Tensors (README.md, "Layouts", has every byte); T tokens, E experts, k = top_k, H hidden,
// I intermediate:
//   x               [T, H] dtype                     the block's input (after the norm)
//   logits          [T, E] dtype, or fp32            the router's output
//   w1              [E, 2I, H] dtype                 per expert: I gate rows, then I up rows
//   w2              [E, H, I] dtype                  per expert: the down projection
//   residual        [T, H] dtype or null             added to the output when given
//   y               [T, H] dtype                     the block's output
// and in the caller's workspace (the runner's workspaceLayout() places them):
//   topk_ids        [T, k] int32                     each token's experts, best first
//   topk_weights    [T, k] fp32                      their routing weights
//   expert_offsets  [E + 1] int32                    rows of expert e: offsets[e] .. offsets[e + 1]
//   tile_offsets    [E + 1] int32                    row tiles of expert e, likewise
//   sorted_slots    [T * k] int32                    the slot (t * k + j) of each expert row
//   act             [T * k, I] dtype                 SiLU(gate) * up, in expert-row order
//   down            [T * k, H] dtype                 FC2's output, in slot order
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::moe {

struct MoeParams {
  const void* x;
  const void* logits;
  const void* w1;
  const void* w2;
  const void* residual;
  void* y;
  std::int32_t* topk_ids;
  float* topk_weights;
  std::int32_t* expert_offsets;
  std::int32_t* tile_offsets;
  std::int32_t* sorted_slots;
  void* act;
  void* down;
  std::int32_t tokens;        // T >= 1 when launched
  std::int32_t experts;       // E, 1..kMaxExperts
  std::int32_t top_k;         // k, 1..min(E, kMaxTopK)
  std::int32_t hidden;        // H, a multiple of kBlockK
  std::int32_t intermediate;  // I, a multiple of kBlockN
  std::int32_t logits_fp32;   // 1: logits are fp32, 0: of the dtype
  std::int32_t renormalize;   // 1: the k weights are divided by their sum (Qwen3-MoE, Mixtral)
  std::int32_t pad;
};

static_assert(std::is_standard_layout_v<MoeParams> && std::is_trivially_copyable_v<MoeParams>,
              "MoeParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(MoeParams) == 136 &&
                  offsetof(MoeParams, tokens) == 104 && offsetof(MoeParams, renormalize) == 128,
              "host and device must agree on the MoeParams layout");

}  // namespace kiln::moe
