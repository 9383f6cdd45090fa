// memory_paths: what the memory access patterns of two kiln groups reach on this GPU with their
// math left out, so that a kernel's distance to its floor can be split into what the pattern
// costs and what the kernel adds. A diagnostic, not a peer: nothing here is shipped or linked
// into an artifact. Timing as bench/kiln_bench.py: a spin kernel ahead of each timed launch keeps
// the GPU busy while the host enqueues, CUDA events bracket the launch, median of the runs.
//
//   nvcc -O3 -std=c++20 -arch=sm_90 -o memory_paths bench/probes/memory_paths.cu
//   ./memory_paths [gdn|decodeattn|all|timeline|locality] > memory_paths.json
//   (one JSON object per line; default: all)
//
// gdn (state [slots, Hv = 32, 128, 128] float32, read and written in place, batch 1..256):
//   copy       cudaMemcpyAsync of one set's state bytes (the same bytes read and written)
//   direct     gdn_decode's path: grid (4, Hv, batch) x (32, 4), the slot, then 32 float loads per
//              thread into registers (lane j: column j, warp w: rows 32w..), two passes with a
//              cross-warp sum each (bar.sync), 32 stores back
//   direct_cs  direct with the streaming cache hints (ld.global.cs / st.global.cs) on the state
//   merged2/4  2 or 4 of direct's items of one (sequence, head) in one block (32, 4, 2 / 4): the
//              same per-thread work in fewer, larger blocks (merged4: one block per head);
//              merged4_cs with the streaming hints
//   v4         direct's item with 16-byte accesses (4 columns per lane, 4 rows per warp load)
//   head       one block of 16 warps per (sequence, head): a warp loads whole 512-byte rows;
//              head_cs with the streaming hints; head8 with 8 warps of 16 rows; half two blocks
//              of 8 warps per head, a warp loading two 256-byte row halves
//   pipelined  direct's item on a persistent grid (as many blocks as are resident): each block
//              copies the next item's 16 KiB of state into shared memory (cp.async) while it
//              computes the current one from registers; `depth` items ahead
// decodeattn (K and V [pages, 16, Hkv = 8, 128] bf16, read once; 4 warps per (sequence, KV
// head), each warp a 3-stage cp.async pipeline of 16-key subtiles, as kernels/decodeattn), three
// layouts each (nine in `memory_paths locality`):
//   paged_random / paged_sequential   the page table a permutation / in order
//   paged_windowW                     (`memory_paths locality`) permuted within runs of W pages
//   paged_random_sorted               (`memory_paths locality`) random, each sequence's sorted
//   paged_{random,sequential}_kvpool  (`memory_paths locality`) K and V of a page side by side in
//                                     one pool ([pages][2][16][Hkv][d], TensorRT-LLM's and
//                                     FlashInfer's one-tensor cache), random / in-order pages
//   contiguous                        K, V as [batch, Hkv, keys, 128] (what the peers read)
// and five consumers of each subtile: `read` (one word), `read+smem` (every byte through shared
// memory, as ldmatrix reads it), `+chainN` (then N dependent FMAs: the latency of a subtile's
// math), `ringH+chainN` (H half-stage slots per warp instead of 3 stages: 7 keeps 2.5 subtiles in
// flight instead of 2), `two_heads+chain128` (`memory_paths locality` only: a block of 8 warps
// reads two KV heads of a sequence, which share its pages, on one SM).
// `memory_paths timeline` records when each block of the read starts and ends (%globaltimer; the
// launches back to back behind a spin kernel) and prints, per shape and layout, the median over 11
// launches of the last start and of the 10th, 50th, 90th percentile and last block end: how long
// the launch's tail is, in which fewer blocks than the GPU holds are left streaming.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace {

constexpr int kHv = 32;
constexpr int kD = 128;  // d_k = d_v
constexpr int kHeadFloats = kD * kD;
constexpr int kTile = 32;     // state columns per item
constexpr int kRowSplit = 4;  // warps per block
constexpr int kRows = kD / kRowSplit;
constexpr int kItemFloats = kD * kTile;  // 16 KiB of state per item

__global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__device__ __forceinline__ void cpAsync16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kN>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kN));
}

// Loads and stores of the state: plain, or with the streaming hints (ld.global.cs / st.global.cs:
// evict-first, the line is touched once by this kernel) when kStream.
template <bool kStream, typename V>
__device__ __forceinline__ V loadState(const V* p) {
  if constexpr (kStream) return __ldcs(p);
  return *p;
}
template <bool kStream, typename V>
__device__ __forceinline__ void storeState(V* p, V v) {
  if constexpr (kStream)
    __stcs(p, v);
  else
    *p = v;
}

