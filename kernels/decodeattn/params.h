// The arguments of the decodeattn entry kernels, filled by the runner on the host and read by the
// kernels on the device. Plain C++ (no CUDA types) so that the host compiler that builds the runner
// and nvcc that builds the kernels agree on the layout; the asserts pin it.
//
// Layouts (all row-major, contiguous; "dtype" is the variant's fp16 / bf16; T = query_tokens):
//   q           [batch, T, q_heads, head_dim]                     dtype
//   out         [batch, T, q_heads, head_dim]                     dtype
//   k_cache     pages of page_size keys x kv_heads heads x head_dim, addressed by strides:
//   v_cache       element (page, key row r, head h, dim i) = page * page_stride + r * token_stride
//                 + h * head_stride + i        dtype  (NHD [num_pages, page_size, kv_heads,
//                 head_dim] or HND [num_pages, kv_heads, page_size, head_dim]; the runner's
//                 KvLayout)
//   page_table  [batch, max_pages_per_seq]                        int32  (page ids into the caches)
//   seq_lens    [batch]                                           int32  (keys of each sequence)
//   partial_out [batch, T, q_heads, num_splits, head_dim]         fp32   (workspace; num_splits >
//   1) partial_lse [batch, T, q_heads, num_splits]                   fp32   (workspace; num_splits
//   > 1)
// Query head h attends with KV head h / (q_heads / kv_heads) (GQA; torch's enable_gqa order).
// Query token t of T (multi-token decoding: the last T keys of the sequence are those tokens'
// own) attends to keys [0, seq_lens[b] - (T - 1 - t)): causal, aligned to the sequence's end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::decodeattn {

struct DecodeAttentionParams {
  void* out;
  const void* q;
  const void* k_cache;
  const void* v_cache;
  const std::int32_t* page_table;
  const std::int32_t* seq_lens;
  float* partial_out;  // nullptr when num_splits == 1 (the attention kernel writes `out`)
  float* partial_lse;  // log2-domain log-sum-exp of each split's scores; -inf for an empty split
  std::int64_t page_stride;  // cache elements between pages (page_size * kv_heads * head_dim)
  std::int32_t batch;
  std::int32_t q_heads;
  std::int32_t kv_heads;
  std::int32_t group_size;         // q_heads / kv_heads
  std::int32_t head_chunks;        // ceil(group_size / 16): a block computes 16 query heads at most
  std::int32_t page_size_log2;     // page_size = 1 << page_size_log2, 16..256
  std::int32_t max_pages_per_seq;  // the page table's row length
  std::int32_t num_pages;          // pages in each cache (page ids are clamped to [0, num_pages))
  std::int32_t num_splits;         // key ranges per sequence; > 1 needs the merge kernel
  std::int32_t token_stride;       // cache elements between key rows of a page (a multiple of 8)
  std::int32_t head_stride;        // cache elements between KV heads of a key row (a multiple of 8)
  float scale_log2;                // softmax scale * log2(e): scores go through exp2
  std::int32_t query_tokens;       // T, 1..kMaxQueryTokens: query tokens per sequence
};

static_assert(std::is_standard_layout_v<DecodeAttentionParams> &&
                  std::is_trivially_copyable_v<DecodeAttentionParams>,
              "DecodeAttentionParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(DecodeAttentionParams) == 128 &&
                  offsetof(DecodeAttentionParams, page_stride) == 64 &&
                  offsetof(DecodeAttentionParams, batch) == 72 &&
                  offsetof(DecodeAttentionParams, scale_log2) == 116 &&
                  offsetof(DecodeAttentionParams, query_tokens) == 120,
              "host and device must agree on the DecodeAttentionParams layout");

}  // namespace kiln::decodeattn
