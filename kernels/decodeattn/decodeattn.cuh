// Device code of the decodeattn group: attention of one query token per sequence over a paged KV
// cache, on tensor cores through mma.sync (portable from sm_80 to sm_120), with split-KV.
//
// Why this shape. Decode attention reads every K and V byte of the sequence once and does ~2-8
// FLOPs per byte: it is bound by HBM bandwidth, and the kernel's job is to keep enough bytes in
// flight and to stay out of their way. So:
//   - all query heads of one KV head (a GQA group), times the query tokens of a multi-token step,
//     are the rows of one mma tile (16 rows), or of two that share every K and V fragment (32
//     rows, the rows32 entry; more take more head chunks), so K and V are read once per
//     (sequence, KV head, split) and the dot products cost a few mma.sync instructions instead
//     of CUDA-core FMAs plus shuffle reductions (rows past the group are zero padding: tensor
//     cores have >10x the throughput this needs); a row of query token t masks the keys past its
//     causal limit, seq_len - (T - 1 - t);
//   - each warp owns every 4th 16-key subtile of the block's key range and runs its own
//     kStages-deep cp.async pipeline in its own shared memory, with its own online softmax
//     (running max m, sum l, output o): no block barrier until the final combine of the 4 warps;
//   - a 16-key subtile never straddles a page (page sizes are powers of two >= 16), so each
//     subtile costs one page-table entry; a warp prefetches 32 of them with one load per lane and
//     takes each by shuffle;
//   - keys past the range are zero-filled by cp.async (no read of the poisoned / next sequence's
//     rows) and masked to -inf, so neither NaN nor stale data can leak into P.V;
//   - shared memory rows are XOR-swizzled by 16-byte chunk so ldmatrix and cp.async are
//     bank-conflict free.
// Scores stay in fp32 (scaled into the log2 domain); P is rounded once to the dtype for the P.V
// mma, and the row sums l add the same rounded values, so the output is an exact convex
// combination of V rows with weights rounded to the dtype (README.md states the error bound).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/dependent_launch.cuh"
#include "common/dtype.cuh"
#include "common/sm80_mma.cuh"
#include "common/vec16.cuh"
#include "decodeattn/launch.h"
#include "decodeattn/params.h"

