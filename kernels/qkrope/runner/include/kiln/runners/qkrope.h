// The qkrope runner: the attention-input step of a Qwen3 (or Llama) layer, on the caller's stream.
// From the QKV projection's output, per token t and head:
//
//   q_out[t, h]            = rope(rmsnorm(q[t, h]) * q_norm_weight, positions[t])   h < q_heads
//   k_cache[slot_mapping[t], h] = rope(rmsnorm(k[t, h]) * k_norm_weight, positions[t])
//   v_cache[slot_mapping[t], h] = v[t, h]                                           h < kv_heads
//
// rmsnorm(x) = x / sqrt(mean(x^2) + eps) over the head's head_dim elements (Qwen3's q_norm /
// k_norm; qk_norm = false skips it, as Llama-style models do). rope is the NeoX rotation of HF
// transformers' `rotate_half`: for i < rotary_dim / 2, with r = rotary_dim,
//   out[i]       = x[i] cos(a_i) - x[i + r/2] sin(a_i)
//   out[i + r/2] = x[i + r/2] cos(a_i) + x[i] sin(a_i)
// and out[i] = x[i] for i >= rotary_dim, where a_i = fl32(fl32(position) * inv_freq[i]) and
// inv_freq[i] = fl32(1 / theta^fl32(2i / r)), cos and sin computed in fp32 and rounded to the
// dtype: HF's numbers (kernels/qkrope/README.md, "Numerics"). Everything else is fp32 inside, each
// stored value rounded once; v is copied bit for bit.
//
// Layouts (row-major, contiguous, the problem's dtype unless noted; T = tokens, D = head_dim):
//   qkv            [T, q_heads + 2 * kv_heads, D]: per token its q, then k, then v heads
//   positions      [T] int64
//   slot_mapping   [T] int64: the cache row page * page_size + offset of token t (vLLM's
//                  convention); a slot outside [0, num_pages * page_size) (negative: padding) is
//                  not written to the caches
//   q_norm_weight, k_norm_weight   [D] (qk_norm only)
//   q_out          [T, q_heads, D]: what fmha and decodeattn take as q
//   k_cache,       decodeattn's (and fmha's paged) caches: kNHD [num_pages, page_size, kv_heads,
//   v_cache        D], kHND [num_pages, kv_heads, page_size, D]; slot s is row s % page_size of
//                  page s / page_size
//   k_out, v_out   [T, kv_heads, D], optional (nullptr: not written): k and v also as fmha's
//                  contiguous K / V, for a prefill with no cached prefix (fmha's wgmma path)
// No output may overlap qkv or another output. The head dim and the dtype are baked per variant;
// everything else is a run-time value. Variants, limits: kernels/qkrope/README.md.
//
// One selector (kernels/qkrope/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::qkrope {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// The order of a cache page's dimensions, as decodeattn's KvLayout: NHD (vLLM's, FlashInfer's
// default), HND (head-major, TensorRT-LLM's).
enum class KvLayout { kNHD, kHND };

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/qkrope.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "qkrope_d128_bf16"
  int head_dim;                      // baked head dim
  DType dtype;                       // baked dtype
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct Problem {
  DType dtype = DType::kBFloat16;
  std::int64_t tokens = 0;  // T; 0 is a no-op: pointers are not checked and nothing is touched
  int q_heads = 0;          // a multiple of kv_heads
  int kv_heads = 0;
  int head_dim = 0;    // one of the artifact's baked head dims (64, 128, 256)
  int rotary_dim = 0;  // dims [0, rotary_dim) rotate: a multiple of 16 in 16..head_dim; 0: head_dim
  float rope_theta = 10000.0f;          // the rotary base, finite and > 0 (Qwen3: 1e6)
  bool qk_norm = false;                 // RMSNorm of every q and k head first (Qwen3: true)
  float eps = 1e-6f;                    // qk_norm only: finite and > 0
  int page_size = 16;                   // a power of two, 16..256
  KvLayout kv_layout = KvLayout::kNHD;  // both caches
  int num_pages = 0;                    // pages in each cache
  const void* qkv = nullptr;
  const std::int64_t* positions = nullptr;
  const std::int64_t* slot_mapping = nullptr;
  const void* q_norm_weight = nullptr;  // qk_norm only
  const void* k_norm_weight = nullptr;  // qk_norm only
  void* q_out = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  void* k_out = nullptr;  // optional
  void* v_out = nullptr;  // optional
  // Programmatic dependent launch (kiln::LaunchConfig::programmatic_dependency). On sm_90 and
  // newer the kernel may become resident while the kernel before it on the stream still runs (as
  // soon as that kernel completes or releases its dependents, griddepcontrol.launch_dependents),
  // hiding its launch latency behind that kernel's tail. It waits (griddepcontrol.wait: the
  // kernel before complete, its writes visible) before it reads or writes any global memory, so
  // every input (qkv, positions, slot_mapping, the norm weights) may be written, and every output
  // read or written, by the kernel before: the wait orders them.
  // Whatever overlap_launch is, the kernel releases its own dependents right after its wait: a
  // kernel launched after it as a programmatic dependent (decodeattn with overlap_launch) runs
  // beside it and must wait before it reads q_out, the caches, k_out or v_out, or writes any of
  // this kernel's inputs or outputs. Below sm_90 (an image compiled below sm_90, or a driver
  // without cuLaunchKernelEx) the launch is an ordinary one; the results are the same either way.
  bool overlap_launch = false;
};

// q_heads + 2 * kv_heads, at most: the heads of one token.
inline constexpr int kMaxHeadsPerToken = 1024;

// Host-side admission: a variant for (head_dim, dtype) is built (else kNotSupported, naming the
// built head dims), the heads, rotary dim, theta, eps, page size and cache are valid, pointers are
// non-null and aligned (qkv, q_out, caches, k_out, v_out, weights 16 bytes; positions,
// slot_mapping 8 bytes), sizes fit the kernel's index and grid limits (else kInvalidArgument,
// naming the value and the limit).
Status canImplement(const Problem& problem);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs: 0 (the contract is uniform across groups).
std::size_t workspaceSize(const Problem& problem);
// Admits and launches on `stream` (the device that owns it picks the image). The workspace is
// unused (may be null). tokens == 0 returns ok and touches nothing.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::qkrope
