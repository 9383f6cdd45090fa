// Host reference for the qkrope group, in float64, for the GPU numerics test and the CPU tests:
// what Hugging Face transformers computes for Qwen3's q_norm / k_norm and NeoX rotary embedding,
// with the roundings the kernel does. Header-only, no CUDA headers: 16-bit values travel as their
// bit patterns (uint16_t) and are decoded exactly (common/bits16.h).
//
// The reference mirrors the kernel's deliberate roundings, which are HF's: inv_freq in fp32
// (rope.h, the same function the runner uses), the angle as the fp32 product fl32(fl32(position) *
// inv_freq[i]), and cos / sin of that angle rounded to the dtype before they multiply. The norm,
// the weight and the rotation are exact here (fp32 in the kernel) and the outputs are returned
// unrounded, so the error measured against them includes the kernel's final rounding. Any head dim
// and rotary dim (even) work, so the CPU tests check it on hand-computed cases of four dimensions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "common/bits16.h"
#include "qkrope/rope.h"

namespace kiln::qkrope::reference {

// The 16-bit codec (common/bits16.h), under the names this reference's callers use.
using common::Decoder;
using common::Format;
using common::formatName;
using common::roundToBits;
using common::roundToFormat;
using common::toDouble;

// The two page layouts of the runner's KvLayout: NHD [num_pages, page_size, kv_heads, head_dim],
// HND [num_pages, kv_heads, page_size, head_dim].
enum class Layout { kNHD, kHND };

inline constexpr const char* layoutName(Layout l) {
  return l == Layout::kNHD ? "nhd" : "hnd";
}

// Element index of (cache slot `slot` = page * page_size + row, kv head, dim 0) in a cache.
inline std::size_t cacheElement(Layout layout, int page_size, int kv_heads, int head_dim,
                                std::int64_t slot, int kv_head) {
  const auto page = static_cast<std::size_t>(slot / page_size);
  const auto row = static_cast<std::size_t>(slot % page_size);
  const std::size_t in_page = layout == Layout::kNHD
                                  ? row * kv_heads + static_cast<std::size_t>(kv_head)
                                  : static_cast<std::size_t>(kv_head) * page_size + row;
  return (page * page_size * kv_heads + in_page) * static_cast<std::size_t>(head_dim);
}

// cos and sin of rotation pair i at `position`, as the kernel multiplies by them.
struct Rotation {
  double cos = 1.0, sin = 0.0;
};
inline Rotation rotation(Format f, float theta, int rotary_dim, std::int64_t position, int i) {
  const float angle = static_cast<float>(position) * invFreq(theta, rotary_dim, i);  // fp32
  return {roundToFormat(std::cos(static_cast<double>(angle)), f),
          roundToFormat(std::sin(static_cast<double>(angle)), f)};
}

// One head of x [head_dim] -> out [head_dim], unrounded: x / sqrt(mean(x^2) + eps) * weight (when
// `weight` is not null), then the NeoX rotation of dims [0, rotary_dim) at `position`.
inline void normRopeHead(const Decoder& dec, Format f, int head_dim, int rotary_dim, float theta,
                         std::int64_t position, const std::uint16_t* x, const std::uint16_t* weight,
                         double eps, double* out) {
  double scale = 1.0;
  if (weight != nullptr) {
    double sum_sq = 0.0;
    for (int i = 0; i < head_dim; ++i) sum_sq += dec(x[i]) * dec(x[i]);
    scale = 1.0 / std::sqrt(sum_sq / head_dim + eps);
  }
  for (int i = 0; i < head_dim; ++i) {
    out[i] = dec(x[i]) * scale * (weight != nullptr ? dec(weight[i]) : 1.0);
  }
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    const Rotation r = rotation(f, theta, rotary_dim, position, i);
    const double a = out[i], b = out[i + half];
    out[i] = a * r.cos - b * r.sin;
    out[i + half] = b * r.cos + a * r.sin;
  }
}

// One problem in the kernel's layouts (kiln/runners/qkrope.h): qkv [tokens, q_heads + 2 *
// kv_heads, head_dim], positions [tokens]; weights [head_dim] when qk_norm.
struct Problem {
  Format format = Format::kBFloat16;
  int tokens = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  int rotary_dim = 0;  // the rotated dims (the kernel's: 0 is not resolved here)
  float theta = 10000.0f;
  bool qk_norm = false;
  double eps = 0.0;  // the float the kernel was given
  const std::uint16_t* qkv = nullptr;
  const std::int64_t* positions = nullptr;
  const std::uint16_t* q_norm_weight = nullptr;
  const std::uint16_t* k_norm_weight = nullptr;
};

// q [tokens, q_heads, head_dim] and k [tokens, kv_heads, head_dim] after norm and rotation,
// unrounded (v is qkv's v heads, unchanged: the kernel copies it bit for bit).
inline void qkNormRope(const Problem& p, double* q, double* k) {
  const Decoder dec(p.format);
  const int heads = p.q_heads + 2 * p.kv_heads;
  const auto d = static_cast<std::size_t>(p.head_dim);
  for (int t = 0; t < p.tokens; ++t) {
    for (int h = 0; h < p.q_heads + p.kv_heads; ++h) {
      const bool is_q = h < p.q_heads;
      const std::uint16_t* x = p.qkv + (static_cast<std::size_t>(t) * heads + h) * d;
      const std::uint16_t* w = p.qk_norm ? (is_q ? p.q_norm_weight : p.k_norm_weight) : nullptr;
      double* out = is_q ? q + (static_cast<std::size_t>(t) * p.q_heads + h) * d
                         : k + (static_cast<std::size_t>(t) * p.kv_heads + h - p.q_heads) * d;
      normRopeHead(dec, p.format, p.head_dim, p.rotary_dim, p.theta, p.positions[t], x, w, p.eps,
                   out);
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

}  // namespace kiln::qkrope::reference