namespace kiln::decodeattn {

inline constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ int ceilDiv(int a, int b) {
  return (a + b - 1) / b;
}

// The key range [start, end) of split `split` of a sequence of `len` keys: every split but the
// last empty ones gets ceil(len / splits) keys rounded up to kBlockKeys, so ranges start on
// 16-key subtile (and page) boundaries. Depends on the sequence's own length only: every key is
// covered whatever the host assumed about lengths.
struct KeyRange {
  int start;
  int end;
};
__device__ __forceinline__ KeyRange splitRange(int len, int splits, int split) {
  const long long per_split =
      static_cast<long long>(ceilDiv(ceilDiv(len, splits), kBlockKeys)) * kBlockKeys;
  const long long start = static_cast<long long>(split) * per_split;
  KeyRange r;
  r.start = static_cast<int>(start < len ? start : len);
  r.end = static_cast<int>(start + per_split < len ? start + per_split : len);
  return r;
}

// Byte offset of 16-byte chunk `chunk` of key row `row` in a [16 keys][head_dim] tile: the chunk
// index is XORed with row % 8, so the 8 rows an ldmatrix reads (same logical chunk) land in 8
// different 16-byte bank groups.
template <int kRowBytes>
__device__ __forceinline__ unsigned swizzled(int row, int chunk) {
  return static_cast<unsigned>(row * kRowBytes + ((chunk ^ (row & 7)) << 4));
}

// One block: (split blockIdx.x, KV head x row chunk blockIdx.y, sequence blockIdx.z); a chunk is
// kRowTiles mma tiles of 16 rows, which every warp multiplies with each K and V subtile it loads.
// smem: sharedBytes(kD) bytes of dynamic shared memory, 16-byte aligned.
template <typename T, int kD, int kRowTiles>
__device__ __forceinline__ void decodeAttention(const DecodeAttentionParams& p,
                                                unsigned char* smem) {
  static_assert(kD % 32 == 0 && kD >= 32 && kD <= 256, "head_dim: a multiple of 32, <= 256");
  constexpr int kChunks = kD / 8;  // 16-byte chunks per key row
  constexpr int kRowBytes = kD * kElementBytes;
  constexpr int kTileBytes = kSubtileKeys * kRowBytes;  // one of K or V, one subtile
  constexpr int kStageBytes = 2 * kTileBytes;
  constexpr int kCopies = kSubtileKeys * kChunks / 32;  // cp.async per lane per tensor per subtile
  constexpr int kKSteps = kD / 16;                      // k-steps of Q.K^T
  constexpr int kNTiles = kD / 8;                       // 8-dim n-tiles of P.V
  constexpr int kRows = kRowTiles * kTileRows;          // rows of the block's chunk
  static_assert(kStageBytes == stageBytes(kD), "launch.h and the kernel disagree on a stage");
  static_assert(combineBytesPerWarp(kD, kRowTiles) <= kStages * kStageBytes,
                "the combine scratch must fit in a warp's own pipeline buffers");
  static_assert(kSubtileKeys * kChunks % 32 == 0, "a subtile must split evenly over the lanes");

  // Launched as a programmatic dependent of the kernel before (the runner's overlap_launch,
  // sm_90+), this block may be resident while that kernel runs: it waits here, before any global
  // read or write, since q, the caches, the page table and the lengths may be its output (a no-op
  // when not launched as a dependent). Then the dependent launch may start at once: a split
  // problem's merge (its blocks take no shared memory to speak of and wait for this whole grid,
  // so their launch hides behind this kernel), or the next kernel of the caller's when it is a
  // programmatic dependent (gemv with overlap_launch), which also waits for this whole grid
  // before reading what it writes.
  common::waitForPrimaryGrid();
  common::releaseDependentGrid();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int group = lane >> 2;  // mma fragment row (query head) group
  const int tid4 = lane & 3;    // mma fragment column pair
  const int split = static_cast<int>(blockIdx.x);
  const int kvh = static_cast<int>(blockIdx.y) / p.head_chunks;
  const int head_chunk = static_cast<int>(blockIdx.y) - kvh * p.head_chunks;
  const int b = static_cast<int>(blockIdx.z);
  const int page_size = 1 << p.page_size_log2;

  // The sequence's length, clamped to what its page-table row can address (the kernel trusts
  // lengths and page ids only that far: see README.md, "What the kernel trusts").
  const int capacity = p.max_pages_per_seq << p.page_size_log2;
  int len = __ldg(p.seq_lens + b);
  len = len < 0 ? 0 : (len > capacity ? capacity : len);
  const KeyRange range = splitRange(len, p.num_splits, split);
  const int num_subtiles = ceilDiv(range.end - range.start, kSubtileKeys);
  const int my_subtiles = num_subtiles > warp ? ceilDiv(num_subtiles - warp, kWarps) : 0;

  // Tile row r is row chunk_row0 + r of the KV head: (query token t, head g of the group),
  // token-major; q, out and the partials index rows globally as (b, t, q head).
  const int chunk_row0 = head_chunk * kRows;
  const int rows = min(kRows, p.group_size * p.query_tokens - chunk_row0);
  auto tokenOf = [&](int r) { return (chunk_row0 + r) / p.group_size; };
  auto globalRow = [&](int r) {
    const int t = tokenOf(r);
    const int g = chunk_row0 + r - t * p.group_size;
    return (static_cast<long long>(b) * p.query_tokens + t) * p.q_heads + kvh * p.group_size + g;
  };
  // The end of the keys row r attends to within this split: its causal limit, clipped to the
  // range (<= range.start when the row has no key here). This lane's rows of row tile rt are
  // 16 rt + group (half 0: fragment elements 0, 1) and 16 rt + group + 8 (half 1: elements 2, 3).
  auto rowEnd = [&](int r) { return min(range.end, len - (p.query_tokens - 1 - tokenOf(r))); };
  int row_end[kRowTiles][2];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
    row_end[rt][0] = rowEnd(rt * kTileRows + group);
    row_end[rt][1] = rowEnd(rt * kTileRows + group + 8);
  }

