// Hopper (sm_90a) prefill attention: TMA loads by a producer warpgroup, wgmma by two consumer
// warpgroups, online softmax in registers. kernels/fmha/README.md ("Design of the wgmma kernel")
// has the design; launch.h the shape; NOTES.md the measured versions.
//
// One block computes kBlockM = 128 query rows of one (sequence, query head):
//   warpgroup 0 (producer): after giving most of its registers away (setmaxnreg), one thread
//     loads the Q tile once and then, for every key tile n of the block's range (last first),
//     K[n] and V[n] into a ring of kStages shared-memory slots: 128-byte-swizzled TMA boxes of 64
//     head-dim columns, each completing on its slot's "full" mbarrier; it waits on the slot's
//     "empty" mbarrier (armed by the consumers) before reusing it.
//   warpgroups 1 and 2 (consumers, 64 rows each): S = Q K[n]^T (wgmma m64nNk16, both operands in
//     shared memory), mask, online softmax (exp2 of scores pre-scaled by scale * log2 e), P rounded
//     to the 16-bit dtype in registers, O += P V[n] (wgmma with A = P from registers and B = V
//     read "MN-major", i.e. transposed by the tensor core). Intra-warpgroup overlap: the product
//     S[n-1] = Q K[n-1]^T is issued before the softmax of S[n] ... (FlashAttention-3's
//     pipelining) so that the tensor core works while the warpgroup does exponentials; and the
//     two consumers take turns issuing (a named-barrier ping-pong), so one's softmax overlaps the
//     other's matrix products.
//   The epilogue divides O by the row sums and stores rows inside the sequence.
//
// Facts this relies on (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply"):
//   - the m64nN fp32 accumulator of a warpgroup gives thread t rows (t / 32) * 16 + (t % 32) / 4
//     and + 8, columns 8 j + 2 (t % 4) + {0, 1}: four threads (a quad) share a row;
//   - that register order, rounded to 16 bits, is exactly the A-operand fragment of the
//     m64nNk16 product with A in registers (so P needs no shuffles between the two products).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/numeric_types.h>
#include <cute/arch/copy_sm90_desc.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/tensor.hpp>

#include "fmha/launch.h"
#include "fmha/params.h"

namespace kiln::fmha {

using namespace cute;

// The shared-memory tiles and the two tiled products of one (head dim, dtype) variant.
template <typename Element, int kHeadDim, bool kCausal>
struct Sm90Config {
  static constexpr int kN = blockN(kHeadDim, kCausal);
  static constexpr int kStages = stages(kHeadDim, kCausal);
  static_assert(kHeadDim % kTmaBoxCols == 0,
                "head_dim must be a multiple of the 64-column TMA box");

  // Q [kBlockM, d] and K [kN, d] per stage: K-major (head dim contiguous), 128-byte swizzle; the
  // atom is 8 rows x 64 columns, tiled down the rows first, so a 64-column half of the tile is
  // kRows x 128 contiguous bytes: exactly what one TMA box of (64, kRows) writes.
  using AtomK = GMMA::Layout_K_SW128_Atom<Element>;
  using LayoutQ = decltype(tile_to_shape(AtomK{}, Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  using LayoutK = decltype(tile_to_shape(AtomK{}, Shape<Int<kN>, Int<kHeadDim>, Int<kStages>>{}));
  // V^T [d, kN] per stage, the B operand of P V: the same bytes as a K tile (TMA writes V exactly
  // as it writes K), seen MN-major: 64 head-dim columns contiguous per key, keys tiled first.
  using AtomVt = GMMA::Layout_MN_SW128_Atom<Element>;
  using LayoutVt = decltype(tile_to_shape(AtomVt{}, Shape<Int<kHeadDim>, Int<kN>, Int<kStages>>{},
                                          Step<_2, _1, _3>{}));

  // One m64 atom per consumer warpgroup, stacked along M.
  using AtomLayout = Layout<Shape<Int<kConsumerWarpgroups>, _1, _1>>;
  using MmaQK = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kN>, Int<kHeadDim>>>(),
      AtomLayout{}));
  using MmaPV = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<Int<kBlockM>, Int<kHeadDim>, Int<kN>>,
                           GMMA::Major::K, GMMA::Major::MN>(),
      AtomLayout{}));

  static constexpr int kQBytes = qTileBytes(kHeadDim);
  static constexpr int kKVBytes = kvTileBytes(kHeadDim, kCausal);
  static_assert(cosize_v<LayoutQ> * 2 == kQBytes, "Q tile size");
  static_assert(cosize_v<LayoutK> * 2 == kStages * kKVBytes, "K ring size");
  static_assert(cosize_v<LayoutVt> * 2 == kStages * kKVBytes, "V ring size");
};