// The rule's arithmetic shape on the thread's 32 rows: decay, partial of S^T k, cross-warp sum,
// update, store, partial of S^T q, cross-warp sum (k and q constants here: the loads are the
// point). red: this column tile's 8 x kTile floats (a block of several tiles gives each its own).
template <bool kStream = false>
__device__ __forceinline__ float ruleShape(float (&c)[kRows], float* dst, float* red, float decay) {
  const int j = threadIdx.x, w = threadIdx.y;
  float kv = 0.0f;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    c[i] *= decay;
    kv += c[i] * (1.0f / 128.0f);
  }
  red[w * kTile + j] = kv;
  __syncthreads();
  const float u = -1e-3f * (red[j] + red[kTile + j] + red[2 * kTile + j] + red[3 * kTile + j]);
  float o = 0.0f;
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    c[i] += u * (1.0f / 128.0f);
    storeState<kStream>(dst + i * kD, c[i]);
    o += c[i];
  }
  red[4 * kTile + w * kTile + j] = o;
  __syncthreads();
  return red[4 * kTile + j] + red[5 * kTile + j];
}

// direct (kTiles 1): gdn_decode's item, 32 columns x 128 rows in 4 warps of one block, block (32,
// 4); merged (kTiles 2, 4): kTiles such items of one (sequence, head) in one block (32, 4,
// kTiles), the same per-thread work, so one block per head at 4.
template <int kTiles, bool kStream>
__global__ void __launch_bounds__(128 * kTiles)
    gdnDirect(float* state, const int* slots, float* out) {
  __shared__ float red[kTiles][8 * kTile];
  const int j = threadIdx.x, w = threadIdx.y, z = threadIdx.z;
  const int vx = blockIdx.x * kTiles + z, hv = blockIdx.y, b = blockIdx.z;
  const int slot = slots[b];
  if (slot < 0) return;
  float* s = state + (static_cast<long long>(slot) * kHv + hv) * kHeadFloats + (w * kRows) * kD +
             vx * kTile + j;
  float c[kRows];
#pragma unroll
  for (int i = 0; i < kRows; ++i) c[i] = loadState<kStream>(s + i * kD);
  const float o = ruleShape<kStream>(c, s, red[z], 0.999f);
  if (w == 0) out[(static_cast<long long>(b) * kHv + hv) * kD + vx * kTile + j] = o;
}

// The rule's shape on kPer float4 rows per thread (x[i] at s + i * stride floats): kGroups row
// groups per warp (lane / (32 / kGroups)) share a column chunk c = lane % (32 / kGroups) and are
// added by shuffle, then the kWarps warps through red; returns the S^T q column sums of chunk c
// (meaningful in warp 0, group 0).
template <int kWarps, int kGroups, int kPer = 8, bool kStream = false>
__device__ __forceinline__ float4 ruleShape4(float* s, int stride,
                                             float4 (&red)[2][kWarps][32 / kGroups]) {
  constexpr int kChunks = 32 / kGroups;
  const int lane = static_cast<int>(threadIdx.x + threadIdx.y * blockDim.x) & 31;
  const int w = static_cast<int>(threadIdx.x + threadIdx.y * blockDim.x) >> 5;
  const int g = lane / kChunks, c = lane % kChunks;
  auto axpy = [](float4& y, float a, float4 x) {
    y.x += a * x.x, y.y += a * x.y, y.z += a * x.z, y.w += a * x.w;
  };
  auto groupSum = [](float4 v) {
#pragma unroll
    for (int m = kChunks; m < 32; m *= 2) {
      v.x += __shfl_xor_sync(0xffffffffu, v.x, m);
      v.y += __shfl_xor_sync(0xffffffffu, v.y, m);
      v.z += __shfl_xor_sync(0xffffffffu, v.z, m);
      v.w += __shfl_xor_sync(0xffffffffu, v.w, m);
    }
    return v;
  };
  auto blockSum = [&](int which, float4 v, float scale) {
    v = groupSum(v);
    if (g == 0) red[which][w][c] = v;
    __syncthreads();
    float4 t = make_float4(0, 0, 0, 0);
#pragma unroll
    for (int p = 0; p < kWarps; ++p) axpy(t, scale, red[which][p][c]);
    return t;
  };
  float4 x[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i)
    x[i] = loadState<kStream>(reinterpret_cast<const float4*>(s + i * stride));
  float4 kv = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    x[i] = make_float4(x[i].x * 0.999f, x[i].y * 0.999f, x[i].z * 0.999f, x[i].w * 0.999f);
    axpy(kv, 1.0f / 128, x[i]);
  }
  const float4 u = blockSum(0, kv, -1e-3f);
  float4 o = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < kPer; ++i) {
    axpy(x[i], 1.0f / 128, u);
    storeState<kStream>(reinterpret_cast<float4*>(s + i * stride), x[i]);
    axpy(o, 1.0f, x[i]);
  }
  return blockSum(1, o, 1.0f);
}