  // Q as mma A fragments, kept in registers for the whole key range: rows = this chunk's (token,
  // head) rows (zero past `rows`), columns = head dims. Loaded as is: the scale goes on scores.
  unsigned qa[kRowTiles][kKSteps][4];
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
    const auto* q = static_cast<const unsigned short*>(p.q);
    const int r_lo = rt * kTileRows + group, r_hi = r_lo + 8;
    const bool lo = r_lo < rows, hi = r_hi < rows;
    const long long q_lo_row = lo ? globalRow(r_lo) : 0, q_hi_row = hi ? globalRow(r_hi) : 0;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      const int col = ks * 16 + 2 * tid4;
      const auto* q_lo = reinterpret_cast<const unsigned*>(q + q_lo_row * kD + col);
      const auto* q_hi = reinterpret_cast<const unsigned*>(q + q_hi_row * kD + col);
      qa[rt][ks][0] = lo ? __ldg(q_lo) : 0u;
      qa[rt][ks][1] = hi ? __ldg(q_hi) : 0u;
      qa[rt][ks][2] = lo ? __ldg(q_lo + 4) : 0u;  // + 8 elements
      qa[rt][ks][3] = hi ? __ldg(q_hi + 4) : 0u;
    }
  }

  unsigned char* my_smem = smem + warp * (kStages * kStageBytes);
  const unsigned my_smem_s = common::sharedAddress(my_smem);
  const auto* k_cache = static_cast<const unsigned short*>(p.k_cache);
  const auto* v_cache = static_cast<const unsigned short*>(p.v_cache);
  const std::int32_t* table = p.page_table + static_cast<long long>(b) * p.max_pages_per_seq;
  const long long head_offset = static_cast<long long>(kvh) * p.head_stride;

  // The first key of this warp's t-th subtile.
  auto subtileKey = [&](int t) { return range.start + (warp + kWarps * t) * kSubtileKeys; };
  // Lane l's page id for subtile 32 * batch + l of this warp (0 past the last subtile), clamped
  // into the cache so that a corrupt table cannot address outside it.
  auto lookupPages = [&](int batch) {
    const int t = 32 * batch + lane;
    if (t >= my_subtiles) return 0;
    int page = __ldg(table + (subtileKey(t) >> p.page_size_log2));
    page = page < 0 ? 0 : (page >= p.num_pages ? p.num_pages - 1 : page);
    return page;
  };
  int pages_now = lookupPages(0);
  int pages_next = lookupPages(1);
  int pages_batch = 0;

  // Issues the copies of subtile t (keys of K and V) into stage t % kStages, and commits a group
  // (an empty one past the last subtile, so that group counting stays uniform). Warp-uniform.
  auto issue = [&](int t) {
    if (t < my_subtiles) {
      if ((t >> 5) != pages_batch) {  // t advances by one per call: at most one batch ahead
        pages_now = pages_next;
        ++pages_batch;
        pages_next = lookupPages(pages_batch + 1);
      }
      const int page = __shfl_sync(kFullMask, pages_now, t & 31);
      const int key0 = subtileKey(t);
      const int in_page = key0 & (page_size - 1);
      const long long base = static_cast<long long>(page) * p.page_stride +
                             static_cast<long long>(in_page) * p.token_stride + head_offset;
      const unsigned stage = my_smem_s + static_cast<unsigned>((t % kStages) * kStageBytes);
#pragma unroll
      for (int i = 0; i < kCopies; ++i) {
        const int id = i * 32 + lane;
        const int r = id / kChunks;
        const int c = id % kChunks;
        const bool valid = key0 + r < range.end;
        const long long offset = valid ? base + r * p.token_stride + c * 8 : 0;
        const unsigned dst = stage + swizzled<kRowBytes>(r, c);
        common::cpAsync16(dst, k_cache + offset, valid);
        common::cpAsync16(dst + kTileBytes, v_cache + offset, valid);
      }
    }
    common::cpAsyncCommit();
  };

  float o[kRowTiles][kNTiles][4];
  float m[kRowTiles][2];  // running max (log2 domain) of this lane's two rows of each row tile
  float l[kRowTiles][2];  // this lane's part of their running sums
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int n = 0; n < kNTiles; ++n) o[rt][n][0] = o[rt][n][1] = o[rt][n][2] = o[rt][n][3] = 0.0f;
    m[rt][0] = m[rt][1] = -INFINITY;
    l[rt][0] = l[rt][1] = 0.0f;
  }

