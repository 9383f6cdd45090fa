// Device code of the fmha group's portable kernel: prefill attention on mma.sync, ldmatrix and
// cp.async, one source for sm_80 through sm_120 (FlashAttention-2's algorithm, our code).
//
// Why this shape.
//   - A block owns kBlockM rows of one (sequence, KV head): the rows are (query token, query head
//     of the KV head's group) pairs, token-major ("packed GQA"), so a GQA group shares every K and
//     V tile the block loads, and 2-8 verification tokens x a group of 4-8 heads fill the mma rows
//     that one token per block would leave empty. Each of the kWarps warps owns kMTiles x 16 of
//     the rows (launch.h: 4 warps of 32 rows for prefill at d64 / d128, so every K / V fragment
//     a warp loads from shared memory feeds two row tiles; 4 warps of 16 rows otherwise).
//   - K and V tiles of kBlockN keys stream through a ring of kStages (K, V) buffers in cp.async
//     groups: the loads of tile it + kStages - 1 are issued as tile it's compute starts, so each
//     tile has kStages - 1 tiles of compute to land in (one barrier per tile). Key tiles are walked
//     from the last to the first: the tiles that need the causal diagonal's or the ragged end's
//     mask come first, those that need the window's left-edge mask come last, and the tiles
//     between run unmasked.
//   - The sliding window (FlashAttention's window_size_left = W, with the causal right edge) is a
//     range of key tiles: tiles left of every row's window are never loaded.
//   - K / V rows are addressed per key: contiguous ragged tensors ([total_k, kv_heads, d], keys of
//     sequence b from cu_seqlens_k[b]) or the paged cache decodeattn reads (page table, page size
//     2^n, NHD or HND through two strides), so one kernel serves prefill, chunked prefill over a
//     cache and speculative verification.
//   - Shared-memory rows are XOR-swizzled by 16-byte chunk (chunk ^ row % 8), so the 8 rows of an
//     ldmatrix and the 16-byte cp.async writes are bank-conflict free.
// Scores stay in fp32 in the log2 domain (scale * log2(e) folded into one FMA before exp2); P is
// rounded once to the dtype for the P.V mma; row sums add the unrounded weights.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/dtype.cuh"
#include "common/sm80_mma.cuh"
#include "fmha/launch.h"
#include "fmha/params.h"

