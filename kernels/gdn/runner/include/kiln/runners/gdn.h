// The gdn runner: Gated DeltaNet on the caller's stream, in four problems: Problem (decode, one
// token per sequence, the state updated in place), MtpProblem (T draft tokens per sequence, every
// intermediate state written to a cache, the state pool only read), CommitProblem (the copy of
// each sequence's accepted state from MtpProblem's [batch, T] cache into the pool) and
// PrefillProblem (whole prompts, varlen, the chunked form; at the end of this file).
//
//   per sequence b with slots[b] >= 0 and value head hv (query/key head hv / (Hv / H)):
//     q, k L2-normalised;  S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = scale S^T q
//   S = state[slots[b], hv] is float32 d_k x d_v and is updated in place. A negative slot skips
//   the sequence: neither its state nor its output is touched.
//
// Layouts (contiguous, row-major): q, k [batch, H, d_k] and v, out [batch, Hv, d_v] in the dtype;
// g, beta [batch, Hv] float32 (the gates as the model computes them), or instead the gating inputs
// they are computed from (Gating, below: the kernel then computes them itself); state [num_slots,
// Hv, d_k, d_v] float32; slots [batch] int32. d_k and d_v are baked per variant
// (kernels/gdn/kiln.toml); the kernel is written in CuTe DSL, which makes no difference to this
// interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::gdn {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// The gates in the form the model has them, for the variants that compute them in the kernel
// (the `_gating` families; fused gating): per (sequence[, token], value head hv)
//   g = -exp(a_log[hv]) * softplus(a + dt_bias[hv])   (softplus(x) = x for x > 20, as torch's)
//   beta = sigmoid(b)
// A problem gives either g and beta or all four of these, never both forms.
// One variant of the artifact: a row of the table kiln build generates (kiln/groups/gdn.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;
  int head_dim_k;
  int head_dim_v;
  int tile_v;           // state columns per block (block.x)
  int row_split;        // warps per block splitting the d_k rows (block.y)
  int tiles_per_block;  // column tiles of one value head per block (block.z)
  int max_tokens;       // tokens per sequence per launch: 1 (gdn_decode), 8 (gdn_decode_mtp, and
                        // the cache gdn_mtp_commit reads), 0 (gdn_prefill: no limit)
  int chunk;            // tokens per chunk of gdn_prefill; 0 for the decode-path families
  bool fused_gating;    // computes g, beta from Gating's inputs (the `_gating` families)
  DType dtype;          // the activation dtype; kFloat32 for gdn_mtp_commit (it moves states only)
  const kiln_variant* (*variant)();
};

struct Gating {
  const void* a = nullptr;         // [batch(, T), Hv] in the dtype: the layer's projection output
  const void* b = nullptr;         // [batch(, T), Hv] in the dtype
  const float* a_log = nullptr;    // [Hv] float32: the layer's A_log parameter
  const float* dt_bias = nullptr;  // [Hv] float32: the layer's dt_bias parameter

  bool given() const {
    return a != nullptr || b != nullptr || a_log != nullptr || dt_bias != nullptr;
  }
};

struct Problem {
  DType dtype = DType::kBFloat16;
  std::int64_t batch = 0;     // 0 is a no-op: pointers are not checked and nothing is touched
  std::int64_t heads_qk = 0;  // H
  std::int64_t heads_v = 0;   // Hv, a multiple of H
  std::int64_t head_dim_k = 128;
  std::int64_t head_dim_v = 128;
  std::int64_t num_slots = 0;  // state pool size; slots[b] < num_slots is the caller's promise
  float scale = 0.0f;          // usually 1 / sqrt(d_k); finite
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;     // null when the gating inputs are given instead
  const float* beta = nullptr;  // null when the gating inputs are given instead
  Gating gating;                // or: the inputs g and beta are computed from, in the kernel
  void* out = nullptr;
  float* state = nullptr;
  const std::int32_t* slots = nullptr;
};

