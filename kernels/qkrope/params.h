// QkRopeParams: the one argument of the qkrope entry kernel, filled by the runner on the host and
// read by the kernel on the device. Plain C++ (no CUDA types) so that the host compiler that builds
// the runner and nvcc that builds the kernel agree on its layout; the asserts pin that layout.
//
// Layouts (row-major, contiguous; "dtype" is the variant's fp16 / bf16; T = tokens, D = head_dim):
//   qkv            [T, q_heads + 2 * kv_heads, D]  dtype  per token: q heads, k heads, v heads
//   positions      [T]                             int64  rotary position of each token
//   slot_mapping   [T]                             int64  cache row page * page_size + offset;
//                                                          outside [0, num_slots): not written
//   q_norm_weight  [D], k_norm_weight [D]          dtype  (qk_norm only)
//   q_out          [T, q_heads, D]                 dtype
//   k_cache,       element (page, row r, kv head h, dim i) = page * page_stride + r * token_stride
//   v_cache          + h * head_stride + i         dtype  (NHD [num_pages, page_size, kv_heads, D]
//                                                          or HND [num_pages, kv_heads, page_size,
//                                                          D]: decodeattn's caches)
//   k_out, v_out   [T, kv_heads, D]                dtype  optional (nullptr: not written)
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace kiln::qkrope {

// rotary_dim / 2 at most: head dim 256 with full rotation.
inline constexpr int kMaxRotaryPairs = 128;

struct QkRopeParams {
  void* q_out;
  void* k_cache;
  void* v_cache;
  void* k_out;  // nullptr: not written
  void* v_out;  // nullptr: not written
  const void* qkv;
  const void* q_norm_weight;  // qk_norm only
  const void* k_norm_weight;  // qk_norm only
  const std::int64_t* positions;
  const std::int64_t* slot_mapping;
  std::int64_t num_slots;       // num_pages * page_size: slots at or past it are not written
  std::int64_t page_stride;     // cache elements between pages (page_size * kv_heads * D)
  std::int32_t token_stride;    // cache elements between rows of a page (a multiple of 8)
  std::int32_t head_stride;     // cache elements between kv heads of a row (a multiple of 8)
  std::int32_t page_size_log2;  // page_size = 1 << page_size_log2, 16..256
  std::int32_t q_heads;
  std::int32_t kv_heads;
  std::int32_t rows_per_block;  // heads of one token per block (launch.h)
  std::int32_t rotary_dim;      // a multiple of 16 in 16..D: dims [0, rotary_dim) rotate
  std::int32_t qk_norm;         // 1: RMSNorm of each q and k head first
  float eps;                    // qk_norm only: finite, > 0
  // inv_freq[i] = theta^(-2i / rotary_dim) in fp32, as HF computes it (rope.h), i < rotary_dim / 2
  float inv_freq[kMaxRotaryPairs];
};

static_assert(std::is_standard_layout_v<QkRopeParams> && std::is_trivially_copyable_v<QkRopeParams>,
              "QkRopeParams is passed by value to cuLaunchKernel");
static_assert(sizeof(void*) == 8 && sizeof(QkRopeParams) == 648 &&
                  offsetof(QkRopeParams, num_slots) == 80 &&
                  offsetof(QkRopeParams, token_stride) == 96 &&
                  offsetof(QkRopeParams, eps) == 128 && offsetof(QkRopeParams, inv_freq) == 132,
              "host and device must agree on the QkRopeParams layout");

}  // namespace kiln::qkrope
