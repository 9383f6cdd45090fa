// Host reference for the fmha group, in float64, for the GPU numerics test and the CPU tests:
// prefill attention over a packed ragged batch with the semantics of the runner's contract
// (kernels/fmha/runner/include/kiln/runners/fmha.h): cumulative offsets per sequence, GQA head
// mapping, causal masks aligned to the bottom right, the natural-log lse [q_heads, total_q], and
// out = 0, lse = -inf for a query that sees no key.
// Header-only, no CUDA headers. Inputs are float64 arrays holding the exact values of the 16-bit
// inputs (decode them once with Decoder); it is deliberately the plainest loop nest, one query row
// at a time, so that a caller can spread rows over threads and the CPU tests can check it on
// hand-computed cases of head dim 2.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "common/attention_reference.h"
#include "common/bits16.h"

namespace kiln::fmha::reference {

// The 16-bit codec (common/bits16.h), under the names this reference's callers use.
using common::Decoder;
using common::Format;
using common::formatName;
using common::toDouble;

// How many keys query i (0-based within its sequence) of a sequence with sq queries and sk keys
// sees: all sk without a mask; with the bottom-right causal mask, the keys j <= i + sk - sq
// (FlashAttention's definition), clamped to [0, sk]. Keys are always a prefix of the sequence's.
inline int visibleKeys(bool causal, int i, int sq, int sk) {
  if (!causal) return sk;
  return std::clamp(i + sk - sq + 1, 0, sk);
}

// The keys [begin, end) query i sees with a sliding window too: window_left = W >= 0 (causal
// only; FlashAttention's window_size_left) keeps keys j >= i + sk - sq - W of the causal prefix,
// at most W + 1 of them; W = -1 is no window.
struct KeyRange {
  int begin = 0;
  int end = 0;
  int count() const { return end > begin ? end - begin : 0; }
};
inline KeyRange visibleRange(bool causal, int window_left, int i, int sq, int sk) {
  KeyRange r;
  r.end = visibleKeys(causal, i, sq, sk);
  if (causal && window_left >= 0) r.begin = std::clamp(i + sk - sq - window_left, 0, sk);
  return r;
}

// One problem in the runner's layouts (fmha.h), values as float64:
//   q [total_q, q_heads, head_dim], k / v [total_k, kv_heads, head_dim],
//   cu_seqlens_q / cu_seqlens_k [batch + 1], non-decreasing from 0.
struct Problem {
  bool causal = false;
  int window_left = -1;  // causal only: visibleRange
  int batch = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  double scale = 1.0;
  const std::int32_t* cu_seqlens_q = nullptr;
  const std::int32_t* cu_seqlens_k = nullptr;
  const double* q = nullptr;
  const double* k = nullptr;
  const double* v = nullptr;

  int totalQ() const { return cu_seqlens_q[batch]; }
  int totalK() const { return cu_seqlens_k[batch]; }
};

// Query i of sequence b, query head h (KV head h / (q_heads / kv_heads)):
//   s_j = scale * q[t, h] . k[j, kvh] over the n visible keys j (visibleRange),
//   out[t, h, :] = sum_j exp(s_j - lse) v[j, kvh, :],  lse[h, t] = log(sum_j exp(s_j))
// with t = cu_seqlens_q[b] + i. n = 0: out = 0, lse = -inf. `out` is [total_q, q_heads,
// head_dim] and `lse` [q_heads, total_q] (nullptr: not computed), both unrounded; only this row's
// elements are written, so rows may be computed concurrently. `scores` is scratch space.
inline void attendQuery(const Problem& p, int b, int h, int i, std::vector<double>& scores,
                        double* out, double* lse) {
  const auto d = static_cast<std::size_t>(p.head_dim);
  const int sq = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  const int sk = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
  const int kvh = h / (p.q_heads / p.kv_heads);
  const std::size_t t = static_cast<std::size_t>(p.cu_seqlens_q[b]) + i;
  const double* q = p.q + (t * p.q_heads + h) * d;
  double* o = out + (t * p.q_heads + h) * d;
  const KeyRange range = visibleRange(p.causal, p.window_left, i, sq, sk);
  // Row j of the visible keys of K or V for this head: key cu_seqlens_k[b] + range.begin + j, KV
  // head kvh.
  auto kvRow = [&](const double* base, int j) {
    return base +
           ((static_cast<std::size_t>(p.cu_seqlens_k[b]) + range.begin + j) * p.kv_heads + kvh) * d;
  };

  const int n = range.count();
  if (n <= 0) {
    std::fill(o, o + d, 0.0);
    if (lse != nullptr)
      lse[static_cast<std::size_t>(h) * p.totalQ() + t] = -std::numeric_limits<double>::infinity();
    return;
  }
  const double row_lse = kiln::common::softmaxRow(
      n, p.scale, d, o, scores,
      [&](int j) {
        const double* k = kvRow(p.k, j);
        double dot = 0.0;
        for (std::size_t c = 0; c < d; ++c) dot += q[c] * k[c];
        return dot;
      },
      [&](int j, double w, double* acc) {
        const double* v = kvRow(p.v, j);
        for (std::size_t c = 0; c < d; ++c) acc[c] += w * v[c];
      });
  if (lse != nullptr) lse[static_cast<std::size_t>(h) * p.totalQ() + t] = row_lse;
}

// The whole problem, one row after another: out [total_q, q_heads, head_dim], lse [q_heads,
// total_q] or nullptr.
inline void attention(const Problem& p, double* out, double* lse) {
  std::vector<double> scores;
  for (int b = 0; b < p.batch; ++b) {
    const int sq = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
    for (int h = 0; h < p.q_heads; ++h) {
      for (int i = 0; i < sq; ++i) attendQuery(p, b, h, i, scores, out, lse);
    }
  }
}

// ||got - ref||_2 / ||ref||_2 over n elements (||got - ref||_2 when ref is all zero). NaN in
// `got` gives NaN, which fails every `<= bound` check.
inline double relativeL2(const Decoder& dec, std::size_t n, const std::uint16_t* got,
                         const double* ref) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = dec(got[i]) - ref[i];
    diff += e * e;
    norm += ref[i] * ref[i];
  }
  return norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace kiln::fmha::reference