#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) issue(t);

  for (int i = 0; i < my_subtiles; ++i) {
    issue(i + kStages - 1);  // into the stage computed at i - 1 (released by its __syncwarp)
    common::cpAsyncWait<kStages - 1>();
    __syncwarp();
    const unsigned k_s = my_smem_s + static_cast<unsigned>((i % kStages) * kStageBytes);
    const unsigned v_s = k_s + kTileBytes;

    // S = Q K^T for 16 keys: two n-tiles of 8 keys, kKSteps k-steps each; each K fragment serves
    // every row tile.
    float s[kRowTiles][2][4];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
        s[rt][nt][0] = s[rt][nt][1] = s[rt][nt][2] = s[rt][nt][3] = 0.0f;
    }
#pragma unroll
    for (int kq = 0; kq < kD / 32; ++kq) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        unsigned kb[4];  // keys nt*8 + 0..7, dims kq*32 + 8 * {0, 1, 2, 3} + 0..7
        common::ldmatrixX4(kb,
                           k_s + swizzled<kRowBytes>(nt * 8 + (lane & 7), kq * 4 + (lane >> 3)));
#pragma unroll
        for (int rt = 0; rt < kRowTiles; ++rt) {
          common::mma16816<T>(s[rt][nt], qa[rt][2 * kq], kb[0], kb[1]);
          common::mma16816<T>(s[rt][nt], qa[rt][2 * kq + 1], kb[2], kb[3]);
        }
      }
    }

    // Online softmax in the log2 domain, per row tile; keys past a row's end are -inf (elements
    // 0, 1 of a fragment are the lane's half-0 row, 2, 3 its half-1 row). P is rounded once to
    // T, as the A fragment of P.V (C layout of two n-tiles = A layout of k16).
    unsigned pa[kRowTiles][4];
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      const int valid_lo = row_end[rt][0] - subtileKey(i),
                valid_hi = row_end[rt][1] - subtileKey(i);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = nt * 8 + 2 * tid4 + (e & 1);
          s[rt][nt][e] =
              key < (e < 2 ? valid_lo : valid_hi) ? s[rt][nt][e] * p.scale_log2 : -INFINITY;
        }
      }
      float max_lo = fmaxf(fmaxf(s[rt][0][0], s[rt][0][1]), fmaxf(s[rt][1][0], s[rt][1][1]));
      float max_hi = fmaxf(fmaxf(s[rt][0][2], s[rt][0][3]), fmaxf(s[rt][1][2], s[rt][1][3]));
      max_lo = fmaxf(max_lo, __shfl_xor_sync(kFullMask, max_lo, 1));
      max_hi = fmaxf(max_hi, __shfl_xor_sync(kFullMask, max_hi, 1));
      max_lo = fmaxf(max_lo, __shfl_xor_sync(kFullMask, max_lo, 2));
      max_hi = fmaxf(max_hi, __shfl_xor_sync(kFullMask, max_hi, 2));
      // -inf while a row has seen no key (a causal row before its first key, a padding row): the
      // exponent base is then 0, so its alpha and weights are exp2(-inf) = 0, never NaN.
      const float old_lo = m[rt][0], old_hi = m[rt][1];
      m[rt][0] = fmaxf(m[rt][0], max_lo);
      m[rt][1] = fmaxf(m[rt][1], max_hi);
      const float new_lo = m[rt][0] == -INFINITY ? 0.0f : m[rt][0];
      const float new_hi = m[rt][1] == -INFINITY ? 0.0f : m[rt][1];
      const float alpha_lo = common::fastExp2(old_lo - new_lo);  // 0 on a row's first keys (-inf)
      const float alpha_hi = common::fastExp2(old_hi - new_hi);

      pa[rt][0] = common::pack2<T>(common::fastExp2(s[rt][0][0] - new_lo),
                                   common::fastExp2(s[rt][0][1] - new_lo));
      pa[rt][1] = common::pack2<T>(common::fastExp2(s[rt][0][2] - new_hi),
                                   common::fastExp2(s[rt][0][3] - new_hi));
      pa[rt][2] = common::pack2<T>(common::fastExp2(s[rt][1][0] - new_lo),
                                   common::fastExp2(s[rt][1][1] - new_lo));
      pa[rt][3] = common::pack2<T>(common::fastExp2(s[rt][1][2] - new_hi),
                                   common::fastExp2(s[rt][1][3] - new_hi));
      const float2 p0 = common::unpack2<T>(pa[rt][0]), p1 = common::unpack2<T>(pa[rt][1]);
      const float2 p2 = common::unpack2<T>(pa[rt][2]), p3 = common::unpack2<T>(pa[rt][3]);
      l[rt][0] = l[rt][0] * alpha_lo + ((p0.x + p0.y) + (p2.x + p2.y));
      l[rt][1] = l[rt][1] * alpha_hi + ((p1.x + p1.y) + (p3.x + p3.y));