// v4: the same item (32 columns x 128 rows, 4 warps) with 16-byte accesses: lane = (row group
// g = lane / 8, 4 columns 4 (lane % 8) ..), warp w rows 32 w + g + 4 i.
__global__ void __launch_bounds__(128) gdnV4(float* state, const int* slots, float* out) {
  __shared__ float4 red[2][kRowSplit][8];
  const int lane = threadIdx.x, w = threadIdx.y, g = lane / 8, c = lane % 8;
  const int vx = blockIdx.x, hv = blockIdx.y, b = blockIdx.z;
  const int slot = slots[b];
  if (slot < 0) return;
  float* s = state + (static_cast<long long>(slot) * kHv + hv) * kHeadFloats +
             (w * kRows + g) * kD + vx * kTile + 4 * c;
  const float4 o = ruleShape4<kRowSplit, 4>(s, 4 * kD, red);
  if (w == 0 && g == 0) {
    *reinterpret_cast<float4*>(out + (static_cast<long long>(b) * kHv + hv) * kD + vx * kTile +
                               4 * c) = o;
  }
}

// head: one block per (sequence, value head), 16 warps: lane = 4 columns 4 lane .. (a warp reads
// one whole 512-byte row per instruction), warp w rows 8 w .. 8 w + 7. head8: 8 warps, 16 rows
// each (rows 16 w ..). half: two blocks per head (64 columns each), 8 warps, lane = (row group
// g = lane / 16, 4 columns 4 (lane % 16) ..), warp w rows 16 w + g + 2 i: a warp instruction reads
// two 256-byte row halves.
template <int kWarps, int kGroups, bool kStream, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocks)
    gdnHead(float* state, const int* slots, float* out) {
  constexpr int kChunks = 32 / kGroups;          // float4 column chunks per warp row
  constexpr int kPer = kD / (kWarps * kGroups);  // rows per thread
  constexpr int kBlocks = kD / (4 * kChunks);    // blocks per head
  __shared__ float4 red[2][kWarps][kChunks];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane / kChunks, c = lane % kChunks;
  const int vx = blockIdx.x % kBlocks, hv = blockIdx.x / kBlocks, b = blockIdx.y;
  const int slot = slots[b];
  if (slot < 0) return;
  const int col = vx * 4 * kChunks + 4 * c;
  float* s = state + (static_cast<long long>(slot) * kHv + hv) * kHeadFloats +
             (w * kPer * kGroups + g) * kD + col;
  const float4 o = ruleShape4<kWarps, kGroups, kPer, kStream>(s, kGroups * kD, red);
  if (w == 0 && g == 0) {
    *reinterpret_cast<float4*>(out + (static_cast<long long>(b) * kHv + hv) * kD + col) = o;
  }
}

struct Item {
  int vx, hv, b;
};
__device__ __forceinline__ Item itemOf(int it) {
  return {it % (kD / kTile), (it / (kD / kTile)) % kHv, it / ((kD / kTile) * kHv)};
}
__device__ __forceinline__ float* itemState(float* state, int slot, Item i) {
  return state + (static_cast<long long>(slot) * kHv + i.hv) * kHeadFloats + i.vx * kTile;
}
// The block's 128 threads copy one item's 128 rows x 32 floats into buf ([row][32] floats): 8
// copies of 16 bytes each.
__device__ __forceinline__ void copyItem(float* buf, const float* src) {
  const int t = threadIdx.y * kTile + threadIdx.x;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = t / 8 + 16 * i, chunk = t % 8;
    cpAsync16(buf + row * kTile + chunk * 4, src + row * kD + chunk * 4);
  }
}

template <int kDepth>
__global__ void __launch_bounds__(128)
    gdnPipelined(float* state, const int* slots, float* out, int items) {
  extern __shared__ __align__(16) float bufs[];  // kDepth x kItemFloats
  __shared__ float red[8 * kTile];
  const int j = threadIdx.x, w = threadIdx.y;
  const int stride = gridDim.x;
  int slot_ahead[kDepth];  // slots of items it + k * stride, k < kDepth (issued)
  int next_slot = -1;      // slot of item it + kDepth * stride (loaded, not issued)
  const int first = blockIdx.x;
#pragma unroll
  for (int k = 0; k < kDepth; ++k) {
    const int it = first + k * stride;
    slot_ahead[k] = it < items ? slots[itemOf(it).b] : -1;
    if (slot_ahead[k] >= 0) {
      copyItem(bufs + k * kItemFloats, itemState(state, slot_ahead[k], itemOf(it)));
    }
    cpAsyncCommit();
  }
  {
    const int it = first + kDepth * stride;
    next_slot = it < items ? slots[itemOf(it).b] : -1;
  }
  int n = 0;
  for (int it = first; it < items; it += stride, ++n) {
    const int slot = slot_ahead[0];
    float* buf = bufs + (n % kDepth) * kItemFloats;
    cpAsyncWait<kDepth - 1>();
    __syncthreads();
    float c[kRows];
#pragma unroll
    for (int i = 0; i < kRows; ++i) c[i] = buf[(w * kRows + i) * kTile + j];
    __syncthreads();  // buf free: the item kDepth ahead goes into it
#pragma unroll
    for (int k = 0; k + 1 < kDepth; ++k) slot_ahead[k] = slot_ahead[k + 1];
    slot_ahead[kDepth - 1] = next_slot;
    const int ahead = it + kDepth * stride;
    if (ahead < items && next_slot >= 0) copyItem(buf, itemState(state, next_slot, itemOf(ahead)));
    cpAsyncCommit();
    const int later = ahead + stride;
    next_slot = later < items ? slots[itemOf(later).b] : -1;
    if (slot >= 0) {
      const Item i = itemOf(it);
      float* s = itemState(state, slot, i) + (w * kRows) * kD + j;
      const float o = ruleShape(c, s, red, 0.999f);
      if (w == 0) out[(static_cast<long long>(i.b) * kHv + i.hv) * kD + i.vx * kTile + j] = o;
    }
  }
  cpAsyncWait<0>();
}