// The block's mbarriers, at the start of (1024-aligned) dynamic shared memory.
struct Barriers {
  uint64_t q_full;
  uint64_t q_empty;  // the consumers have issued their last Q K^T of the tile
  uint64_t k_full[4];
  uint64_t v_full[4];
  uint64_t k_empty[4];
  uint64_t v_empty[4];
};
static_assert(sizeof(Barriers) <= kBarrierBytes, "barriers fit their reserved bytes");

// Named barriers 0 and 1 (after CUTLASS's reserved ones): the consumers' issue turns.
inline constexpr uint32_t kTurnBarrier = 0;

template <int kStages>
struct PipeState {
  int index = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1;
    }
  }
};

// Issues one tiled product over all k blocks of `a` and `b` into `c`, committed as one batch;
// waits until at most `kWait` batches are pending (-1: no wait). kARegisters: `a` is a register
// fragment (P), not shared-memory descriptors.
template <bool kZeroInit, int kWait, bool kARegisters = false, typename Mma, typename TA,
          typename TB, typename TC>
__device__ __forceinline__ void wgmmaTile(Mma& mma, TA& a, TB const& b, TC& c) {
  if constexpr (kARegisters) warpgroup_fence_operand(a);
  warpgroup_fence_operand(c);
  warpgroup_arrive();
  if constexpr (kZeroInit) mma.accumulate_ = GMMA::ScaleOut::Zero;
  CUTE_UNROLL
  for (int k = 0; k < size<2>(a); ++k) {
    cute::gemm(mma, a(_, _, k), b(_, _, k), c);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  if constexpr (kWait >= 0) warpgroup_wait<kWait>();
  warpgroup_fence_operand(c);
  if constexpr (kARegisters) warpgroup_fence_operand(a);
}

// ((2, 2, V), M, N) accumulator layout -> ((2, M), (2, V, N)): rows x columns of one thread.
template <typename Layout>
__device__ __forceinline__ auto rowColumn(Layout l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)),
                     make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}

// ((2, 2, V), M, N) accumulator -> ((2, 2, 2), M, (V / 2, N)): the A-operand fragments of the
// m64nNk16 product with A in registers, over the same register order.
template <typename Layout>
__device__ __forceinline__ auto accumulatorAsA(Layout l) {
  auto v = logical_divide(get<0, 2>(l), Tile<_2>{});  // ((2, V / 2))
  return make_layout(make_layout(get<0, 0>(l), get<0, 1>(l), get<0, 0>(v)), get<1>(l),
                     coalesce(make_layout(get<0, 1>(v), get<2>(l))));
}

__device__ __forceinline__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// 2^x on the MUFU unit, subnormal results flushed to zero: exp2f without fast-math compiles to
// ex2.approx.f32, whose subnormal handling costs extra instructions on every exponential of the
// softmax (which is MUFU- and issue-bound at d64). A probability below 2^-126 is 0 in fp16/bf16.
__device__ __forceinline__ float exp2Ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The online softmax state of one thread's two rows.
struct RowState {
  float max[2];  // running max of the raw scores (-inf: no key yet)
  float sum[2];  // this thread's share of the running sum of exp2(s * scale_log2 - max_scaled)
};