#pragma unroll
      for (int n = 0; n < kNTiles; ++n) {
        o[rt][n][0] *= alpha_lo;
        o[rt][n][1] *= alpha_lo;
        o[rt][n][2] *= alpha_hi;
        o[rt][n][3] *= alpha_hi;
      }
    }

    // O += P V: V as B fragments through ldmatrix.trans, two 8-dim n-tiles per load, each load
    // serving every row tile.
#pragma unroll
    for (int dp = 0; dp < kD / 16; ++dp) {
      unsigned vb[4];  // keys {0..7, 8..15} x dims dp*16 + {0..7, 8..15}
      common::ldmatrixX4Trans(
          vb, v_s + swizzled<kRowBytes>((lane & 7) + ((lane >> 3) & 1) * 8, dp * 2 + (lane >> 4)));
#pragma unroll
      for (int rt = 0; rt < kRowTiles; ++rt) {
        common::mma16816<T>(o[rt][2 * dp], pa[rt], vb[0], vb[1]);
        common::mma16816<T>(o[rt][2 * dp + 1], pa[rt], vb[2], vb[3]);
      }
    }
    __syncwarp();  // every lane is done with this stage before it is refilled
  }

  // Combine the 4 warps: each writes (o, m, l) into its own pipeline buffers (no other warp reads
  // or writes them), then every thread merges whole 8-dim chunks of rows.
  common::cpAsyncWait<0>();
  __syncwarp();
  {
    float* scratch = reinterpret_cast<float*>(my_smem);  // [kRows][kD] o, then m[kRows], l[kRows]
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        l[rt][h] += __shfl_xor_sync(kFullMask, l[rt][h], 1);
        l[rt][h] += __shfl_xor_sync(kFullMask, l[rt][h], 2);
        const int r = rt * kTileRows + group + 8 * h;
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) {
          *reinterpret_cast<float2*>(scratch + r * kD + n * 8 + 2 * tid4) =
              make_float2(o[rt][n][2 * h], o[rt][n][2 * h + 1]);
        }
        if (tid4 == 0) {
          scratch[kRows * kD + r] = m[rt][h];
          scratch[kRows * kD + kRows + r] = l[rt][h];
        }
      }
    }
  }
  __syncthreads();

  const bool final_output = p.num_splits == 1;
  for (int item = static_cast<int>(threadIdx.x); item < rows * kChunks; item += kThreads) {
    const int r = item / kChunks;
    const int c = item % kChunks;
    float m_w[kWarps], m_max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* ml =
          reinterpret_cast<const float*>(smem + w * (kStages * kStageBytes)) + kRows * kD;
      m_w[w] = ml[r];
      m_max = fmaxf(m_max, m_w[w]);
    }
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    float sum = 0.0f;
    if (m_max != -INFINITY) {  // else no key in this block: zeros, lse -inf
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float* scratch = reinterpret_cast<const float*>(smem + w * (kStages * kStageBytes));
        const float e = common::fastExp2(m_w[w] - m_max);  // 0 for a warp without keys
        sum += e * scratch[kRows * kD + kRows + r];
        const float4 a = *reinterpret_cast<const float4*>(scratch + r * kD + c * 8);
        const float4 bq = *reinterpret_cast<const float4*>(scratch + r * kD + c * 8 + 4);
        acc[0] += e * a.x;
        acc[1] += e * a.y;
        acc[2] += e * a.z;
        acc[3] += e * a.w;
        acc[4] += e * bq.x;
        acc[5] += e * bq.y;
        acc[6] += e * bq.z;
        acc[7] += e * bq.w;
      }
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] *= inv;
    const long long row = globalRow(r);
    if (final_output) {
      auto* out = static_cast<common::Vec16*>(p.out) + (row * kD) / 8 + c;
      common::store(out, common::pack8<T>(acc));
    } else {
      float* po = p.partial_out + (row * p.num_splits + split) * kD + c * 8;
      *reinterpret_cast<float4*>(po) = make_float4(acc[0], acc[1], acc[2], acc[3]);
      *reinterpret_cast<float4*>(po + 4) = make_float4(acc[4], acc[5], acc[6], acc[7]);
      if (c == 0) {
        p.partial_lse[row * p.num_splits + split] = sum > 0.0f ? m_max + __log2f(sum) : -INFINITY;
      }
    }
  }
}

