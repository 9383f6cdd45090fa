// The fmha runner: prefill attention over a packed ragged batch, on the caller's stream.
//
//   out[t, h, :] = softmax_j(scale * q[t, h, :] . k[j, h / G, :] [+ mask]) . v[j, h / G, :]
//   for query token t of sequence b, over its keys j, G = q_heads / kv_heads
//
// Layouts (row-major, contiguous, the problem's dtype unless noted):
//   q, out        [total_q, q_heads, head_dim]   sequence b owns rows [cu_seqlens_q[b],
//   cu_seqlens_q[b+1]) k, v          [total_k, kv_heads, head_dim]  sequence b owns rows
//   [cu_seqlens_k[b], cu_seqlens_k[b+1]) lse           [q_heads, total_q] fp32, optional:
//   natural-log log-sum-exp of the scaled scores cu_seqlens_q, [batch + 1] int32, non-decreasing
//   from 0 to total_q (resp. total_k) cu_seqlens_k
// Per sequence sq = its query count and sk = its key count may differ (sq < sk: chunked prefill
// over cached keys). Causal variants align the mask to the bottom right: query i sees key j iff
// j <= i + sk - sq; a query that sees no key gets out = 0 and lse = -inf.
// The head dim, the dtype and the mask are baked per variant; everything else is a run-time value.
// Variants, limits, the error bound and the SMs served: kernels/fmha/README.md.
//
// One selector (kernels/fmha/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::fmha {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group
enum class Mask { kFull, kCausal };

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/fmha.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "fmha_wgmma_d128_bf16_causal"
  int head_dim;                      // baked head dim
  DType dtype;                       // baked dtype
  Mask mask;                         // baked mask
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct Problem {
  DType dtype = DType::kBFloat16;
  Mask mask = Mask::kFull;
  int head_dim = 0;  // one of the artifact's baked head dims (64, 128)
  int batch = 0;     // 0 is a no-op: pointers are not checked and nothing is touched
  int q_heads = 0;   // a multiple of kv_heads
  int kv_heads = 0;
  int total_q = 0;  // rows of q and out (cu_seqlens_q[batch])
  int total_k = 0;  // rows of k and v (cu_seqlens_k[batch])
  // The longest sequence's query count, known on the host (FlashAttention's max_seqlen_q): the
  // grid covers it. A sequence longer than it is not computed past it. 0: total_q.
  int max_seqlen_q = 0;
  float scale = 0.0f;  // softmax scale, finite and > 0 (usually 1 / sqrt(head_dim))
  void* out = nullptr;
  float* lse = nullptr;  // optional
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
};

// Host-side admission: a variant for (head_dim, dtype, mask) is built (else kNotSupported, naming
// what is built), the shape is valid, pointers are non-null and aligned (q, k, v, out 16 bytes;
// lse, cu_seqlens 4 bytes), sizes fit the kernel's and the TMA unit's limits (else
// kInvalidArgument, naming the value and the limit).
Status canImplement(const Problem& problem);
// The same, and the artifact has an image that runs on a device of SM `device_sm` (sm_90 only:
// other SMs get kNoKernelImage naming the SMs the artifact has).
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs: 0 (the kernel keeps everything on chip).
std::size_t workspaceSize(const Problem& problem);
// Admits and launches on `stream`. batch == 0 returns ok and touches nothing. The kernel trusts
// cu_seqlens to describe the tensors: it clamps each sequence to [0, total) so that no access
// leaves the buffers, but the output of a batch with such offsets is meaningless.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::fmha