// Applies the key bounds (and the causal bound, and the window's left edge: window >= 0) of key
// tile n to S, in place.
template <bool kCausal, typename TensorS, typename TensorC>
__device__ __forceinline__ void applyMask(TensorS& s_rc, TensorC const& c_rc, int row0, int key0,
                                          int seqlen_k, int causal_offset, int window) {
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s_rc); ++r) {
    const int row = row0 + get<0>(c_rc(r, 0));
    const int limit = kCausal ? min(seqlen_k, row + causal_offset + 1) : seqlen_k;
    const int first = kCausal && window >= 0 ? row + causal_offset - window : 0;
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s_rc); ++c) {
      const int key = key0 + get<1>(c_rc(r, c));
      if (key >= limit || key < first) s_rc(r, c) = -INFINITY;
    }
  }
}

// Updates the running max with S, turns S into exp2(S * scale_log2 - max_scaled) in place, adds
// it to the running sums and returns the factor each row's O must be scaled by.
template <bool kFirst, typename TensorS>
__device__ __forceinline__ void onlineSoftmax(TensorS& s_rc, RowState& st, float scale_log2,
                                              float (&correction)[2]) {
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    float m = kFirst ? -INFINITY : st.max[r];
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s_rc); ++c) m = fmaxf(m, s_rc(r, c));
    m = quadMax(m);
    // A row that has seen no key yet keeps -inf; subtract 0 then, so exp2 gives 0, not NaN.
    const float m_scaled = m == -INFINITY ? 0.0f : m * scale_log2;
    if constexpr (kFirst) {
      correction[r] = 1.0f;
    } else {
      correction[r] =
          exp2Ftz(st.max[r] * scale_log2 - m_scaled);  // exp2(-inf) = 0 for the first key
    }
    st.max[r] = m;
    float sum = 0.0f;
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s_rc); ++c) {
      const float p = exp2Ftz(fmaf(s_rc(r, c), scale_log2, -m_scaled));
      s_rc(r, c) = p;
      sum += p;
    }
    st.sum[r] = kFirst ? sum : fmaf(st.sum[r], correction[r], sum);
  }
}

template <typename TensorO>
__device__ __forceinline__ void rescale(TensorO& o_rc, const float (&correction)[2]) {
  CUTE_UNROLL
  for (int r = 0; r < 2; ++r) {
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o_rc); ++c) o_rc(r, c) *= correction[r];
  }
}

// The CUDA pair type of a CUTLASS 16-bit element (for the two-at-a-time conversions).
template <typename Element>
using Pair =
    std::conditional_t<std::is_same_v<Element, cutlass::bfloat16_t>, __nv_bfloat162, __half2>;

template <typename Element>
__device__ __forceinline__ Pair<Element> roundPair(float a, float b) {
  if constexpr (std::is_same_v<Element, cutlass::bfloat16_t>) {
    return __floats2bfloat162_rn(a, b);
  } else {
    return __floats2half2_rn(a, b);
  }
}

// S (fp32) rounded to the 16-bit dtype, in the A-fragment order of the P V product (the same
// register order: see the top of this file), two elements per conversion.
template <typename Element, typename TensorS, typename TensorP>
__device__ __forceinline__ void roundP(TensorS const& s, TensorP& p) {
  static_assert(decltype(size(s))::value == decltype(size(p))::value, "P and S sizes");
  auto* pairs = reinterpret_cast<Pair<Element>*>(raw_pointer_cast(p.data()));
  CUTE_UNROLL
  for (int i = 0; i < size(s) / 2; ++i) pairs[i] = roundPair<Element>(s(2 * i), s(2 * i + 1));
}

// One tile of work: kBlockM query rows of one (sequence, query head), and the key tiles it needs.
struct TileWork {
  int head, kv_head, m0;
  int q_begin, k_begin;  // first token of the sequence in q / out and in k / v
  int seqlen_q, seqlen_k;
  int causal_offset;  // seqlen_k - seqlen_q: query i sees keys j <= i + causal_offset
  int n_first;        // key tiles [n_first, n_blocks) are computed, the last one first: tiles left
  int n_blocks;       // of every row's window (causal, window_left >= 0) are skipped
  int n_unmasked;     // key tiles below it need no right-edge mask for any row of the tile
  int n_windowed;     // key tiles below it need the window's left-edge mask for some row
  bool empty;         // the rows lie past the sequence's end: nothing to do
};