// ---- decodeattn's read pattern -----------------------------------------------------------------

constexpr int kHkv = 8;
constexpr int kSubtile = 16;
constexpr int kStages = 3;
constexpr int kRowBytes = kD * 2;
constexpr int kPageBytes = kSubtile * kHkv * kRowBytes;  // one page of K (or V): 16 keys
constexpr int kTileBytes = kSubtile * kRowBytes;

// Where the K and V bytes lie (the read kernels' `mode`):
enum : int {
  kPaged = 0,       // paged NHD [pages][16][Hkv][d], K and V two caches, through table[b][t]
  kContiguous = 1,  // contiguous [B][Hkv][S][d]
  kPagedPool = 2,   // paged NHD with K and V of a page side by side in one pool,
                    // [pages][2][16][Hkv][d] (the caller passes v = k + one page)
};
// Where a warp's t-th subtile (subtile warp + 4 t of the block's sequence and KV head) lies: the
// paged modes through the page table, page ids 32 subtiles at a time, one per lane, taken by
// shuffle (as kernels/decodeattn); kContiguous in [B, Hkv, S, d]. Warp-uniform calls, t increasing.
// A block reads `heads` KV heads of one sequence (blockIdx.x * heads + threadIdx.x / 128), 4 warps
// each; warp is the warp's index within its head's 4, slot its index within the block.
struct SubtileSource {
  int lane, warp, slot, kvh, b, subtiles, mode, count;  // count: the warp's subtiles
  const int* row;
  int pages = 0, pages_batch = -1;
  __device__ SubtileSource(const int* table, int subtiles_, int mode_, int heads = 1)
      : lane(static_cast<int>(threadIdx.x) & 31),
        warp((static_cast<int>(threadIdx.x) >> 5) & 3),
        slot(static_cast<int>(threadIdx.x) >> 5),
        kvh(static_cast<int>(blockIdx.x) * heads + (static_cast<int>(threadIdx.x) >> 7)),
        b(static_cast<int>(blockIdx.y)),
        subtiles(subtiles_),
        mode(mode_),
        count(subtiles_ > warp ? (subtiles_ - warp + 3) / 4 : 0),
        row(table + static_cast<long long>(b) * subtiles_) {}
  // Copies K (or V: src) rows of subtile t into the [16][d] tile at dst.
  __device__ void copy(unsigned char* dst, const unsigned char* src, int t) {
    long long base, row_stride;
    if (mode != kContiguous) {
      if ((t >> 5) != pages_batch) {
        pages_batch = t >> 5;
        const int mine = 32 * pages_batch + lane;
        pages = mine < count ? row[warp + 4 * mine] : 0;
      }
      const int page = __shfl_sync(0xffffffffu, pages, t & 31);
      base = static_cast<long long>(page) * (mode == kPagedPool ? 2 : 1) * kPageBytes +
             static_cast<long long>(kvh) * kRowBytes;
      row_stride = kHkv * kRowBytes;
    } else {
      base = ((static_cast<long long>(b) * kHkv + kvh) * subtiles +
              static_cast<long long>(warp + 4 * t)) *
             kSubtile * kRowBytes;
      row_stride = kRowBytes;
    }
#pragma unroll
    for (int i = 0; i < kSubtile * (kRowBytes / 16) / 32; ++i) {
      const int id = i * 32 + lane, r = id / (kRowBytes / 16), c = id % (kRowBytes / 16);
      cpAsync16(dst + r * kRowBytes + c * 16, src + base + r * row_stride + c * 16);
    }
  }
};

// A subtile's consumer: every byte of its K and V tiles through shared memory (as ldmatrix reads
// them), or one word of each, then a dependent chain of kWork FMAs (the latency of its math).
template <int kWork, bool kReadAll>
__device__ __forceinline__ unsigned consume(const unsigned char* k_tile,
                                            const unsigned char* v_tile) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  unsigned word = 0;
  for (const unsigned char* tile : {k_tile, v_tile}) {
    if constexpr (kReadAll) {
#pragma unroll
      for (int r = 0; r < kTileBytes / 512; ++r) {
        const uint4 q = reinterpret_cast<const uint4*>(tile + r * 512)[lane];
        word ^= q.x ^ q.y ^ q.z ^ q.w;
      }
    } else {
      word ^= reinterpret_cast<const unsigned*>(tile)[lane];
    }
  }
  float x = __uint_as_float(word & 0x3f800000u);
#pragma unroll
  for (int f = 0; f < kWork; ++f) x = fmaf(x, 1.0001f, 1e-7f);
  return word ^ __float_as_uint(x);
}