// Host-side admission, naming the value and the limit: (d_k, d_v, dtype) built in the artifact
// ("gdn: head dims 64x64 are not built for bf16; built: 128x128 (bf16, fp16)"), for the gate form
// given (fused gating needs a `_gating` variant), H >= 1, Hv a multiple of H, batch and Hv within
// the grid limits, one gate form, pointers non-null and aligned.
Status canImplement(const Problem& problem);
// The same, and the artifact has an image for a device of SM `device_sm` (names the SMs).
Status canImplement(const Problem& problem, int device_sm);
// 0: the state is updated in place; the contract is uniform across groups.
std::size_t workspaceSize(const Problem& problem);
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

// Multi-token decode, the verify step of speculative decoding (MTP / EAGLE draft tokens): per live
// sequence b and value head hv, starting from S = state[slots[b], hv], for t = 0 .. tokens - 1 the
// same rule as Problem on token t, then
//   cache[e, hv] = S (the state after token t)   and   out[b, t, hv] = o,
// with the cache entry e of (b, t) in one of two layouts:
//   - cache_slots null (SGLang's verify with disable_state_update): e = b * T + t, the cache is
//     [batch, T, Hv, d_k, d_v], sized by the batch, and must not overlap the pool. After accepting
//     n of the T tokens (n >= 1), cache[b, n - 1] (Hv * d_k * d_v floats, contiguous, the
//     pool's layout) is copied into state[slots[b]]: run(CommitProblem) below does it on the
//     device, with the counts read there.
//   - cache_slots given (vLLM's slot per draft position): e = cache_slots[b, t], the cache is
//     [cache_entries, Hv, d_k, d_v] and may be the pool itself (cache == state, cache_entries ==
//     num_slots). Accepting n tokens is then the caller making cache_slots[b, n - 1] the sequence's
//     slot: nothing is copied. A negative entry keeps no state for that token: with every entry
//     but the last negative and the last slots[b], the T tokens are decoded in place, as T decode
//     steps would leave the pool, at one read and one write of the state. The caller promises that
//     the non-negative entries of live sequences are < cache_entries and distinct and, in the pool,
//     none of them another live sequence's slot (each sequence's blocks read its slot, once,
//     before writing any entry; other sequences' blocks may run at any time).
// The pool is read at slots[b] only. A negative slot skips the sequence: neither its outputs nor
// its cache entries are touched. tokens = 1 is a decode step whose new state goes to the cache.
//
// Layouts (contiguous, row-major): q, k [batch, T, H, d_k] and v, out [batch, T, Hv, d_v] in the
// dtype; g, beta [batch, T, Hv] float32 (or Gating, with a and b [batch, T, Hv] in the dtype);
// state [num_slots, Hv, d_k, d_v] float32; slots [batch] int32; cache as above, float32;
// cache_slots [batch, T] int32. T is a run-time value in 1 .. max_tokens, which kiln.toml bakes per
// variant (8).
struct MtpProblem {
  DType dtype = DType::kBFloat16;
  std::int64_t batch = 0;     // 0 is a no-op: pointers are not checked and nothing is touched
  std::int64_t tokens = 0;    // T, 1 .. the variant's max_tokens
  std::int64_t heads_qk = 0;  // H
  std::int64_t heads_v = 0;   // Hv, a multiple of H
  std::int64_t head_dim_k = 128;
  std::int64_t head_dim_v = 128;
  std::int64_t num_slots = 0;  // state pool size; slots[b] < num_slots is the caller's promise
  float scale = 0.0f;          // usually 1 / sqrt(d_k); finite
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;     // null when the gating inputs are given instead
  const float* beta = nullptr;  // null when the gating inputs are given instead
  Gating gating;                // or: the inputs g and beta are computed from, per token
  void* out = nullptr;
  const float* state = nullptr;  // read only, unless it is also the cache
  const std::int32_t* slots = nullptr;
  float* cache = nullptr;
  const std::int32_t* cache_slots = nullptr;  // null: cache[b, t]; else cache[cache_slots[b, t]]
  std::int64_t cache_entries = 0;             // the states the cache holds; with cache_slots only
};

