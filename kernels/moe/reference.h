// Host reference for the moe group, in float64, for the GPU numerics test, the CPU tests and the
// benchmark's checks. Header-only, no CUDA headers: 16-bit values travel as their bit patterns
// (uint16_t) through the exact codec of common/bits16.h.
//
// The block step by step, as kiln/runners/moe.h defines it:
//   route()       softmax of each token's logits, its top k (larger probability first, the lower
//                 expert on ties), their weights, renormalised when asked
//   expertRows()  the expert rows the align step makes: each expert's slots (t * k + j), as a set
//   act(), down() one expert row of FC1 (SiLU(gate) * up) and of FC2, rounded to the dtype as the
//                 kernels round them
//   output()      one output row: the weighted sum of a token's k rows of down (+ residual),
//                 unrounded (the kernel rounds it once)
// Each step takes the previous step's rounded results, so a test can check each step alone
// against the device's own inputs to it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <vector>

#include "common/bits16.h"

namespace kiln::moe::reference {

using common::Decoder;
using common::Format;
using common::roundToBits;
using common::roundToFormat;

struct Shape {
  std::int64_t tokens = 0;
  int experts = 0;
  int top_k = 0;
  std::int64_t hidden = 0;
  std::int64_t intermediate = 0;
};

struct Routing {
  std::vector<std::int32_t> ids;  // [T, k]
  std::vector<double> weights;    // [T, k]
  std::vector<double> probs;      // [T, k]: the softmax probability of each choice, unnormalised
};

// Softmax of `logits` ([T, E], already decoded) and the top k of each row.
inline Routing route(const std::vector<double>& logits, const Shape& s, bool renormalize) {
  Routing r;
  const auto k = static_cast<std::size_t>(s.top_k);
  r.ids.resize(static_cast<std::size_t>(s.tokens) * k);
  r.weights.resize(r.ids.size());
  r.probs.resize(r.ids.size());
  std::vector<double> p(static_cast<std::size_t>(s.experts));
  std::vector<std::int32_t> order(p.size());
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    const double* row = logits.data() + t * s.experts;
    const double max_logit = *std::max_element(row, row + s.experts);
    double sum = 0.0;
    for (int e = 0; e < s.experts; ++e) sum += (p[e] = std::exp(row[e] - max_logit));
    for (int e = 0; e < s.experts; ++e) p[e] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int32_t a, std::int32_t b) { return p[a] > p[b]; });
    double chosen = 0.0;
    for (std::size_t j = 0; j < k; ++j) chosen += p[order[j]];
    for (std::size_t j = 0; j < k; ++j) {
      const std::size_t slot = static_cast<std::size_t>(t) * k + j;
      r.ids[slot] = order[j];
      r.probs[slot] = p[order[j]];
      r.weights[slot] = renormalize ? p[order[j]] / chosen : p[order[j]];
    }
  }
  return r;
}

// The slots routed to each expert, ascending: [E][rows of e].
inline std::vector<std::vector<std::int32_t>> expertRows(const std::vector<std::int32_t>& ids,
                                                         int experts) {
  std::vector<std::vector<std::int32_t>> rows(static_cast<std::size_t>(experts));
  for (std::size_t slot = 0; slot < ids.size(); ++slot) {
    rows[static_cast<std::size_t>(ids[slot])].push_back(static_cast<std::int32_t>(slot));
  }
  return rows;
}

// What the align step writes for `ids`: expert_offsets and tile_offsets ([E + 1] each, the tile
// being `block_m` rows).
struct Offsets {
  std::vector<std::int32_t> experts;
  std::vector<std::int32_t> tiles;
};

inline Offsets offsets(const std::vector<std::int32_t>& ids, int experts, int block_m) {
  Offsets o;
  o.experts.assign(static_cast<std::size_t>(experts) + 1, 0);
  o.tiles.assign(static_cast<std::size_t>(experts) + 1, 0);
  std::vector<std::int32_t> counts(static_cast<std::size_t>(experts), 0);
  for (const std::int32_t e : ids) ++counts[static_cast<std::size_t>(e)];
  for (int e = 0; e < experts; ++e) {
    o.experts[e + 1] = o.experts[e] + counts[e];
    o.tiles[e + 1] = o.tiles[e] + (counts[e] + block_m - 1) / block_m;
  }
  return o;
}

inline double silu(double g) {
  return g / (1.0 + std::exp(-g));
}

// One expert row of FC1: out[i] = SiLU(x . gate_i) * (x . up_i), i < I, rounded to the format.
// x: [H] decoded; w1e: expert e's [2I, H] as bit patterns of the format.
inline void act(const double* x, const std::uint16_t* w1e, const Shape& s, const Decoder& dec,
                Format f, double* out) {
  const std::int64_t h = s.hidden, inter = s.intermediate;
  for (std::int64_t i = 0; i < inter; ++i) {
    const std::uint16_t* gate = w1e + i * h;
    const std::uint16_t* up = w1e + (inter + i) * h;
    double g = 0.0, u = 0.0;
    for (std::int64_t c = 0; c < h; ++c) {
      g += x[c] * dec(gate[c]);
      u += x[c] * dec(up[c]);
    }
    out[i] = roundToFormat(silu(g) * u, f);
  }
}

// One expert row of FC2: out[c] = a . w2e[c], c < H, rounded to the format. a: [I] decoded;
// w2e: expert e's [H, I] as bit patterns.
inline void down(const double* a, const std::uint16_t* w2e, const Shape& s, const Decoder& dec,
                 Format f, double* out) {
  for (std::int64_t c = 0; c < s.hidden; ++c) {
    const std::uint16_t* w = w2e + c * s.intermediate;
    double sum = 0.0;
    for (std::int64_t i = 0; i < s.intermediate; ++i) sum += a[i] * dec(w[i]);
    out[c] = roundToFormat(sum, f);
  }
}

// One output row, unrounded: sum_j weights[j] * down_rows[j][c] (+ residual[c]).
inline void output(const double* weights, const std::vector<const double*>& down_rows,
                   const double* residual, std::int64_t hidden, double* out) {
  for (std::int64_t c = 0; c < hidden; ++c) {
    double sum = 0.0;
    for (std::size_t j = 0; j < down_rows.size(); ++j) sum += weights[j] * down_rows[j][c];
    out[c] = sum + (residual != nullptr ? residual[c] : 0.0);
  }
}

}  // namespace kiln::moe::reference