__device__ __forceinline__ unsigned long long globalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}

// times: nullptr, or [blocks][2] nanoseconds (%globaltimer) at the block's start and at its end
// (after every warp's last subtile): the timeline mode's per-block spans.
__device__ __forceinline__ void recordSpan(unsigned long long* times, unsigned long long start) {
  if (times == nullptr) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned block = blockIdx.y * gridDim.x + blockIdx.x;
    times[2 * block] = start;
    times[2 * block + 1] = globalTimer();
  }
}

template <int kWork, bool kReadAll, int kHeads = 1>
__global__ void __launch_bounds__(128 * kHeads, 2 / kHeads)
    kvRead(const unsigned char* k, const unsigned char* v, const int* table, int subtiles, int mode,
           unsigned* out, unsigned long long* times = nullptr) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned long long start = times != nullptr ? globalTimer() : 0;
  SubtileSource source(table, subtiles, mode, kHeads);
  unsigned char* mine = smem + source.slot * kStages * 2 * kTileBytes;
  auto issue = [&](int t) {  // K and V of subtile t into stage t % kStages
    if (t < source.count) {
      unsigned char* stage = mine + (t % kStages) * 2 * kTileBytes;
      source.copy(stage, k, t);
      source.copy(stage + kTileBytes, v, t);
    }
    cpAsyncCommit();
  };
  unsigned acc = 0;
  for (int t = 0; t < kStages - 1; ++t) issue(t);
  for (int i = 0; i < source.count; ++i) {
    issue(i + kStages - 1);
    cpAsyncWait<kStages - 1>();
    __syncwarp();
    const unsigned char* stage = mine + (i % kStages) * 2 * kTileBytes;
    acc ^= consume<kWork, kReadAll>(stage, stage + kTileBytes);
    __syncwarp();
  }
  cpAsyncWait<0>();
  out[(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x] = acc;
  recordSpan(times, start);
}

// The same read with a ring of kHalves half-stages (K or V of one subtile, 4 KiB at d128) per
// warp instead of 3 stages of both: with 7, 5 halves (2.5 subtiles) are in flight while one
// subtile is consumed, against 2 subtiles with 3 stages, in 112 KiB per block (2 per SM on sm_90).
template <int kWork, int kHalves>
__global__ void __launch_bounds__(128, 2)
    kvRing(const unsigned char* k, const unsigned char* v, const int* table, int subtiles, int mode,
           unsigned* out, unsigned long long* times = nullptr) {
  extern __shared__ __align__(16) unsigned char smem[];
  const unsigned long long start = times != nullptr ? globalTimer() : 0;
  constexpr int kAhead = kHalves - 2;  // halves in flight while one subtile (2 halves) is consumed
  SubtileSource source(table, subtiles, mode);
  unsigned char* mine = smem + source.warp * kHalves * kTileBytes;
  auto issue = [&](int h) {  // half h: K (even) or V (odd) of subtile h / 2, into slot h % kHalves
    if ((h >> 1) < source.count)
      source.copy(mine + (h % kHalves) * kTileBytes, (h & 1) ? v : k, h >> 1);
    cpAsyncCommit();
  };
  unsigned acc = 0;
  for (int h = 0; h < kAhead; ++h) issue(h);
  for (int i = 0; i < source.count; ++i) {
    issue(2 * i + kAhead);
    issue(2 * i + kAhead + 1);
    cpAsyncWait<kAhead>();  // halves 2i and 2i + 1 have landed
    __syncwarp();
    acc ^= consume<kWork, true>(mine + ((2 * i) % kHalves) * kTileBytes,
                                mine + ((2 * i + 1) % kHalves) * kTileBytes);
    __syncwarp();
  }
  cpAsyncWait<0>();
  out[(blockIdx.y * gridDim.x + blockIdx.x) * 128 + threadIdx.x] = acc;
  recordSpan(times, start);
}

// ---- timing
// --------------------------------------------------------------------------------------

template <typename F>
double medianUs(F&& launch, int sets, int runs = 40, int warmup = 8) {
  for (int i = 0; i < warmup; ++i) launch(i % sets);
  std::vector<cudaEvent_t> a(runs), z(runs);
  for (int i = 0; i < runs; ++i) {
    CHECK(cudaEventCreate(&a[i]));
    CHECK(cudaEventCreate(&z[i]));
  }
  for (int i = 0; i < runs; ++i) {
    spin<<<1, 1>>>(400000);
    CHECK(cudaEventRecord(a[i]));
    launch(i % sets);
    CHECK(cudaEventRecord(z[i]));
  }
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  std::vector<double> us(runs);
  for (int i = 0; i < runs; ++i) {
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a[i], z[i]));
    us[i] = ms * 1e3;
    CHECK(cudaEventDestroy(a[i]));
    CHECK(cudaEventDestroy(z[i]));
  }
  std::nth_element(us.begin(), us.begin() + runs / 2, us.end());
  return us[runs / 2];
}