namespace kiln::fmha::mma {

inline constexpr unsigned kFullMask = 0xffffffffu;

// Byte offset of 16-byte chunk `chunk` of row `row` in a tile of rows of kRowBytes.
template <int kRowBytes>
__device__ __forceinline__ unsigned swizzled(int row, int chunk) {
  return static_cast<unsigned>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

// Where key `j` of the block's sequence and KV head starts, in elements from the K (or V) base.
struct KeyRows {
  const std::int32_t* page_row;  // the sequence's page-table row; nullptr: contiguous
  long long first;               // contiguous: offset of key 0; paged: the head's offset
  long long page_stride;
  int token_stride;
  int page_shift;
  int page_mask;
  int last_page;  // page ids are clamped to [0, last_page]

  __device__ __forceinline__ long long offset(int j) const {
    if (page_row == nullptr) return first + static_cast<long long>(j) * token_stride;
    int page = __ldg(page_row + (j >> page_shift));
    page = page < 0 ? 0 : (page > last_page ? last_page : page);
    return first + page * page_stride + static_cast<long long>(j & page_mask) * token_stride;
  }
};

// Issues the cp.async copies of a [kRows, kD] tile (rows `row0`.. of the operand) into swizzled
// shared memory at `tile`; rows at or past `valid_rows` are zero-filled, never read.
template <int kRows, int kD, int kThreads, typename RowOffset>
__device__ __forceinline__ void loadTile(unsigned tile, const unsigned short* base, int row0,
                                         int valid_rows, const RowOffset& row_offset) {
  constexpr int kChunks = kD / 8;  // 16-byte chunks per row
  constexpr int kRowsPerPass = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && kRows % kRowsPerPass == 0, "tile / thread mismatch");
  const int chunk = static_cast<int>(threadIdx.x) % kChunks;
#pragma unroll
  for (int r = static_cast<int>(threadIdx.x) / kChunks; r < kRows; r += kRowsPerPass) {
    const bool valid = r < valid_rows;
    const unsigned short* src = valid ? base + row_offset(row0 + r) + chunk * 8 : base;
    common::cpAsync16(tile + swizzled<kD * 2>(r, chunk), src, valid);
  }
}

// One block: rows [blockIdx.x' * kBlockM, ...) of the (token, group head) rows of KV head
// blockIdx.y of sequence blockIdx.z (blockIdx.x reversed for causal masks: longest rows first).
template <typename T, int kD, bool kCausal, int kWarps, int kMTiles>
__device__ __forceinline__ void attention(const FmhaMmaParams& p, unsigned char* smem) {
  constexpr Shape kShape{kWarps, kMTiles};
  constexpr int kThreads = threads(kShape);
  constexpr int kBlockM = blockM(kShape);
  constexpr int kWarpRows = 16 * kMTiles;
  constexpr int kBlockN = blockN(kD, kShape);
  constexpr int kStages = stages(kD, kShape);
  constexpr int kKvTileBytes = kBlockN * kD * 2;
  constexpr int kKSteps = kD / 16;      // k16 steps of Q K^T
  constexpr int kNTiles = kBlockN / 8;  // n8 tiles of S
  constexpr int kDTiles = kD / 8;       // n8 tiles of O
  // Q's fragments stay in registers when one row tile's fit beside the accumulators.
  constexpr bool kQInRegisters = kD <= 128 && kMTiles == 1;

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int group = lane / 4;  // the mma fragment's row within 8
  const int tid4 = lane % 4;   // the fragment's column pair

  const int b = static_cast<int>(blockIdx.z);
  const int kvh = static_cast<int>(blockIdx.y);
  const int m_block =
      kCausal ? p.m_blocks - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int G = p.group_size;

  // The sequence, clamped so that no access leaves the buffers (fmha.h: garbage in, no fault).
  const int q_start = min(max(__ldg(p.cu_seqlens_q + b), 0), p.total_q);
  const int sq = min(max(__ldg(p.cu_seqlens_q + b + 1), q_start), p.total_q) - q_start;
  int sk;
  KeyRows keys;
  keys.page_row = nullptr;
  keys.page_stride = p.page_stride;
  keys.token_stride = p.token_stride;
  keys.page_shift = p.page_size_log2;
  keys.page_mask = (1 << p.page_size_log2) - 1;
  keys.last_page = p.num_pages - 1;
  if (p.page_table != nullptr) {
    sk = min(max(__ldg(p.seq_lens_k + b), 0), p.max_pages_per_seq << p.page_size_log2);
    keys.page_row = p.page_table + static_cast<long long>(b) * p.max_pages_per_seq;
    keys.first = static_cast<long long>(kvh) * p.head_stride;
  } else {
    const int k_start = min(max(__ldg(p.cu_seqlens_k + b), 0), p.total_k);
    sk = min(max(__ldg(p.cu_seqlens_k + b + 1), k_start), p.total_k) - k_start;
    keys.first = static_cast<long long>(k_start) * p.token_stride +
                 static_cast<long long>(kvh) * p.head_stride;
  }

  const int rows = sq * G;  // this (sequence, KV head)'s packed rows
  const int row0 = m_block * kBlockM;
  if (row0 >= rows) return;
  const int row_end = min(row0 + kBlockM, rows);
  const int offset = sk - sq;  // bottom-right causal alignment: query i sees keys j <= i + offset
  const int window = p.window_left;

  // The key range every row of the block needs, in key tiles [n_lo, n_hi).
  const int i_first = row0 / G, i_last = (row_end - 1) / G;
  const int key_end = kCausal ? min(sk, i_last + offset + 1) : sk;
  const int key_begin = (kCausal && window >= 0) ? max(0, i_first + offset - window) : 0;
  const int n_lo = key_begin / kBlockN;
  const int n_hi = key_end > key_begin ? (key_end + kBlockN - 1) / kBlockN : n_lo;

  // This thread's rows: fragment rows group and group + 8 of each of its warp's row tiles.
  int r_a[kMTiles], token[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    r_a[mt] = row0 + warp * kWarpRows + mt * 16 + group;
    token[mt][0] = r_a[mt] / G;
    token[mt][1] = (r_a[mt] + 8) / G;
  }

  const auto* q_base = static_cast<const unsigned short*>(p.q);
  const auto* k_base = static_cast<const unsigned short*>(p.k);
  const auto* v_base = static_cast<const unsigned short*>(p.v);
  const long long q_row_stride = static_cast<long long>(p.q_heads) * kD;
  const long long q_first =
      static_cast<long long>(q_start) * q_row_stride + static_cast<long long>(kvh) * G * kD;
  // Packed row r -> its q / out row: token r / G, head kvh * G + r % G.
  auto qRow = [&](int r) {
    const int i = r / G;
    return q_first + i * q_row_stride + static_cast<long long>(r - i * G) * kD;
  };
  auto keyRow = [&](int j) { return keys.offset(j); };

  // Shared memory: Q, then kStages (K, V) tile pairs.
  const unsigned s_q = common::sharedAddress(smem);
  const unsigned s_kv = s_q + kBlockM * kD * 2;
  auto kTile = [&](int stage) { return s_kv + stage * 2 * kKvTileBytes; };
  auto vTile = [&](int stage) { return s_kv + stage * 2 * kKvTileBytes + kKvTileBytes; };
  // Loads key tile number `it` (counting from the last, n_hi - 1) into its stage, as one group;
  // past the last tile it commits an empty group, so that there is one group per tile.
  const int tiles = n_hi - n_lo;
  auto loadKv = [&](int it) {
    if (it < tiles) {
      const int key0 = (n_hi - 1 - it) * kBlockN;
      loadTile<kBlockN, kD, kThreads>(kTile(it % kStages), k_base, key0, sk - key0, keyRow);
      loadTile<kBlockN, kD, kThreads>(vTile(it % kStages), v_base, key0, sk - key0, keyRow);
    }
    common::cpAsyncCommit();
  };

  float o[kMTiles][kDTiles][4];
  float m[kMTiles][2];  // running max, log2 domain (scores x scale_log2)
  float l[kMTiles][2];  // this thread's part of the running sums
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  if (tiles > 0) {
    loadTile<kBlockM, kD, kThreads>(s_q, q_base, row0, row_end - row0,
                                    [&](int r) { return qRow(r); });
#pragma unroll
    for (int it = 0; it < kStages - 1; ++it) loadKv(it);  // Q joins the first group
  }

  unsigned q_frag[kQInRegisters ? kKSteps : 1][4];
  // ldmatrix lane addressing: A (Q) matrices are (rows +0/+8, chunk +0/+1) in that order; B from
  // K (keys +0/+8 by lane bit 4, chunk +0/+1 by bit 3); B from V transposed (keys +0/+8 by bit 3,
  // chunk +0/+1 by bit 4).
  const int a_row = warp * kWarpRows + (lane & 7) + ((lane >> 3) & 1) * 8;  // + 16 mt
  const int a_chunk = lane >> 4;
  const int k_row = (lane & 7) + ((lane >> 4) & 1) * 8;
  const int k_chunk = (lane >> 3) & 1;
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8;
  const int v_chunk = lane >> 4;

  for (int it = 0; it < tiles; ++it) {
    common::cpAsyncWait<kStages - 2>();
    __syncthreads();  // tile it (and Q) landed for every thread; every warp is done with it - 1
    loadKv(it + kStages - 1);  // into the stage of tile it - 1
    const int n = n_hi - 1 - it;
    const unsigned s_k = kTile(it % kStages);
    const unsigned s_v = vTile(it % kStages);
    if constexpr (kQInRegisters) {
      if (it == 0) {
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          common::ldmatrixX4(q_frag[kk], s_q + swizzled<kD * 2>(a_row, kk * 2 + a_chunk));
        }
      }
    }
    const int key0 = n * kBlockN;

    // S = Q K^T for this warp's rows and the tile's kBlockN keys: each K fragment loaded feeds
    // every row tile of the warp.
    float s[kMTiles][kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
        s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kKSteps; ++kk) {
      unsigned a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        if constexpr (kQInRegisters) {
          a[mt][0] = q_frag[kk][0], a[mt][1] = q_frag[kk][1], a[mt][2] = q_frag[kk][2],
          a[mt][3] = q_frag[kk][3];
        } else {
          common::ldmatrixX4(a[mt], s_q + swizzled<kD * 2>(a_row + mt * 16, kk * 2 + a_chunk));
        }
      }
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        unsigned bk[4];
        common::ldmatrixX4(bk, s_k + swizzled<kD * 2>(np * 16 + k_row, kk * 2 + k_chunk));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          common::mma16816<T>(s[mt][2 * np], a[mt], bk[0], bk[1]);
          common::mma16816<T>(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Masks, where this tile needs one: keys past the sequence, right of the causal diagonal or
    // left of the window.
    const bool needs_mask = key0 + kBlockN > sk ||
                            (kCausal && key0 + kBlockN - 1 > i_first + offset) ||
                            (kCausal && window >= 0 && key0 < i_last + offset - window);
    if (needs_mask) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int key = key0 + j * 8 + tid4 * 2 + (e & 1);
            const int i = token[mt][e >> 1];
            bool visible = key < sk;
            if constexpr (kCausal) {
              visible = visible && key <= i + offset && (window < 0 || key >= i + offset - window);
            }
            if (!visible) s[mt][j][e] = -INFINITY;
          }
        }
      }
    }

    // Online softmax, per row: the new max, the rescale of what came before, P = 2^(x - max).
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j)
          mx = fmaxf(mx, fmaxf(s[mt][j][2 * h], s[mt][j][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(kFullMask, mx, 2));
        const float m_new = fmaxf(m[mt][h], mx * p.scale_log2);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: all zero
        const float alpha = common::fastExp2(m[mt][h] - m_use);
        m[mt][h] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          s[mt][j][2 * h] = common::fastExp2(fmaf(s[mt][j][2 * h], p.scale_log2, -m_use));
          s[mt][j][2 * h + 1] = common::fastExp2(fmaf(s[mt][j][2 * h + 1], p.scale_log2, -m_use));
          sum += s[mt][j][2 * h] + s[mt][j][2 * h + 1];
        }
        l[mt][h] = l[mt][h] * alpha + sum;
#pragma unroll
        for (int j = 0; j < kDTiles; ++j) {
          o[mt][j][2 * h] *= alpha;
          o[mt][j][2 * h + 1] *= alpha;
        }
      }
    }

    // O += P V: P (this warp's S fragments, rounded to T) is the A operand as it lies; each V
    // fragment loaded feeds every row tile of the warp.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      unsigned a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        a[mt][0] = common::pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        a[mt][1] = common::pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        a[mt][2] = common::pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        a[mt][3] = common::pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < kDTiles / 2; ++dp) {
        unsigned bv[4];
        common::ldmatrixX4Trans(bv, s_v + swizzled<kD * 2>(kk * 16 + v_row, dp * 2 + v_chunk));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          common::mma16816<T>(o[mt][2 * dp], a[mt], bv[0], bv[1]);
          common::mma16816<T>(o[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
  }

  // out = O / l (0 for a row that saw no key), lse = ln(sum) = (max + log2(l)) ln 2.
  auto* out = static_cast<unsigned short*>(p.out);
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mt][h];
      sum += __shfl_xor_sync(kFullMask, sum, 1);
      sum += __shfl_xor_sync(kFullMask, sum, 2);
      const int r = r_a[mt] + 8 * h;
      if (r >= row_end) continue;
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      unsigned* dst = reinterpret_cast<unsigned*>(out + qRow(r)) + tid4;
#pragma unroll
      for (int j = 0; j < kDTiles; ++j) {
        dst[j * 4] = common::pack2<T>(o[mt][j][2 * h] * inv, o[mt][j][2 * h + 1] * inv);
      }
      if (p.lse != nullptr && tid4 == 0) {
        const int i = r / G;
        const int head = kvh * G + (r - i * G);
        const float lse = sum > 0.0f ? (m[mt][h] + __log2f(sum)) * 0.6931471805599453f : -INFINITY;
        p.lse[static_cast<long long>(head) * p.total_q + q_start + i] = lse;
      }
    }
  }
}

}  // namespace kiln::fmha::mma
