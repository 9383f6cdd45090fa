// The float64 softmax-attention row that every attention group's host reference (reference.h)
// computes, written once: each group supplies how it reads a key's dot product and a value row
// from its own layout (paged cache, varlen tensors), this header the softmax around them. Host
// only; no CUDA.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace kiln::common {

// o[0, d) = sum_{j < n} softmax_j(scale * dot(j)) v_j, for n >= 1 keys, where dot(j) returns the
// query's dot product with key j and add_value(j, w, o) adds w * v_j into o (o is zeroed first).
// Returns the row's log-sum-exp, log(sum_j exp(scale * dot(j))). `scores` is scratch space.
template <typename Dot, typename AddValue>
double softmaxRow(int n, double scale, std::size_t d, double* o, std::vector<double>& scores,
                  Dot dot, AddValue add_value) {
  std::fill(o, o + d, 0.0);
  scores.assign(static_cast<std::size_t>(n), 0.0);
  double max_score = -std::numeric_limits<double>::infinity();
  for (int j = 0; j < n; ++j) {
    scores[j] = scale * dot(j);
    max_score = std::max(max_score, scores[j]);
  }
  double sum = 0.0;
  for (int j = 0; j < n; ++j) {
    const double w = std::exp(scores[j] - max_score);
    sum += w;
    add_value(j, w, o);
  }
  for (std::size_t c = 0; c < d; ++c) o[c] /= sum;
  return max_score + std::log(sum);
}

}  // namespace kiln::common
