// The decodeattn runner: decode attention (one query token per sequence, or T = query_tokens of
// them for multi-token / speculative decoding) over a paged KV cache, on the caller's stream,
// into the caller's workspace.
//
//   out[b, t, h, :] = softmax_j(scale * q[b, t, h, :] . K[b, j, h / G, :]) . V[b, j, h / G, :]
//                     over the keys j < seq_lens[b] - (T - 1 - t) of sequence b, G = q_heads /
//                     kv_heads
//
// (causal over the T tokens, whose own keys are the last T of the sequence; a row with no key,
// seq_lens[b] <= T - 1 - t, is zeros). Layouts (row-major, contiguous, the problem's dtype unless
// noted):
//   q, out       [batch, query_tokens, q_heads, head_dim]
//   k_cache,     kKvNHD: [num_pages, page_size, kv_heads, head_dim]   key j of sequence b is in
//   v_cache      kKvHND: [num_pages, kv_heads, page_size, head_dim]   page page_table[b, j /
//                                                                     page_size], row j % page_size
//   page_table   [batch, max_pages_per_seq] int32
//   seq_lens     [batch] int32, 0 <= seq_lens[b] <= max_pages_per_seq * page_size
// The head dim and the dtype are baked per variant; everything else is a run-time value. Long
// sequences that would leave the GPU idle are split into key ranges (split-KV), merged by a second
// kernel; the split count comes from the device's SM count, and the workspace holds the fp32
// partials. Variants, limits and the error bound: kernels/decodeattn/README.md.
//
// One selector (kernels/decodeattn/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::decodeattn {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// The order of a cache page's dimensions. NHD (key-major: all heads of a key together) is vLLM's
// and FlashInfer's default; HND (head-major: a head's keys of a page together, page_size x
// head_dim contiguous) is TensorRT-LLM's and FlashInfer's other layout. Same kernel, same speed
// class: the kernel takes strides. HND reads each (page, head) as one contiguous run.
enum class KvLayout { kNHD, kHND };

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/decodeattn.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "decodeattn_d128_bf16"
  int head_dim;                      // baked head dim
  DType dtype;                       // baked dtype
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct Problem {
  DType dtype = DType::kBFloat16;
  int batch = 0;    // 0 is a no-op: pointers are not checked and nothing is touched
  int q_heads = 0;  // a multiple of kv_heads
  int kv_heads = 0;
  int head_dim = 0;                     // one of the artifact's baked head dims (64, 128)
  int query_tokens = 1;                 // T, 1..kMaxQueryTokens (8): query tokens per sequence
  int page_size = 16;                   // a power of two, 16..256
  KvLayout kv_layout = KvLayout::kNHD;  // both caches
  int num_pages = 0;                    // pages in each cache
  int max_pages_per_seq = 0;            // the page table's row length
  // An upper bound of seq_lens that the caller knows on the host (0: max_pages_per_seq *
  // page_size). Only the split count depends on it; a sequence longer than it is still exact.
  int max_seq_len = 0;
  // The SM count the split count is chosen for. 0: run() uses the stream's device, and
  // workspaceSize() returns a size that is enough for any device of up to kMaxMultiprocessors SMs.
  // Set it (kiln::deviceForStream(...).multiprocessors) to size the workspace exactly.
  int multiprocessors = 0;
  float scale = 0.0f;  // softmax scale, finite (usually 1 / sqrt(head_dim))
  void* out = nullptr;
  const void* q = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const std::int32_t* page_table = nullptr;
  const std::int32_t* seq_lens = nullptr;
  // Programmatic dependent launch of the attention kernel, the first launch of a run
  // (kiln::LaunchConfig::programmatic_dependency). On sm_90 and newer it may become resident while
  // the kernel before it on the stream still runs (as soon as that kernel completes or releases
  // its dependents, griddepcontrol.launch_dependents), hiding its launch latency behind that
  // kernel's tail. It waits (griddepcontrol.wait: the kernel before complete, its writes visible)
  // before it reads or writes any global memory, so every input (q, the caches, page_table,
  // seq_lens) may be written, and out and the workspace read or written, by the kernel before
  // (qkrope with overlap_launch, say): the wait orders them.
  // Whatever overlap_launch is, the attention kernel releases its own dependents right after its
  // wait: a split problem's merge, which is always launched as a programmatic dependent of it
  // (sm_90+) and waits for the whole attention grid before its first read, and without a merge
  // the caller's next kernel when that is a programmatic dependent (gemv with overlap_launch). The
  // merge too waits, then releases the caller's next kernel. Such a kernel runs beside this run's
  // last kernel and must wait before it reads out or writes any of this run's inputs, outputs or
  // workspace. Below sm_90 (an image compiled below sm_90, or a driver without cuLaunchKernelEx)
  // every launch is an ordinary one; the results are the same either way.
  bool overlap_launch = false;
};

// workspaceSize() with multiprocessors == 0 covers every device up to this many SMs.
inline constexpr int kMaxMultiprocessors = 256;
// Query tokens per sequence (multi-token / speculative decoding), at most. A block's 16 mma rows
// are (token, query head) pairs of one KV head, so GQA 4 x 4 tokens is one tile per KV head; more
// rows take more blocks, each reading that KV head's keys again (README.md, "Multi-token").
inline constexpr int kMaxQueryTokens = 8;

// Host-side admission: a variant for (head_dim, dtype) is built (else kNotSupported, naming the
// built head dims), the shape and page size are valid, pointers are non-null and aligned (q, out,
// caches 16 bytes; page_table, seq_lens 4 bytes), sizes fit the kernel's index and grid limits
// (else kInvalidArgument, naming the value and the limit).
Status canImplement(const Problem& problem);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs: the split-KV partials (0 when one split covers every
// sequence), 256-byte aligned sections. Depends only on the problem (with its multiprocessors).
std::size_t workspaceSize(const Problem& problem);
// The number of key ranges each sequence is split into for `multiprocessors` SMs (what run() and
// workspaceSize() use); 0 when the problem is not admitted.
int numSplits(const Problem& problem, int multiprocessors);
// Admits and launches on `stream` (the device that owns it picks the image and, when
// problem.multiprocessors is 0, the split count). The workspace must be 16-byte aligned and hold
// workspaceSize(problem) bytes when that is non-zero. batch == 0 returns ok and touches nothing.
// The kernel trusts seq_lens and page_table to describe the cache: it clamps lengths to
// [0, max_pages_per_seq * page_size] and page ids to [0, num_pages) so that no access leaves the
// buffers, but the output of a sequence with such values is meaningless.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::decodeattn