void gdnRows(int sms, std::size_t l2) {
  for (int batch : {1, 8, 32, 256}) {
    const std::size_t set_bytes = static_cast<std::size_t>(batch) * kHv * kHeadFloats * 4;
    const int sets =
        static_cast<int>(std::clamp<std::size_t>((4 * l2 + set_bytes - 1) / set_bytes, 2, 8));
    float* state = nullptr;
    float* dst = nullptr;
    float* out = nullptr;
    int* slots = nullptr;
    CHECK(cudaMalloc(&state, set_bytes * sets));
    CHECK(cudaMalloc(&dst, set_bytes * sets));
    CHECK(cudaMalloc(&out, static_cast<std::size_t>(batch) * kHv * kD * 4));
    CHECK(cudaMalloc(&slots, sizeof(int) * batch * sets));
    CHECK(cudaMemset(state, 0, set_bytes * sets));
    std::vector<int> h(static_cast<std::size_t>(batch) * sets);
    std::mt19937 rng(1);
    for (int s = 0; s < sets; ++s) {
      std::vector<int> perm(batch);
      std::iota(perm.begin(), perm.end(), s * batch);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::copy(perm.begin(), perm.end(), h.begin() + static_cast<std::ptrdiff_t>(s) * batch);
    }
    CHECK(cudaMemcpy(slots, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
    const double floor_bytes = 2.0 * set_bytes;
    auto report = [&](const char* path, int depth, int grid, double us) {
      std::printf(
          "{\"probe\": \"gdn\", \"path\": \"%s\", \"depth\": %d, \"batch\": %d, \"grid\": %d, "
          "\"sets\": %d, \"us\": %.2f, \"tbps\": %.3f}\n",
          path, depth, batch, grid, sets, us, floor_bytes / (us * 1e-6) / 1e12);
    };
    report("copy", 0, 0,
           medianUs(
               [&](int s) {
                 CHECK(cudaMemcpyAsync(dst + s * (set_bytes / 4), state + s * (set_bytes / 4),
                                       set_bytes, cudaMemcpyDeviceToDevice));
               },
               sets));
    auto direct = [&](const char* path, auto kernel, int tiles) {
      report(path, 0, batch * kHv * 4 / tiles,
             medianUs(
                 [&](int s) {
                   kernel<<<dim3(kD / kTile / tiles, kHv, batch), dim3(kTile, kRowSplit, tiles)>>>(
                       state, slots + s * batch, out);
                 },
                 sets));
    };
    direct("direct", gdnDirect<1, false>, 1);
    direct("direct_cs", gdnDirect<1, true>, 1);
    direct("merged2", gdnDirect<2, false>, 2);
    direct("merged4", gdnDirect<4, false>, 4);
    direct("merged4_cs", gdnDirect<4, true>, 4);
    report("v4", 0, batch * kHv * 4,
           medianUs(
               [&](int s) {
                 gdnV4<<<dim3(kD / kTile, kHv, batch), dim3(kTile, kRowSplit)>>>(
                     state, slots + s * batch, out);
               },
               sets));
    auto head = [&](const char* path, auto kernel, int warps, int blocks_per_head) {
      report(path, 0, batch * kHv * blocks_per_head,
             medianUs(
                 [&](int s) {
                   kernel<<<dim3(kHv * blocks_per_head, batch), 32 * warps>>>(
                       state, slots + s * batch, out);
                 },
                 sets));
    };
    head("head", gdnHead<16, 1, false, 2>, 16, 1);
    head("head_cs", gdnHead<16, 1, true, 2>, 16, 1);
    head("head8", gdnHead<8, 1, false, 2>, 8, 1);
    head("half", gdnHead<8, 2, false, 4>, 8, 2);
    const int items = batch * kHv * (kD / kTile);
    auto pipelined = [&](auto kernel, int depth) {
      const int smem = depth * kItemFloats * 4;
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int per_sm = 0;
      CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 128, smem));
      const int grid = std::min(items, per_sm * sms);
      // The slots of a set index that set's pool: slot values are s * batch + perm.
      report("pipelined", depth, grid,
             medianUs(
                 [&](int s) {
                   kernel<<<grid, dim3(kTile, kRowSplit), smem>>>(state, slots + s * batch, out,
                                                                  items);
                 },
                 sets));
    };
    pipelined(gdnPipelined<1>, 1);
    pipelined(gdnPipelined<2>, 2);
    CHECK(cudaFree(state));
    CHECK(cudaFree(dst));
    CHECK(cudaFree(out));
    CHECK(cudaFree(slots));
  }
}

// The timeline of one kvRead launch: when its blocks end, counted from the first block's start
// (median over the runs of each statistic, in us): how much of the kernel is a tail in which
// fewer blocks than the GPU holds are left streaming.
struct Timeline {
  double start_max, end_p10, end_p50, end_p90, end_max;  // end_max: the launch's span
};
// t: one launch's [blocks][2] start and end times.
Timeline timelineOf(const unsigned long long* t, std::size_t blocks) {
  unsigned long long t0 = ~0ull;
  for (std::size_t i = 0; i < blocks; ++i) t0 = std::min(t0, t[2 * i]);
  std::vector<double> starts(blocks), ends(blocks);
  for (std::size_t i = 0; i < blocks; ++i) {
    starts[i] = (t[2 * i] - t0) * 1e-3;
    ends[i] = (t[2 * i + 1] - t0) * 1e-3;
  }
  std::sort(ends.begin(), ends.end());
  auto at = [&](double q) { return ends[static_cast<std::size_t>(q * (blocks - 1))]; };
  return {*std::max_element(starts.begin(), starts.end()), at(0.1), at(0.5), at(0.9), ends.back()};
}

