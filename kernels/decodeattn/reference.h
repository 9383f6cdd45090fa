// Host reference for the decodeattn group, in float64, for the GPU numerics test and the CPU
// tests: decode attention of one or more query tokens per sequence over the paged KV cache, read
// through the page table exactly as the kernel's contract describes it
// (kernels/decodeattn/params.h). Header-only, no CUDA headers: 16-bit values travel as their bit
// patterns (uint16_t) and are decoded exactly. It is deliberately the plainest loop nest; any head
// dim and page size work, so the CPU tests can check it on hand-computed cases of two dimensions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/attention_reference.h"
#include "common/bits16.h"

namespace kiln::decodeattn::reference {

// The 16-bit codec (common/bits16.h), under the names this reference's callers use.
using common::Decoder;
using common::Format;
using common::formatName;
using common::toDouble;

// The two page layouts of the runner's KvLayout: NHD [num_pages, page_size, kv_heads, head_dim],
// HND [num_pages, kv_heads, page_size, head_dim].
enum class Layout { kNHD, kHND };

inline constexpr const char* layoutName(Layout l) {
  return l == Layout::kNHD ? "nhd" : "hnd";
}

// Element index of (page, row in the page, kv head, dim 0) in a cache of that layout.
inline std::size_t pageElement(Layout layout, int page_size, int kv_heads, int head_dim,
                               std::size_t page, int row, int kv_head) {
  const std::size_t d = static_cast<std::size_t>(head_dim);
  const std::size_t in_page = layout == Layout::kNHD
                                  ? static_cast<std::size_t>(row) * kv_heads + kv_head
                                  : static_cast<std::size_t>(kv_head) * page_size + row;
  return (page * page_size * kv_heads + in_page) * d;
}

// One problem in the kernel's layouts (params.h):
//   q [batch, query_tokens, q_heads, head_dim], k_cache / v_cache in `layout`,
//   page_table [batch, max_pages_per_seq], seq_lens [batch], 0 <= seq_lens[b] <= capacity.
struct PagedProblem {
  Format format = Format::kBFloat16;
  Layout layout = Layout::kNHD;
  int batch = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int query_tokens = 1;
  int page_size = 0;
  int max_pages_per_seq = 0;
  double scale = 1.0;
  const std::uint16_t* q = nullptr;
  const std::uint16_t* k_cache = nullptr;
  const std::uint16_t* v_cache = nullptr;
  const std::int32_t* page_table = nullptr;
  const std::int32_t* seq_lens = nullptr;
};

// Element index of (key j of sequence b, kv head, dim 0) in a cache, through the page table.
inline std::size_t cacheIndex(const PagedProblem& p, int b, int j, int kv_head) {
  const std::int32_t page =
      p.page_table[static_cast<std::size_t>(b) * p.max_pages_per_seq + j / p.page_size];
  return pageElement(p.layout, p.page_size, p.kv_heads, p.head_dim, static_cast<std::size_t>(page),
                     j % p.page_size, kv_head);
}

// out[b, t, h, :] = sum_j softmax_j(scale * q[b, t, h] . k_j) v_j over the first
// seq_lens[b] - (T - 1 - t) keys of sequence b (T = query_tokens: causal over the last T keys),
// with kv head h / (q_heads / kv_heads). A row with no key (a sequence of length 0, or shorter
// than its token's offset) gives zeros (the kernel's documented convention for an empty softmax).
// `out` is [batch, query_tokens, q_heads, head_dim], unrounded.
inline void decodeAttention(const PagedProblem& p, double* out) {
  const int group = p.q_heads / p.kv_heads;
  const auto d = static_cast<std::size_t>(p.head_dim);
  const Decoder dec(p.format);
  std::vector<double> scores;
  for (int b = 0; b < p.batch; ++b) {
    for (int t = 0; t < p.query_tokens; ++t) {
      const int len = p.seq_lens[b] - (p.query_tokens - 1 - t);
      for (int h = 0; h < p.q_heads; ++h) {
        const int kvh = h / group;
        const std::size_t row = (static_cast<std::size_t>(b) * p.query_tokens + t) * p.q_heads + h;
        const std::uint16_t* q = p.q + row * d;
        double* o = out + row * d;
        if (len <= 0) {
          std::fill(o, o + d, 0.0);
          continue;
        }
        kiln::common::softmaxRow(
            len, p.scale, d, o, scores,
            [&](int j) {
              const std::uint16_t* k = p.k_cache + cacheIndex(p, b, j, kvh);
              double dot = 0.0;
              for (std::size_t i = 0; i < d; ++i) dot += dec(q[i]) * dec(k[i]);
              return dot;
            },
            [&](int j, double w, double* acc) {
              const std::uint16_t* v = p.v_cache + cacheIndex(p, b, j, kvh);
              for (std::size_t i = 0; i < d; ++i) acc[i] += w * dec(v[i]);
            });
      }
    }
  }
}

// ||got - ref||_2 / ||ref||_2 over n elements (||got - ref||_2 when ref is all zero). NaN in
// `got` gives NaN, which fails every `<= bound` check.
inline double relativeL2(Format f, std::size_t n, const std::uint16_t* got, const double* ref) {
  const Decoder dec(f);
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = dec(got[i]) - ref[i];
    diff += e * e;
    norm += ref[i] * ref[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace kiln::decodeattn::reference
