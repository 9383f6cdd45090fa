// kiln's packed int4 layout, as one pair of index maps shared by the repack kernels, the host
// reference and the tests (README.md, "Layouts", draws it). Plain C++, host and device.
//
// The weights: [n / 16][k / 64][32 lanes][4 words] of uint32, 8 nibbles per word. Word j of lane
// l = 4 * g + t in tile (row tile r, chunk c) holds the 8 weights that lane's mma.sync A fragment
// needs in k-step j of the chunk: nibble i + 4 * h (bits 4 * (i + 4 h) .. + 3) is
//     W[16 r + g + 8 (i & 1)][64 c + 16 t + 4 j + 2 (i >> 1) + h]
// so register i of the fragment is the nibble pair (i, i + 4), which one mask (and for fp16 one
// shift by 8) turns into two 16-bit values. K is permuted inside the chunk (lane t's four k-steps
// cover K 16 t .. 16 t + 15) so that the same lane's x fragment is 32 contiguous bytes of a token.
//
// Scales and zero points: [k / group][n], the 16 rows of each tile in pair order: position
// 16 r + 2 p + h holds row 16 r + p + 8 h, so a lane reads the (g, g + 8) pair as one 32-bit word.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace kiln::w4a16::layout {

struct WeightIndex {
  std::int64_t row;  // output feature, [0, n)
  std::int64_t col;  // K, [0, k)
};

// The weight held by nibble `nibble` (0..7) of packed word `word` of an n x k matrix.
KILN_HOST_DEVICE constexpr WeightIndex weightOf(std::int64_t word, int nibble, std::int64_t k) {
  const std::int64_t chunks = k / 64;
  const int j = static_cast<int>(word % 4);
  const int lane = static_cast<int>((word / 4) % 32);
  const std::int64_t tile = word / 128;  // (row tile, chunk), row-tile major
  const std::int64_t r = tile / chunks;
  const std::int64_t c = tile % chunks;
  const int g = lane / 4;
  const int t = lane % 4;
  const int i = nibble % 4;
  const int h = nibble / 4;
  return WeightIndex{16 * r + g + 8 * (i & 1), 64 * c + 16 * t + 4 * j + 2 * (i >> 1) + h};
}

// The row whose scale (and zero point) sits at position `position` of a [.][n] scale row.
KILN_HOST_DEVICE constexpr std::int64_t scaleRowOf(std::int64_t position) {
  const std::int64_t p = position % 16;
  return position - p + p / 2 + 8 * (p % 2);
}

// AWQ packs 8 columns per int32 in the order 0, 2, 4, 6, 1, 3, 5, 7: column 8 q + c sits in nibble
// awqNibble(c) (AutoAWQ's AWQ_ORDER / AWQ_REVERSE_ORDER).
KILN_HOST_DEVICE constexpr int awqNibble(int column_in_word) {
  return (column_in_word % 2) * 4 + column_in_word / 2;  // 0, 4, 1, 5, 2, 6, 3, 7
}

}  // namespace kiln::w4a16::layout