// The split-KV merge: one block per (sequence, query head) row. out = sum_s w_s o_s / sum_s w_s
// with w_s = 2^(lse_s - max lse); empty splits have lse -inf and weigh 0; a row whose splits are
// all empty (length 0) is zeros. The row's work is spread so that its latency is two dependent
// round trips: thread s loads lse_s (splits <= kMaxSplits = kMergeThreads), the block reduces max
// and sum in shared memory, then warp w sums splits w, w + kMergeWarps, ... of o with all its
// loads independent (lane: kD / 32 dims), and the warps' sums are added in shared memory.
template <typename T, int kD>
__device__ __forceinline__ void mergeSplits(const DecodeAttentionParams& p) {
  static_assert(kD == 64 || kD == 128, "merge: 2 or 4 dims per lane");
  static_assert(kMaxSplits <= kMergeThreads, "merge: one lse per thread");
  constexpr int kPerLane = kD / 32;
  __shared__ float weight[kMaxSplits];
  __shared__ float warp_max[kMergeWarps], warp_sum[kMergeWarps];
  __shared__ __align__(16) float partial[kMergeWarps][kD];

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const long long row = blockIdx.x;
  const int splits = p.num_splits;
  // Launched as a programmatic dependent of the attention kernel (sm_90+): it may be resident
  // before that kernel ends, and waits here until the partials are all written and visible.
  common::waitForPrimaryGrid();

  common::releaseDependentGrid();  // the caller's next kernel, as in the attention kernel

  const float lse = tid < splits ? p.partial_lse[row * splits + tid] : -INFINITY;
  float m = lse;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
  if (lane == 0) warp_max[warp] = m;
  __syncthreads();
  m = warp_max[0];
#pragma unroll
  for (int w = 1; w < kMergeWarps; ++w) m = fmaxf(m, warp_max[w]);
  // 0 for an empty split (-inf), and for every split of a row without keys (m = -inf).
  const float e = m == -INFINITY ? 0.0f : common::fastExp2(lse - m);
  if (tid < kMaxSplits) weight[tid] = e;
  float sum = e;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);
  if (lane == 0) warp_sum[warp] = sum;
  __syncthreads();

  float acc[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) acc[j] = 0.0f;
  const float* po = p.partial_out + row * splits * kD + lane * kPerLane;
#pragma unroll 8
  for (int s = warp; s < splits; s += kMergeWarps) {
    const float w = weight[s];
    if constexpr (kPerLane == 4) {
      const float4 v = *reinterpret_cast<const float4*>(po + s * kD);
      acc[0] += w * v.x;
      acc[1] += w * v.y;
      acc[2] += w * v.z;
      acc[3] += w * v.w;
    } else {
      const float2 v = *reinterpret_cast<const float2*>(po + s * kD);
      acc[0] += w * v.x;
      acc[1] += w * v.y;
    }
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) partial[warp][lane * kPerLane + j] = acc[j];
  __syncthreads();

  if (tid < kD / 2) {  // two dims per thread, one packed store
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kMergeWarps; ++w) total += warp_sum[w];
    const float inv = total > 0.0f ? 1.0f / total : 0.0f;
    float2 o = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kMergeWarps; ++w) {
      o.x += partial[w][2 * tid];
      o.y += partial[w][2 * tid + 1];
    }
    static_cast<unsigned*>(p.out)[(row * kD) / 2 + tid] = common::pack2<T>(o.x * inv, o.y * inv);
  }
}

}  // namespace kiln::decodeattn
