// Host reference for the w4a16 group, in float64, for the GPU numerics test, the CPU tests and the
// benchmark's checks. Header-only, no CUDA headers: 16-bit values travel as their bit patterns
// (uint16_t) through the exact codec of common/bits16.h.
//
// Three forms of the same int4 matrix, and the maps between them:
//   Quantized   the logical form: q[n][k] in 0..15, scales[k / g][n] (16-bit bits, in the
//               checkpoint's scale format), zeros[k / g][n] in 0..16 (empty: symmetric, z = 8)
//   GPTQ / AWQ  the checkpoints' int32 tensors (packGptq, packAwq), read back by the published
//               dequantization formulas (dequantGptq, dequantAwq)
//   Packed      kiln's layout (w4a16_layout.h), written by repack() on the device and by
//               repackHost() here, read by dequantPacked()
// linear() is the operation itself: y = x . w^T (+ bias), unrounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/bits16.h"
#include "w4a16/w4a16_layout.h"

namespace kiln::w4a16::reference {

using common::Decoder;
using common::Format;
using common::roundToBits;

struct Quantized {
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t group = 128;
  Format scale_format = Format::kFloat16;  // of `scales`
  std::vector<std::uint8_t> q;             // [n][k], 0..15
  std::vector<std::uint16_t> scales;       // [k / group][n]
  std::vector<std::uint8_t> zeros;         // [k / group][n], 0..16; empty: symmetric (z = 8)
  std::int64_t groups() const { return k / group; }
  int zero(std::int64_t g, std::int64_t row) const {
    return zeros.empty() ? 8 : zeros[static_cast<std::size_t>(g * n + row)];
  }
};

struct Checkpoint {
  std::vector<std::int32_t> qweight;  // GPTQ [k / 8][n]; AWQ [k][n / 8]
  std::vector<std::int32_t> qzeros;   // [k / group][n / 8]; empty when the source has none
};

inline std::int32_t setNibble(std::int32_t word, int nibble, unsigned value) {
  const auto u = static_cast<std::uint32_t>(word) | ((value & 0xFu) << (4 * nibble));
  return static_cast<std::int32_t>(u);
}
inline unsigned getNibble(std::int32_t word, int nibble) {
  return (static_cast<std::uint32_t>(word) >> (4 * nibble)) & 0xFu;
}

// AutoGPTQ's v1 packing: 8 consecutive K of one column per int32 (k % 8 in nibble k % 8); zero
// points of 8 consecutive columns per int32, each stored as z - 1 (so z must be 1..16).
inline Checkpoint packGptq(const Quantized& w) {
  Checkpoint c;
  c.qweight.assign(static_cast<std::size_t>(w.k / 8 * w.n), 0);
  for (std::int64_t row = 0; row < w.n; ++row) {
    for (std::int64_t col = 0; col < w.k; ++col) {
      auto& word = c.qweight[static_cast<std::size_t>(col / 8 * w.n + row)];
      word = setNibble(word, static_cast<int>(col % 8),
                       w.q[static_cast<std::size_t>(row * w.k + col)]);
    }
  }
  if (!w.zeros.empty()) {
    c.qzeros.assign(static_cast<std::size_t>(w.groups() * (w.n / 8)), 0);
    for (std::int64_t g = 0; g < w.groups(); ++g) {
      for (std::int64_t row = 0; row < w.n; ++row) {
        auto& word = c.qzeros[static_cast<std::size_t>(g * (w.n / 8) + row / 8)];
        word =
            setNibble(word, static_cast<int>(row % 8), static_cast<unsigned>(w.zero(g, row) - 1));
      }
    }
  }
  return c;
}

// AutoAWQ's GEMM packing: 8 consecutive columns of one K per int32, column 8 j + c in nibble
// awqNibble(c); zero points packed the same way, stored as z (0..15).
inline Checkpoint packAwq(const Quantized& w) {
  Checkpoint c;
  c.qweight.assign(static_cast<std::size_t>(w.k * (w.n / 8)), 0);
  for (std::int64_t row = 0; row < w.n; ++row) {
    for (std::int64_t col = 0; col < w.k; ++col) {
      auto& word = c.qweight[static_cast<std::size_t>(col * (w.n / 8) + row / 8)];
      word = setNibble(word, layout::awqNibble(static_cast<int>(row % 8)),
                       w.q[static_cast<std::size_t>(row * w.k + col)]);
    }
  }
  if (!w.zeros.empty()) {
    c.qzeros.assign(static_cast<std::size_t>(w.groups() * (w.n / 8)), 0);
    for (std::int64_t g = 0; g < w.groups(); ++g) {
      for (std::int64_t row = 0; row < w.n; ++row) {
        auto& word = c.qzeros[static_cast<std::size_t>(g * (w.n / 8) + row / 8)];
        word = setNibble(word, layout::awqNibble(static_cast<int>(row % 8)),
                         static_cast<unsigned>(w.zero(g, row)));
      }
    }
  }
  return c;
}

// The published dequantizations, written from the checkpoints' tensors alone, [n][k]:
//   GPTQ: w[k][n] = scales[k / g][n] * (q - (zeros_stored + 1)); 8 when qzeros is empty
//   AWQ:  w[k][n] = (q - z) * scales[k / g][n]; 8 when qzeros is empty
inline std::vector<double> dequantGptq(const Checkpoint& c,
                                       const std::vector<std::uint16_t>& scales,
                                       Format scale_format, std::int64_t n, std::int64_t k,
                                       std::int64_t group) {
  const Decoder dec(scale_format);
  std::vector<double> w(static_cast<std::size_t>(n * k));
  for (std::int64_t col = 0; col < k; ++col) {
    for (std::int64_t row = 0; row < n; ++row) {
      const double q = getNibble(c.qweight[static_cast<std::size_t>(col / 8 * n + row)],
                                 static_cast<int>(col % 8));
      const std::int64_t g = col / group;
      const double z = c.qzeros.empty()
                           ? 8.0
                           : getNibble(c.qzeros[static_cast<std::size_t>(g * (n / 8) + row / 8)],
                                       static_cast<int>(row % 8)) +
                                 1.0;
      w[static_cast<std::size_t>(row * k + col)] =
          dec(scales[static_cast<std::size_t>(g * n + row)]) * (q - z);
    }
  }
  return w;
}

inline std::vector<double> dequantAwq(const Checkpoint& c, const std::vector<std::uint16_t>& scales,
                                      Format scale_format, std::int64_t n, std::int64_t k,
                                      std::int64_t group) {
  const Decoder dec(scale_format);
  std::vector<double> w(static_cast<std::size_t>(n * k));
  for (std::int64_t col = 0; col < k; ++col) {
    for (std::int64_t row = 0; row < n; ++row) {
      const int nibble = layout::awqNibble(static_cast<int>(row % 8));
      const double q =
          getNibble(c.qweight[static_cast<std::size_t>(col * (n / 8) + row / 8)], nibble);
      const std::int64_t g = col / group;
      const double z =
          c.qzeros.empty()
              ? 8.0
              : getNibble(c.qzeros[static_cast<std::size_t>(g * (n / 8) + row / 8)], nibble);
      w[static_cast<std::size_t>(row * k + col)] =
          (q - z) * dec(scales[static_cast<std::size_t>(g * n + row)]);
    }
  }
  return w;
}

struct Packed {
  std::vector<std::uint32_t> weight;  // n * k / 8 words
  std::vector<std::uint16_t> scales;  // [k / group][n] of the dtype, pair order
  std::vector<std::uint16_t> zeros;   // [k / group][n] of the dtype, pair order; empty: symmetric
};

// kiln's layout from the logical form: what repack() must write, bit for bit, from either
// checkpoint of `w` (scales rounded to `dtype` to nearest even, zero points as dtype integers).
inline Packed repackHost(const Quantized& w, Format dtype) {
  Packed p;
  p.weight.assign(static_cast<std::size_t>(w.n * w.k / 8), 0u);
  for (std::int64_t word = 0; word < static_cast<std::int64_t>(p.weight.size()); ++word) {
    std::uint32_t out = 0;
    for (int nibble = 0; nibble < 8; ++nibble) {
      const layout::WeightIndex at = layout::weightOf(word, nibble, w.k);
      out |= static_cast<std::uint32_t>(w.q[static_cast<std::size_t>(at.row * w.k + at.col)])
             << (4 * nibble);
    }
    p.weight[static_cast<std::size_t>(word)] = out;
  }
  const Decoder scale_dec(w.scale_format);
  const std::size_t count = static_cast<std::size_t>(w.groups() * w.n);
  p.scales.resize(count);
  if (!w.zeros.empty()) p.zeros.resize(count);
  for (std::int64_t g = 0; g < w.groups(); ++g) {
    for (std::int64_t pos = 0; pos < w.n; ++pos) {
      const std::int64_t row = layout::scaleRowOf(pos);
      const std::size_t i = static_cast<std::size_t>(g * w.n + pos);
      p.scales[i] =
          roundToBits(scale_dec(w.scales[static_cast<std::size_t>(g * w.n + row)]), dtype);
      if (!w.zeros.empty()) p.zeros[i] = roundToBits(static_cast<double>(w.zero(g, row)), dtype);
    }
  }
  return p;
}

// The weights kiln's layout holds, [n][k]: (q - z) * scale with z = 8 when `zeros` is empty.
inline std::vector<double> dequantPacked(const Packed& p, Format dtype, std::int64_t n,
                                         std::int64_t k, std::int64_t group) {
  const Decoder dec(dtype);
  std::vector<double> w(static_cast<std::size_t>(n * k));
  std::vector<std::int64_t> position(static_cast<std::size_t>(n));  // row -> scale position
  for (std::int64_t pos = 0; pos < n; ++pos) {
    position[static_cast<std::size_t>(layout::scaleRowOf(pos))] = pos;
  }
  for (std::int64_t word = 0; word < n * k / 8; ++word) {
    for (int nibble = 0; nibble < 8; ++nibble) {
      const layout::WeightIndex at = layout::weightOf(word, nibble, k);
      const std::size_t s =
          static_cast<std::size_t>(at.col / group * n + position[static_cast<std::size_t>(at.row)]);
      const double q = (p.weight[static_cast<std::size_t>(word)] >> (4 * nibble)) & 0xFu;
      const double z = p.zeros.empty() ? 8.0 : dec(p.zeros[s]);
      w[static_cast<std::size_t>(at.row * k + at.col)] = (q - z) * dec(p.scales[s]);
    }
  }
  return w;
}

// y[r][c] = sum_j x[r][j] * w[c][j] (+ bias[c]) for one output, unrounded.
// `dec` decodes the dtype (a Decoder is a 64k-entry table: build it once per matrix).
inline double linearAt(const Decoder& dec, std::int64_t k, const std::uint16_t* x_row,
                       const double* w_row, const std::uint16_t* bias, std::int64_t c) {
  double sum = 0.0;
  for (std::int64_t j = 0; j < k; ++j) sum += dec(x_row[j]) * w_row[j];
  return bias != nullptr ? sum + dec(bias[c]) : sum;
}

// y = x . w^T (+ bias), [m][n], unrounded. x: [m][k] bits, w: [n][k], bias: [n] bits or null.
inline std::vector<double> linear(Format dtype, std::int64_t m, std::int64_t n, std::int64_t k,
                                  const std::uint16_t* x, const std::vector<double>& w,
                                  const std::uint16_t* bias) {
  const Decoder dec(dtype);
  std::vector<double> y(static_cast<std::size_t>(m * n));
  for (std::int64_t r = 0; r < m; ++r) {
    for (std::int64_t c = 0; c < n; ++c) {
      y[static_cast<std::size_t>(r * n + c)] =
          linearAt(dec, k, x + r * k, w.data() + c * k, bias, c);
    }
  }
  return y;
}

}  // namespace kiln::w4a16::reference