// Tile t: query blocks of one (sequence, head) are consecutive (blocks running together share
// its K / V in L2), heads of one KV group are neighbours; causal blocks alternate heavy / light.
template <bool kCausal>
__device__ __forceinline__ TileWork tileWork(const FmhaParams& params, int tile, int n_tile) {
  TileWork w;
  const int m_rank = tile % params.m_blocks;
  const int bh = tile / params.m_blocks;
  w.head = bh % params.q_heads;
  const int batch = bh / params.q_heads;
  w.kv_head = w.head / params.group_size;
  // Causal: heavy and light blocks alternate (the schedule pairs them): rank 2p is block
  // m_blocks - 1 - p, rank 2p + 1 is block p.
  const int m_block = !kCausal       ? m_rank
                      : (m_rank & 1) ? m_rank / 2
                                     : params.m_blocks - 1 - m_rank / 2;
  // Offsets clamped to the tensors, so that a bad cu_seqlens cannot send an access outside them.
  w.q_begin = min(max(params.cu_seqlens_q[batch], 0), params.total_q);
  const int q_end = min(max(params.cu_seqlens_q[batch + 1], w.q_begin), params.total_q);
  w.k_begin = min(max(params.cu_seqlens_k[batch], 0), params.total_k);
  const int k_end = min(max(params.cu_seqlens_k[batch + 1], w.k_begin), params.total_k);
  w.seqlen_q = q_end - w.q_begin;
  w.seqlen_k = k_end - w.k_begin;
  w.m0 = m_block * kBlockM;
  w.empty = w.m0 >= w.seqlen_q;
  // Key tiles: all keys, or (causal) those some row of the tile sees: row m0 + kBlockM - 1 sees
  // keys up to m0 + kBlockM - 1 + causal_offset.
  w.causal_offset = w.seqlen_k - w.seqlen_q;
  const int key_end = kCausal ? min(w.seqlen_k, w.m0 + kBlockM + w.causal_offset) : w.seqlen_k;
  w.n_blocks = key_end > 0 ? (key_end + n_tile - 1) / n_tile : 0;
  const int unmasked_keys = kCausal ? min(w.seqlen_k, w.m0 + 1 + w.causal_offset) : w.seqlen_k;
  w.n_unmasked = unmasked_keys > 0 ? unmasked_keys / n_tile : 0;
  // The window: row m0 sees keys from m0 + causal_offset - window on, row m0 + kBlockM - 1 from
  // kBlockM - 1 later; tiles wholly left of row m0's first key are never loaded, tiles that start
  // left of the last row's first key are masked.
  w.n_first = 0;
  w.n_windowed = 0;
  if (kCausal && params.window_left >= 0) {
    const int first_key = max(0, w.m0 + w.causal_offset - params.window_left);
    w.n_first = min(first_key / n_tile, w.n_blocks);
    const int last_first_key = w.m0 + kBlockM - 1 + w.causal_offset - params.window_left;
    w.n_windowed = last_first_key > 0 ? (last_first_key + n_tile - 1) / n_tile : 0;
  }
  return w;
}

