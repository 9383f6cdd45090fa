// The arguments of the fmha entry kernel, filled by the runner on the host and read by the kernel
// on the device. Plain C++ (no CUDA types) so that the host compiler that builds the runner and
// nvcc that builds the kernel agree on the layout; the asserts pin it.
//
// Layouts (row-major, contiguous along head_dim; "dtype" is the variant's fp16 / bf16). A packed
// ragged batch: sequence b owns query tokens [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and key tokens
// [cu_seqlens_k[b], cu_seqlens_k[b + 1]):
//   q     [total_q, q_heads, head_dim]      dtype   (read through tma_q)
//   k, v  [total_k, kv_heads, head_dim]     dtype   (read through tma_k / tma_v)
//   out   [total_q, q_heads, head_dim]      dtype
//   lse   [q_heads, total_q]                fp32    natural-log log-sum-exp of the scaled scores;
//                                                   optional (nullptr: not written)
//   cu_seqlens_q, cu_seqlens_k  [batch + 1] int32, non-decreasing, starting at 0
// Query head h attends with KV head h / (q_heads / kv_heads) (GQA / MQA). Causal masks are
// aligned to the bottom right: query i of a sequence with sq queries and sk keys sees key j iff
// j <= i + sk - sq (FlashAttention's definition; a query that sees no key gets out = 0 and
// lse = -inf).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::fmha {

// A CUtensorMap (cuda.h), opaque here: 128 bytes, 64-byte aligned, encoded on the host by the
// runner (kiln::encodeTensorMap) and passed by value inside the kernel parameters
// (__grid_constant__), where the TMA unit reads it.
struct alignas(64) TensorMap {
  std::uint64_t opaque[16];
};

struct FmhaParams {
  TensorMap tma_q;  // 3-D (head_dim, total_q, q_heads), box (64, kBlockM, 1), 128-byte swizzle
  TensorMap tma_k;  // 3-D (head_dim, total_k, kv_heads), box (64, kBlockN, 1), 128-byte swizzle
  TensorMap tma_v;  // as tma_k, over v
  void* out;
  float* lse;  // nullptr: not written
  const std::int32_t* cu_seqlens_q;
  const std::int32_t* cu_seqlens_k;
  std::int32_t batch;
  std::int32_t q_heads;
  std::int32_t kv_heads;
  std::int32_t group_size;   // q_heads / kv_heads
  std::int32_t total_q;      // rows of q / out (lse's row stride)
  std::int32_t total_k;      // rows of k / v
  std::int32_t m_blocks;     // ceil(max_seqlen_q / kBlockM): gridDim.x
  float scale_log2;          // softmax scale * log2(e): scores go through exp2
  float scale;               // softmax scale (the natural-log lse)
  std::int32_t window_left;  // causal: keys j >= i + sk - sq - window_left only; -1: no window
};

static_assert(std::is_standard_layout_v<FmhaParams> && std::is_trivially_copyable_v<FmhaParams>,
              "FmhaParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(TensorMap) == 128 && offsetof(FmhaParams, out) == 384 &&
                  offsetof(FmhaParams, batch) == 416 && offsetof(FmhaParams, scale) == 448 &&
                  offsetof(FmhaParams, window_left) == 452 && sizeof(FmhaParams) == 512,
              "host and device must agree on the FmhaParams layout");

// The portable kernel's arguments (mma_attention.cuh). q, out, lse and cu_seqlens_q as above. K and
// V are either contiguous (page_table == nullptr: [total_k, kv_heads, head_dim], sequence b owns
// keys [cu_seqlens_k[b], cu_seqlens_k[b + 1])) or paged (decodeattn's cache: key j of sequence b
// is row j % page_size of page page_table[b * max_pages_per_seq + j / page_size]; element
// (page, row, head, i) at page * page_stride + row * token_stride + head * head_stride + i;
// sequence b has seq_lens_k[b] keys). Rows are (token, group head) pairs, token-major: row r of
// KV head h is query token r / group_size, query head h * group_size + r % group_size.
struct FmhaMmaParams {
  void* out;
  float* lse;  // nullptr: not written
  const void* q;
  const void* k;
  const void* v;
  const std::int32_t* cu_seqlens_q;
  const std::int32_t* cu_seqlens_k;  // contiguous K / V; nullptr when paged
  const std::int32_t* seq_lens_k;    // paged: keys per sequence; nullptr when contiguous
  const std::int32_t* page_table;    // paged: [batch, max_pages_per_seq]; nullptr: contiguous
  std::int64_t page_stride;          // paged: elements between pages
  std::int32_t token_stride;         // elements between consecutive keys (within a page)
  std::int32_t head_stride;          // elements between KV heads of one key
  std::int32_t page_size_log2;       // paged: page_size = 1 << page_size_log2
  std::int32_t max_pages_per_seq;    // paged: the page table's row length
  std::int32_t num_pages;            // paged: page ids are clamped to [0, num_pages)
  std::int32_t batch;
  std::int32_t q_heads;
  std::int32_t kv_heads;
  std::int32_t group_size;   // q_heads / kv_heads
  std::int32_t total_q;      // rows of q / out (lse's row stride)
  std::int32_t total_k;      // contiguous: rows of k / v
  std::int32_t m_blocks;     // ceil(max_seqlen_q * group_size / the entry's rows): gridDim.x
  std::int32_t window_left;  // causal: keys j >= i + sk - sq - window_left only; -1: no window
  float scale_log2;          // softmax scale * log2(e)
};

static_assert(std::is_standard_layout_v<FmhaMmaParams> &&
                  std::is_trivially_copyable_v<FmhaMmaParams>,
              "FmhaMmaParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && offsetof(FmhaMmaParams, page_stride) == 72 &&
                  offsetof(FmhaMmaParams, batch) == 100 &&
                  offsetof(FmhaMmaParams, scale_log2) == 132 && sizeof(FmhaMmaParams) == 136,
              "host and device must agree on the FmhaMmaParams layout");

}  // namespace kiln::fmha