// Where the pages of the cache lie: `window` consecutive page-table entries are a permutation of
// the same `window` pages (aligned runs of the pool; 0: in order; the pool's size: anywhere), or
// K and V are contiguous [batch, Hkv, keys, d] tensors instead of a paged cache.
struct Layout {
  const char* name;
  int window;
  bool contiguous;
  bool sorted = false;   // each sequence's row of the table in ascending page order: its own pages,
                         // read in address order, so that all blocks sweep the pool together
  bool kv_pool = false;  // K and V of a page side by side in one pool (kPagedPool), not two caches
};
constexpr int kAnywhere = 1 << 30;
constexpr Layout kLayouts[] = {
    {"paged_random", kAnywhere, false}, {"paged_sequential", 0, false}, {"contiguous", 0, true}};
// The locality sweep: pages shuffled within runs of 8 / 64 / 512 pages (256 KiB / 2 MiB / 16 MiB
// of K at d128 bf16, 8 KV heads, 32 KiB a page), between the random and in-order tables; and the
// random table with each sequence's pages sorted (attention does not depend on the key order).
constexpr Layout kLocalityLayouts[] = {{"paged_random", kAnywhere, false},
                                       {"paged_random_sorted", kAnywhere, false, true},
                                       {"paged_random_kvpool", kAnywhere, false, false, true},
                                       {"paged_sequential_kvpool", 0, false, false, true},
                                       {"paged_window512", 512, false},
                                       {"paged_window64", 64, false},
                                       {"paged_window8", 8, false},
                                       {"paged_sequential", 0, false},
                                       {"contiguous", 0, true}};