// Admission as for Problem, and: a gdn_decode_mtp variant built for (d_k, d_v, dtype), 1 <= tokens
// <= its max_tokens ("gdn: tokens 9 exceeds max_tokens 8 of gdn_decode_mtp_dk128_dv128_bf16"),
// cache non-null and 16-byte aligned; without cache_slots, cache_entries 0 and the cache not
// overlapping the pool; with them, cache_slots 4-byte aligned, cache_entries >= 1, and the cache
// either the pool (cache_entries == num_slots) or not overlapping it.
Status canImplement(const MtpProblem& problem);
Status canImplement(const MtpProblem& problem, int device_sm);
// 0: the cache is the caller's output, not scratch.
std::size_t workspaceSize(const MtpProblem& problem);
Status run(const MtpProblem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

// The MTP commit, after a multi-token verify into a cache by batch position (MtpProblem with
// cache_slots null) and the sampler's verdict: per sequence b,
//   state[slots[b]] = cache[b, accepted[b] - 1]   (Hv * d_k * d_v floats: every value head)
// with accepted [batch] int32 in device memory, read by the kernel, so the commit needs no host
// synchronisation and can be captured in a CUDA graph with the verify. A sequence's pool slot is
// left untouched when slots[b] is negative (skipped, as in decode), when accepted[b] is 0 (no draft
// token accepted: the pool already holds the state before them), and when accepted[b] is negative
// or above tokens: such a count is out of contract and the kernel cannot report it, so it writes
// nothing rather than a state no accepted token left (the caller's check, if it wants one). Slots
// of live sequences must be distinct (as for decode); the cache is only read and must not overlap
// the pool (refused). The kernel copies 16-byte vectors: 2 * Hv * d_k * d_v * 4 bytes of traffic
// per committed sequence.
//
// Layouts (contiguous, row-major): cache [batch, tokens, Hv, d_k, d_v] float32; state [num_slots,
// Hv, d_k, d_v] float32; slots, accepted [batch] int32. The variant is
// gdn_mtp_commit_dk<d_k>_dv<d_v> (no activation dtype: kiln.toml bakes fp32, what it moves); tokens
// 1 .. its max_tokens (8).
struct CommitProblem {
  std::int64_t batch = 0;    // 0 is a no-op: pointers are not checked and nothing is touched
  std::int64_t tokens = 0;   // T of the cache, 1 .. the variant's max_tokens
  std::int64_t heads_v = 0;  // Hv
  std::int64_t head_dim_k = 128;
  std::int64_t head_dim_v = 128;
  std::int64_t num_slots = 0;  // state pool size; slots[b] < num_slots is the caller's promise
  const float* cache = nullptr;
  const std::int32_t* accepted = nullptr;  // [batch], on the device; 0 .. tokens
  const std::int32_t* slots = nullptr;
  float* state = nullptr;
};

// Admission: a gdn_mtp_commit variant built for (d_k, d_v) ("gdn: mtp commit: head dims 64x64 are
// not built; built (d_k x d_v): 128x128"), 1 <= tokens <= its max_tokens, Hv >= 1, batch and Hv
// within the grid limits, then (batch > 0) num_slots >= 1, cache and state non-null and 16-byte
// aligned, slots and accepted non-null and 4-byte aligned, the cache not overlapping the pool.
Status canImplement(const CommitProblem& problem);
Status canImplement(const CommitProblem& problem, int device_sm);
// 0: the copy needs no scratch.
std::size_t workspaceSize(const CommitProblem& problem);
Status run(const CommitProblem& problem, void* workspace, std::size_t workspace_bytes,
           Stream stream);

// Prefill: the chunked form of the same rule over whole prompts, varlen. Per sequence b (tokens
// cu_seqlens[b] .. cu_seqlens[b + 1] - 1 of the packed [T, ...] inputs) with slots[b] >= 0 and
// value head hv, starting from S = state[slots[b], hv] (or S = 0 where has_initial_state[b] is 0:
// a new sequence, its slot's old contents never read), every token of the sequence in order as
// Problem's rule, out[t, hv] = o for each, and the state after the last token written back to
// state[slots[b], hv]. A negative slot skips the sequence: none of its outputs and no slot are
// touched. A sequence of length 0 writes its starting state (zero or the slot's own) back.
//
// The kernels run the chunked form (chunks of the variant's `chunk` = 64 tokens, the WY / UT
// transform of flash-linear-attention's chunk_gated_delta_rule): a first kernel prepares every
// chunk of every sequence and value head in parallel (from the inverse (I + A)^-1 of the chunk's
// strictly lower triangular A: w and u, and the chunk's causal, decayed q k^T, into the
// workspace), a second one walks each sequence's chunks in order with the state in registers. The
// result equals the token-by-token rule up to rounding: the workspace holds w, u and the decayed,
// normalised q and k in the activation dtype (as flash-linear-attention keeps them), so the error
// is that of 16-bit intermediates (kernels/gdn/README.md has the measured bound).
//
// Layouts (contiguous, row-major): q, k [T, H, d_k] and v, out [T, Hv, d_v] in the dtype; g, beta
// [T, Hv] float32 (or Gating, with a and b [T, Hv] in the dtype); state [num_slots, Hv, d_k, d_v]
// float32; slots, has_initial_state [batch] int32; cu_seqlens [batch + 1] int32 on the device,
// cu_seqlens[0] = 0, non-decreasing, cu_seqlens[batch] = tokens, no sequence longer than
// max_seqlen (the caller's promise, as the slots are: the kernels read them on the device, so a
// runtime can capture the call in a CUDA graph).
struct PrefillProblem {
  DType dtype = DType::kBFloat16;
  std::int64_t batch = 0;       // sequences; 0 is a no-op: pointers are not checked
  std::int64_t tokens = 0;      // T, all sequences together (sizes out and the workspace)
  std::int64_t max_seqlen = 0;  // >= the longest sequence (sizes the chunk kernel's grid)
  std::int64_t heads_qk = 0;    // H
  std::int64_t heads_v = 0;     // Hv, a multiple of H
  std::int64_t head_dim_k = 128;
  std::int64_t head_dim_v = 128;
  std::int64_t num_slots = 0;  // state pool size; slots[b] < num_slots is the caller's promise
  float scale = 0.0f;          // usually 1 / sqrt(d_k); finite
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const float* g = nullptr;     // null when the gating inputs are given instead
  const float* beta = nullptr;  // null when the gating inputs are given instead
  Gating gating;                // or: the inputs g and beta are computed from, per token
  void* out = nullptr;
  float* state = nullptr;  // read at slots[b] (unless has_initial_state[b] is 0), then written
  const std::int32_t* slots = nullptr;
  const std::int32_t* cu_seqlens = nullptr;
  const std::int32_t* has_initial_state = nullptr;  // null: every sequence starts from its slot
};

// Admission as for Problem, and: a gdn_prefill variant built for (d_k, d_v, dtype, gate form),
// 0 <= tokens < 2^31, 0 <= max_seqlen <= tokens, max_seqlen >= 1 when tokens >= 1, tokens +
// max_seqlen < 2^31 (the kernels' int32 token indices); then (batch
// > 0) cu_seqlens non-null and 4-byte aligned, has_initial_state 4-byte aligned when given.
Status canImplement(const PrefillProblem& problem);
Status canImplement(const PrefillProblem& problem, int device_sm);
// The chunk kernel's output, read by the state pass (kernels/gdn/launch.h, PrefillWorkspace):
// T * Hv * (4 d * 2 + 64 * 4 + 4) bytes at 16-bit activations and d_k = d_v = d = 128, about
// 1.3 KB per token and value head (42 MB for 1k tokens at Hv 32), each array 256-byte aligned.
std::size_t workspaceSize(const PrefillProblem& problem);
Status run(const PrefillProblem& problem, void* workspace, std::size_t workspace_bytes,
           Stream stream);

}  // namespace kiln::gdn
