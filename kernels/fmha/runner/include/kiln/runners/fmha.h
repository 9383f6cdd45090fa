// The fmha runner: prefill attention over a packed ragged batch, on the caller's stream.
//
//   out[t, h, :] = softmax_j(scale * q[t, h, :] . k[j, h / G, :] [+ mask]) . v[j, h / G, :]
//   for query token t of sequence b, over its keys j, G = q_heads / kv_heads
//
// Layouts (row-major, contiguous, the problem's dtype unless noted):
//   q, out        [total_q, q_heads, head_dim]; sequence b owns rows
//                 [cu_seqlens_q[b], cu_seqlens_q[b + 1])
//   k, v          contiguous: [total_k, kv_heads, head_dim]; sequence b owns rows
//                 [cu_seqlens_k[b], cu_seqlens_k[b + 1]);
//                 paged (page_table != nullptr): decodeattn's cache, [num_pages, page_size,
//                 kv_heads, head_dim] (NHD) or [num_pages, kv_heads, page_size, head_dim] (HND);
//                 key j of sequence b is row j % page_size of page
//                 page_table[b * max_pages_per_seq + j / page_size], seq_lens_k[b] keys
//   lse           [q_heads, total_q] fp32, optional: natural-log log-sum-exp of the scaled scores
//   cu_seqlens_q  [batch + 1] int32, non-decreasing from 0 to total_q (cu_seqlens_k likewise)
// Per sequence sq = its query count and sk = its key count may differ (sq < sk: chunked prefill
// over cached keys, speculative verification). Causal variants align the mask to the bottom right:
// query i sees key j iff j <= i + sk - sq; with window_left = W >= 0 (FlashAttention's
// window_size_left, causal only) also j >= i + sk - sq - W, so a query sees at most W + 1 keys. A
// query that sees no key gets out = 0 and lse = -inf.
// Two kernels serve it (kernels/fmha/README.md): `wgmma` (sm_90 only: head dims 64 and 128,
// contiguous K / V, windows) and `mma` (every SM from sm_80: head dims 64, 128 and 256, contiguous
// or paged K / V, windows). On sm_90 the runner takes wgmma where it implements the problem (head
// dim 64 or 128, K / V not paged), mma otherwise.
// The kernel, head dim, dtype and mask are baked per variant; everything else is a run-time value.
//
// One selector (kernels/fmha/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::fmha {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group
enum class Mask { kFull, kCausal };
enum class Kernel {
  kWgmma,
  kMma
};  // kiln.toml's `kernel`: TMA + wgmma (sm_90a), mma.sync (sm_80+)
enum class KvLayout { kNhd, kHnd };  // a paged cache's page layout (decodeattn's)

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/fmha.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "fmha_wgmma_d128_bf16_causal"
  Kernel kernel;                     // which kernel the variant's image holds
  int head_dim;                      // baked head dim
  DType dtype;                       // baked dtype
  Mask mask;                         // baked mask
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct Problem {
  DType dtype = DType::kBFloat16;
  Mask mask = Mask::kFull;
  int head_dim = 0;  // one of the artifact's baked head dims (64, 128, 256)
  int batch = 0;     // 0 is a no-op: pointers are not checked and nothing is touched
  int q_heads = 0;   // a multiple of kv_heads
  int kv_heads = 0;
  int total_q = 0;  // rows of q and out (cu_seqlens_q[batch])
  int total_k = 0;  // contiguous K / V: rows of k and v (cu_seqlens_k[batch]); paged: 0
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
  const std::int32_t* cu_seqlens_k = nullptr;  // contiguous K / V; paged: nullptr
  // Causal only: FlashAttention's window_size_left (keys more than W before the diagonal are
  // masked, and key tiles wholly left of the window are never read); -1: no window.
  int window_left = -1;
  // Paged K / V (the mma kernel): k and v are the caches decodeattn reads. page_table != nullptr
  // selects it; then seq_lens_k [batch] int32 holds each sequence's keys (cached and new, already
  // written to the cache), and total_k / cu_seqlens_k stay 0 / nullptr.
  const std::int32_t* page_table = nullptr;  // [batch, max_pages_per_seq] page ids
  const std::int32_t* seq_lens_k = nullptr;  // [batch]
  int page_size = 0;                         // keys per page: a power of two, 16..256
  int max_pages_per_seq = 0;                 // the page table's row length
  int num_pages = 0;                         // pages in each cache (ids are clamped to it)
  KvLayout kv_layout = KvLayout::kNhd;
  // The kernel to run; nullopt (the default): the runner's choice (wgmma on sm_90 where it
  // implements the problem, else mma). Set it to pin one (a test of each, a benchmark): a kernel
  // that is not built or cannot serve the problem is refused, never replaced.
  std::optional<Kernel> kernel;
};

// Host-side admission: a variant for (head_dim, dtype, mask) is built (else kNotSupported, naming
// what is built) by a kernel that implements the problem (paged K / V needs the mma kernel:
// kNotSupported saying so), the shape is valid, pointers are non-null and aligned (q, k,
// v, out 16 bytes; lse, cu_seqlens, seq_lens_k, page_table 4 bytes), sizes fit the kernels' limits
// (else kInvalidArgument, naming the value and the limit).
Status canImplement(const Problem& problem);
// The same for a device of SM `device_sm`: the kernel run() would launch there has an image for it
// (else kNoKernelImage naming what the artifact has; wgmma runs on sm_90 only).
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs: 0 (both kernels keep everything on chip).
std::size_t workspaceSize(const Problem& problem);
// Admits and launches on `stream`. batch == 0 returns ok and touches nothing. The kernel trusts
// cu_seqlens to describe the tensors: it clamps each sequence to [0, total) so that no access
// leaves the buffers, but the output of a batch with such offsets is meaningless.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::fmha