// kHeads: KV heads per block (kvRead only): 2 puts a sequence's two heads, which read the same
// pages (NHD), in one block of 8 warps on one SM.
template <int kWork, bool kReadAll, int kHalves = 0, int kHeads = 1>
void kvRows(const char* variant, bool timeline = false, bool locality = false) {
  static_assert(kHeads == 1 || kHalves == 0, "kvRing reads one KV head per block");
  const int smem = kHalves ? 4 * kHalves * kTileBytes : kHeads * 4 * kStages * 2 * kTileBytes;
  auto kvRead_ = [] {
    if constexpr (kHalves > 0)
      return kvRing<kWork, kHalves>;
    else
      return kvRead<kWork, kReadAll, kHeads>;
  }();
  const int heads_x = kHkv / kHeads;  // the grid's x: blocks per sequence
  const dim3 block(128 * kHeads);
  CHECK(cudaFuncSetAttribute(kvRead_, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int shapes[][2] = {{32, 4096}, {64, 2048}, {256, 1024}, {8, 8192}};
  for (const auto& shape : shapes) {
    const int batch = shape[0], keys = shape[1], subtiles = keys / kSubtile;
    const std::size_t bytes = static_cast<std::size_t>(batch) * keys * kHkv * kRowBytes;  // of K
    // K and V: the two halves of one allocation (K, then V), or in the kvpool layouts one pool
    // of pages holding K and V side by side.
    unsigned char* pool = nullptr;
    int* table = nullptr;
    unsigned* out = nullptr;
    CHECK(cudaMalloc(&pool, 2 * bytes));
    unsigned char *const k = pool, *const v = pool + bytes;
    CHECK(cudaMemset(k, 1, bytes));
    CHECK(cudaMemset(v, 2, bytes));
    CHECK(cudaMalloc(&table, sizeof(int) * batch * subtiles));
    CHECK(cudaMalloc(&out, sizeof(unsigned) * batch * kHkv * 128));
    const int blocks = heads_x * batch;
    // The timeline's launches: 5 warm-up, then 11 recorded, back to back behind a spin kernel as
    // medianUs times them, each into its own slice; copied back once, after the last.
    constexpr int kWarmLaunches = 5, kTimelineLaunches = 16;
    const std::size_t per_launch = 2 * static_cast<std::size_t>(blocks);
    unsigned long long* times = nullptr;
    if (timeline)
      CHECK(cudaMalloc(&times, sizeof(unsigned long long) * per_launch * kTimelineLaunches));
    const auto layouts =
        locality ? std::vector<Layout>(std::begin(kLocalityLayouts), std::end(kLocalityLayouts))
                 : std::vector<Layout>(std::begin(kLayouts), std::end(kLayouts));
    for (const Layout& layout : layouts) {
      std::vector<int> h(static_cast<std::size_t>(batch) * subtiles);
      std::iota(h.begin(), h.end(), 0);
      std::mt19937 rng(7);
      for (std::size_t at = 0; layout.window > 1 && at < h.size(); at += layout.window) {
        const auto end = h.begin() + std::min(h.size(), at + layout.window);
        std::shuffle(h.begin() + at, end, rng);
      }
      for (std::size_t row = 0; layout.sorted && row < h.size(); row += subtiles)
        std::sort(h.begin() + row, h.begin() + row + subtiles);
      CHECK(cudaMemcpy(table, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
      const int mode = layout.contiguous ? kContiguous : (layout.kv_pool ? kPagedPool : kPaged);
      // The pool layout: K of page p at 2 p pages into the allocation, V one page after it.
      unsigned char* const kk = layout.kv_pool ? pool : k;
      unsigned char* const vv = layout.kv_pool ? pool + kPageBytes : v;
      if (timeline) {
        for (int run = 0; run < kTimelineLaunches; ++run) {
          spin<<<1, 1>>>(400000);
          kvRead_<<<dim3(heads_x, batch), block, smem>>>(kk, vv, table, subtiles, mode, out,
                                                         times + run * per_launch);
        }
        std::vector<unsigned long long> t(per_launch * kTimelineLaunches);
        CHECK(cudaMemcpy(t.data(), times, t.size() * sizeof(t[0]), cudaMemcpyDeviceToHost));
        std::vector<Timeline> runs;
        for (int run = kWarmLaunches; run < kTimelineLaunches; ++run)
          runs.push_back(timelineOf(t.data() + run * per_launch, blocks));
        auto median = [&](double Timeline::*field) {
          std::vector<double> x;
          for (const Timeline& r : runs) x.push_back(r.*field);
          std::nth_element(x.begin(), x.begin() + x.size() / 2, x.end());
          return x[x.size() / 2];
        };
        std::printf(
            "{\"probe\": \"decodeattn_timeline\", \"variant\": \"%s\", \"path\": \"%s\", "
            "\"batch\": %d, \"keys\": %d, \"blocks\": %d, "
            "\"last_start_us\": %.2f, \"end_p10_us\": %.2f, \"end_p50_us\": %.2f, "
            "\"end_p90_us\": %.2f, \"end_max_us\": %.2f}\n",
            variant, layout.name, batch, keys, blocks, median(&Timeline::start_max),
            median(&Timeline::end_p10), median(&Timeline::end_p50), median(&Timeline::end_p90),
            median(&Timeline::end_max));
        continue;
      }
      const auto launch = [&](int) {
        kvRead_<<<dim3(heads_x, batch), block, smem>>>(kk, vv, table, subtiles, mode, out, nullptr);
      };
      const double us = medianUs(launch, 1, 30, 5);
      std::printf(
          "{\"probe\": \"decodeattn\", \"variant\": \"%s\", \"path\": \"%s\", "
          "\"batch\": %d, \"keys\": %d, \"us\": %.2f, \"tbps\": %.3f}\n",
          variant, layout.name, batch, keys, us, 2.0 * bytes / (us * 1e-6) / 1e12);
    }
    if (times != nullptr) CHECK(cudaFree(times));
    CHECK(cudaFree(pool));
    CHECK(cudaFree(table));
    CHECK(cudaFree(out));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  CHECK(cudaDriverGetVersion(&driver));
  std::printf(
      "{\"device\": \"%s\", \"sm\": %d%d, \"sms\": %d, \"l2_bytes\": %d, \"driver_api\": %d}\n",
      prop.name, prop.major, prop.minor, prop.multiProcessorCount, prop.l2CacheSize, driver);
  // 1 GiB device-to-device copy: the bench's copy ceiling (bytes read + written).
  {
    const std::size_t n = std::size_t{1} << 30;
    void *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    CHECK(cudaMemset(a, 1, n));
    const double us =
        medianUs([&](int) { CHECK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice)); }, 1, 10, 2);
    std::printf("{\"probe\": \"copy_1gib\", \"us\": %.1f, \"tbps\": %.3f}\n", us,
                2.0 * n / (us * 1e-6) / 1e12);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }
  if (which == "all" || which == "gdn")
    gdnRows(prop.multiProcessorCount, static_cast<std::size_t>(prop.l2CacheSize));
  if (which == "all" || which == "decodeattn") {
    kvRows<0, false>("read");
    kvRows<0, true>("read+smem");
    kvRows<128, true>("read+smem+chain128");
    kvRows<128, true, 6>("ring6+chain128");
    kvRows<128, true, 7>("ring7+chain128");
    kvRows<256, true>("read+smem+chain256");
    kvRows<256, true, 7>("ring7+chain256");
  }
  if (which == "locality") {  // how the read's rate falls as the pages scatter
    kvRows<128, true>("read+smem+chain128", false, true);
    kvRows<128, true, 0, 2>("two_heads+chain128", false, true);
  }
  if (which == "timeline") {  // when the blocks of a launch end (decodeattn's read, two consumers)
    kvRows<0, true>("read+smem", true);
    kvRows<128, true>("read+smem+chain128", true);
  }
  return 0;
}