// A persistent kernel: each block walks one tile per round (scheduledTile); the producer runs
// ahead into the next tile (its Q once the consumers release the Q buffer, its K / V through
// the same ring), so the pipeline does not drain between tiles.
template <typename Element, int kHeadDim, bool kCausal>
__device__ __forceinline__ void fmhaForward(const FmhaParams& params, unsigned char* smem_raw) {
  using Config = Sm90Config<Element, kHeadDim, kCausal>;
  constexpr int kN = Config::kN;
  constexpr int kStages = Config::kStages;
  constexpr int kHalves = kHeadDim / kTmaBoxCols;
  constexpr int kConsumerThreads = kConsumerWarpgroups * kWarpgroupThreads;
  static_assert(kStages <= 4, "Barriers holds 4 stages");
  const int num_tiles = params.m_blocks * params.q_heads * params.batch;
  // The static schedule: tiles of equal work are dealt round robin, tile r G + b to block b in
  // round r. Causal tiles are not equal (a sequence's m block k has k + 1 key tiles), so tileWork
  // orders each sequence's blocks heavy, light, heavy, light... (m_blocks - 1, 0, m_blocks - 2,
  // 1, ...) and a block takes two consecutive tiles per two rounds: every pair is about
  // m_blocks + 1 key tiles of work, so the blocks finish together. (A plain stride of G = 132
  // over heavy-first blocks gave some blocks only heavy tiles: 0.70x at 16k causal, run 6.)
  // Producer and consumers walk the same sequence.
  auto scheduledTile = [&](int round) -> long long {  // 64 bits: the last round may pass 2^31 - 1
    const long long g = gridDim.x;
    const long long b = blockIdx.x;
    if constexpr (kCausal) return 2 * ((round / 2) * g + b) + (round & 1);
    return round * g + b;
  };
  auto moreRounds = [&](int round) {
    const long long g = gridDim.x;
    return (kCausal ? 2 * (round / 2) * g : round * g) < num_tiles;
  };

  // Shared memory: barriers, Q, K ring, V ring; 1024-byte aligned for the 128-byte swizzle.
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  Barriers& bars = *reinterpret_cast<Barriers*>(smem);
  Element* q_smem = reinterpret_cast<Element*>(smem + kBarrierBytes);
  Element* k_smem = reinterpret_cast<Element*>(smem + kBarrierBytes + Config::kQBytes);
  Element* v_smem = reinterpret_cast<Element*>(smem + kBarrierBytes + Config::kQBytes +
                                               kStages * Config::kKVBytes);

  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  if (threadIdx.x == 0) {
    cutlass::arch::ClusterTransactionBarrier::init(&bars.q_full, 1);
    cutlass::arch::ClusterBarrier::init(&bars.q_empty, kConsumerThreads);
    for (int s = 0; s < kStages; ++s) {
      cutlass::arch::ClusterTransactionBarrier::init(&bars.k_full[s], 1);
      cutlass::arch::ClusterTransactionBarrier::init(&bars.v_full[s], 1);
      cutlass::arch::ClusterBarrier::init(&bars.k_empty[s], kConsumerThreads);
      cutlass::arch::ClusterBarrier::init(&bars.v_empty[s], kConsumerThreads);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ---------------------------------------------------------------- producer
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegisters>();
    if (threadIdx.x != 0) return;
    constexpr uint64_t kHint = static_cast<uint64_t>(cute::TMA::CacheHintSm90::EVICT_NORMAL);
    PipeState<kStages> pipe;
    uint32_t q_phase = 0;
    for (int round = 0; moreRounds(round); ++round) {
      const long long tile = scheduledTile(round);
      if (tile >= num_tiles) continue;
      const TileWork w = tileWork<kCausal>(params, static_cast<int>(tile), kN);
      if (w.empty) continue;
      cutlass::arch::ClusterBarrier::wait(&bars.q_empty, q_phase ^ 1);
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&bars.q_full, Config::kQBytes);
      for (int h = 0; h < kHalves; ++h) {
        SM90_TMA_LOAD_3D::copy(&params.tma_q, &bars.q_full, kHint,
                               q_smem + h * kBlockM * kTmaBoxCols, h * kTmaBoxCols,
                               w.q_begin + w.m0, w.head);
      }
      q_phase ^= 1;
      for (int n = w.n_blocks - 1; n >= w.n_first; --n) {
        const int key_row = w.k_begin + n * kN;
        const int slot = pipe.index;
        cutlass::arch::ClusterBarrier::wait(&bars.k_empty[slot], pipe.phase ^ 1);
        cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&bars.k_full[slot],
                                                                       Config::kKVBytes);
        for (int h = 0; h < kHalves; ++h) {
          SM90_TMA_LOAD_3D::copy(&params.tma_k, &bars.k_full[slot], kHint,
                                 k_smem + slot * kN * kHeadDim + h * kN * kTmaBoxCols,
                                 h * kTmaBoxCols, key_row, w.kv_head);
        }
        cutlass::arch::ClusterBarrier::wait(&bars.v_empty[slot], pipe.phase ^ 1);
        cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&bars.v_full[slot],
                                                                       Config::kKVBytes);
        for (int h = 0; h < kHalves; ++h) {
          SM90_TMA_LOAD_3D::copy(&params.tma_v, &bars.v_full[slot], kHint,
                                 v_smem + slot * kN * kHeadDim + h * kN * kTmaBoxCols,
                                 h * kTmaBoxCols, key_row, w.kv_head);
        }
        pipe.advance();
      }
    }
    return;
  }

  // ------------------------------------------------------------------ consumers
  cutlass::arch::warpgroup_reg_alloc<kConsumerRegisters>();
  const int consumer = warpgroup - 1;                                  // 0 or 1
  const int ctid = static_cast<int>(threadIdx.x) - kWarpgroupThreads;  // 0 .. 255

  Tensor sQ = make_tensor(make_smem_ptr(q_smem), typename Config::LayoutQ{});
  Tensor sK = make_tensor(make_smem_ptr(k_smem), typename Config::LayoutK{});
  Tensor sVt = make_tensor(make_smem_ptr(v_smem), typename Config::LayoutVt{});

  typename Config::MmaQK mma_qk;
  typename Config::MmaPV mma_pv;
  auto thr_qk = mma_qk.get_thread_slice(ctid);
  auto thr_pv = mma_pv.get_thread_slice(ctid);
  Tensor tSrQ = thr_qk.partition_fragment_A(sQ);   // (MMA, MMA_M, MMA_K) descriptors
  Tensor tSrK = thr_qk.partition_fragment_B(sK);   // (MMA, MMA_N, MMA_K, stages)
  Tensor tOrV = thr_pv.partition_fragment_B(sVt);  // (MMA, MMA_N, MMA_K, stages)
  Tensor tOrO = partition_fragment_C(mma_pv, Shape<Int<kBlockM>, Int<kHeadDim>>{});
  Tensor tSrS = partition_fragment_C(mma_qk, Shape<Int<kBlockM>, Int<kN>>{});
  Tensor tOrP = make_tensor<Element>(accumulatorAsA(tSrS.layout()));

  // Row / column of every accumulator element of this thread, and their row x column views.
  Tensor tScS = thr_qk.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kN>>{}));
  Tensor tOcO = thr_pv.partition_C(make_identity_tensor(Shape<Int<kBlockM>, Int<kHeadDim>>{}));
  Tensor s_rc = make_tensor(tSrS.data(), rowColumn(tSrS.layout()));
  Tensor c_rc = make_tensor(tScS.data(), rowColumn(tScS.layout()));
  Tensor o_rc = make_tensor(tOrO.data(), rowColumn(tOrO.layout()));
  Tensor oc_rc = make_tensor(tOcO.data(), rowColumn(tOcO.layout()));

  // The consumers take turns issuing their products: consumer c waits on named barrier c and
  // passes the turn to the other by arriving on its barrier. The first consumer's first turn
  // comes from this arrive; every later turn from the other consumer's pass (the count of turns
  // per tile is the same for both, so the passes stay matched across tiles).
  auto turnWait = [&] {
    cutlass::arch::NamedBarrier::sync(kConsumerThreads, kTurnBarrier + consumer);
  };
  auto turnPass = [&] {
    cutlass::arch::NamedBarrier::arrive(kConsumerThreads, kTurnBarrier + (1 - consumer));
  };
  if (consumer == 0) cutlass::arch::NamedBarrier::arrive(kConsumerThreads, kTurnBarrier);

  PipeState<kStages> pipe;
  uint32_t q_phase = 0;
  for (int round = 0; moreRounds(round); ++round) {
    const long long tile = scheduledTile(round);
    if (tile >= num_tiles) continue;
    const TileWork w = tileWork<kCausal>(params, static_cast<int>(tile), kN);
    if (w.empty) continue;
    auto maskTile = [&](int n) {
      if (n >= w.n_unmasked || n < w.n_windowed) {
        applyMask<kCausal>(s_rc, c_rc, w.m0, n * kN, w.seqlen_k, w.causal_offset,
                           params.window_left);
      }
    };

    RowState st;
    clear(tOrO);
    st.max[0] = st.max[1] = -INFINITY;
    st.sum[0] = st.sum[1] = 0.0f;

    cutlass::arch::ClusterTransactionBarrier::wait(&bars.q_full, q_phase);
    q_phase ^= 1;
    if (w.n_blocks > w.n_first) {
      int n = w.n_blocks - 1;
      cutlass::arch::ClusterTransactionBarrier::wait(&bars.k_full[pipe.index], pipe.phase);
      turnWait();
      wgmmaTile<true, -1>(mma_qk, tSrQ, tSrK(_, _, _, pipe.index), tSrS);
      turnPass();
      warpgroup_wait<0>();
      cutlass::arch::ClusterBarrier::arrive(&bars.k_empty[pipe.index]);
      if (n == w.n_first) {
        cutlass::arch::ClusterBarrier::arrive(&bars.q_empty);  // Q read for the last time
      }
      maskTile(n);
      float correction[2];
      onlineSoftmax<true>(s_rc, st, params.scale_log2, correction);
      roundP<Element>(tSrS, tOrP);

      // Each step: S = Q K[n]^T and O += P[n + 1] V[n + 1] in flight together; then the softmax
      // of S[n] while nothing but the P V product runs.
      for (--n; n >= w.n_first; --n) {
        PipeState<kStages> pipe_v = pipe;  // the slot of the tile whose P we hold
        pipe.advance();
        cutlass::arch::ClusterTransactionBarrier::wait(&bars.k_full[pipe.index], pipe.phase);
        turnWait();
        wgmmaTile<true, -1>(mma_qk, tSrQ, tSrK(_, _, _, pipe.index), tSrS);
        cutlass::arch::ClusterTransactionBarrier::wait(&bars.v_full[pipe_v.index], pipe_v.phase);
        wgmmaTile<false, -1, true>(mma_pv, tOrP, tOrV(_, _, _, pipe_v.index), tOrO);
        turnPass();
        warpgroup_wait<1>();  // S is ready
        cutlass::arch::ClusterBarrier::arrive(&bars.k_empty[pipe.index]);
        if (n == w.n_first) cutlass::arch::ClusterBarrier::arrive(&bars.q_empty);
        maskTile(n);
        onlineSoftmax<false>(s_rc, st, params.scale_log2, correction);
        warpgroup_wait<0>();  // O += P V is done: P and V[n + 1] are free
        cutlass::arch::ClusterBarrier::arrive(&bars.v_empty[pipe_v.index]);
        roundP<Element>(tSrS, tOrP);
        rescale(o_rc, correction);
      }
      cutlass::arch::ClusterTransactionBarrier::wait(&bars.v_full[pipe.index], pipe.phase);
      wgmmaTile<false, 0, true>(mma_pv, tOrP, tOrV(_, _, _, pipe.index), tOrO);
      cutlass::arch::ClusterBarrier::arrive(&bars.v_empty[pipe.index]);
      pipe.advance();
    } else {
      cutlass::arch::ClusterBarrier::arrive(&bars.q_empty);  // no key: Q is not read at all
    }

    // ---------------------------------------------------------------- epilogue
    // O / l, rows inside the sequence only; lse = ln(sum exp(scale s)) = (max_scaled + log2 l)
    // ln 2.
    Element* out = static_cast<Element*>(params.out);
    const long long row_stride = static_cast<long long>(params.q_heads) * kHeadDim;
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      const float sum = quadSum(st.sum[r]);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      const int row = w.m0 + get<0>(oc_rc(r, 0));
      const bool in_sequence = row < w.seqlen_q;
      Element* out_row =
          out + (w.q_begin + static_cast<long long>(row)) * row_stride + w.head * kHeadDim;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o_rc); c += 2) {
        // Columns c and c + 1 of this thread are adjacent (the accumulator layout above).
        const int col = get<1>(oc_rc(r, c));
        if (in_sequence) {
          *reinterpret_cast<Pair<Element>*>(out_row + col) =
              roundPair<Element>(o_rc(r, c) * inv, o_rc(r, c + 1) * inv);
        }
      }
      if (params.lse != nullptr && in_sequence && (threadIdx.x % 4) == 0) {
        const float m = st.max[r];
        const float lse =
            sum > 0.0f ? (m * params.scale_log2 + log2f(sum)) * 0.6931471805599453f : -INFINITY;
        params.lse[static_cast<long long>(w.head) * params.total_q + w.q_begin + row] = lse;
      }
    }
  }
}

}  // namespace kiln::fmha
