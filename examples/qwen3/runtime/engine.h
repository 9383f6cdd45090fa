// A Qwen3 decoder on kiln's kernels: batched greedy generation over a paged KV cache.
//
// Per layer, for the T tokens of a step (a prefill's packed prompts, or one token per sequence):
//
//   xn   = rmsnorm(h) (layer 0) or add_rmsnorm(h += mlp_out)        kiln rmsnorm
//   qkv  = xn . [Wq; Wk; Wv]^T                                        cuBLASLt
//   q, cache[slot] = qkrope(qkv)  (QK norm, RoPE, K/V into the pages)  kiln qkrope
//   attn = fmha(q, k, v) (prefill) | decodeattn(q, cache) (decode)    kiln fmha / decodeattn
//   xn   = add_rmsnorm(h += attn . Wo^T)                              cuBLASLt, kiln rmsnorm
//   mlp_out = silu_mul(xn . [Wgate; Wup]^T) . Wdown^T                 cuBLASLt, kiln decoderops
//   (a Qwen3-MoE layer: router logits = xn . Wgate^T, then the experts)  cuBLASLt, kiln moe
//
// A GPTQ checkpoint's seven projections per layer run on kiln's w4a16 instead of cuBLASLt, from
// kiln's packed int4 layout, which w4a16's repack writes once at load (the fused QKV and gate/up
// concatenated along their outputs first, on the host).
//
// then the final norm, the last token of each sequence (decoderops' row gather), the LM head in
// fp32 (cuBLASLt) and the greedy token (decoderops' argmax). The embedding is decoderops' gather.
// Every launch is on one stream; nothing synchronizes inside a step. A decode step of batch b runs
// in the CUDA graph of its bucket (the next power of two): captured once, after the bucket's first
// step ran eagerly (kiln loads a module on first use, which capture forbids), replayed with the
// positions, slots and sequence lengths copied into its fixed input buffers first; the tokens it
// embeds are the previous step's argmax, already on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kiln/dtype.h"
#include "model/checkpoint.h"
#include "runtime/cuda_util.h"
#include "runtime/gemm.h"
#include "runtime/page_allocator.h"

namespace qwen3 {

namespace detail {
// The sizes every kernel problem of the decoder is built from: the config's and the options'
// (engine.cpp's shapesOf), computed once.
struct Shapes {
  kiln::DType dtype;
  std::int64_t hidden, q_heads, kv_heads, head_dim, inter, vocab;
  float eps, theta;
  int page_size, max_pages_per_seq, num_pages, max_batch;
  int max_tokens;  // rows of the activation buffers
  bool gptq;       // the projections are int4 (w4a16)
  bool gemv;       // dense projections and the LM head of m <= kiln::gemv::kMaxM on kiln's gemv
  bool overlap;    // kiln's kernels launched with overlap_launch (programmatic dependent launch)
  int group_size;  // GPTQ's
  bool moe;        // some layers are sparse (Qwen3-MoE)
  int experts, top_k;
  std::int64_t moe_inter;
  bool renormalize;
};
}  // namespace detail

struct EngineOptions {
  int max_batch = 8;               // sequences of one batch, at most
  int max_seq_len = 4096;          // tokens of a sequence (prompt + generated), at most
  int page_size = 16;              // tokens per KV-cache page (kiln's kernels: 16..256)
  int max_prefill_tokens = 16384;  // prompt tokens of one prefill pass (a batch takes several)
  bool cuda_graphs = true;         // decode steps replayed from per-bucket CUDA graphs
  bool tune_gemms = false;         // decode GEMMs (m <= max_batch): cuBLASLt's algorithm by timing
  bool gemv = true;  // dense projections and the LM head of m <= 8 rows on kiln's gemv
  // kiln's rmsnorm, qkrope, decodeattn, decoderops and gemv launched with overlap_launch: on sm_90
  // and newer each may become resident while the kernel before it finishes (it waits before it
  // touches memory); below sm_90 the launches are ordinary ones.
  bool overlap_launch = true;
  std::uint64_t page_seed = 1;  // the free list's shuffle
};

// Host-side admission, before any CUDA call: the decoder runs this config (dense Qwen3, fp16 or
// bf16), the options are valid, and every kiln runner admits the problems the decoder will give
// it (each runner's canImplement: the artifact has the variants). Throws Error listing every
// problem, each naming the value and the limit.
void admit(const Config& config, const EngineOptions& options);
// admit(config), and the checkpoint's own promises the decoder relies on: a GPTQ checkpoint is
// symmetric (every qzeros nibble z - 1 = 7) with no act order (g_idx, if present, the identity).
// Host only; the Engine's constructor runs it first.
void admit(const Checkpoint& checkpoint, const EngineOptions& options);

// The prompts against the options and the config: 1..max_batch prompts, each 1.. tokens with
// ids in [0, vocab), prompt + new_tokens <= max_seq_len (the cache) and <= max_position_embeddings,
// and no prompt longer than max_prefill_tokens. Throws Error naming the prompt, the value and the
// limit. Host only.
void checkPrompts(const Config& config, const EngineOptions& options,
                  const std::vector<std::vector<std::int32_t>>& prompts, int new_tokens);

class Engine {
 public:
  // Admits (admit(checkpoint), then every runner against the current device's SM), allocates the
  // weights, the cache and the buffers of max_batch x max_seq_len, and uploads the checkpoint's
  // tensors.
  Engine(const Checkpoint& checkpoint, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts a batch (every earlier sequence is dropped): the prompts' prefill, in passes of at
  // most max_prefill_tokens tokens. Returns each sequence's first generated token; `logits`, if
  // not null, receives the fp32 logits that chose them, [batch, vocab].
  std::vector<std::int32_t> prefill(const std::vector<std::vector<std::int32_t>>& prompts,
                                    std::vector<float>* logits = nullptr);
  // One decode step of the batch: every sequence takes the token its last step chose. Returns the
  // next token per sequence (and their logits, as prefill).
  std::vector<std::int32_t> decode(std::vector<float>* logits = nullptr);

  cudaStream_t stream() const { return stream_; }
  const Config& config() const { return config_; }
  const EngineOptions& options() const { return options_; }
  int batch() const { return pages_.sequences(); }
  // Bytes a decode step of `batch` sequences reads at the least: every weight but the embedding
  // table (of which it reads one row per token) and, in MoE layers, only the experts the batch
  // routes to: expected E (1 - (1 - k / E)^batch) of them for uniform routing.
  std::uint64_t weightBytesPerStep(int batch = 1) const;
  // The KV-cache bytes of one layer's K and V per token.
  std::uint64_t kvBytesPerToken() const;
  int deviceSm() const { return device_sm_; }

 private:
  // y = x . W^T, W [n, k]: dense (cuBLASLt) or kiln's packed int4 with a scale per group (w4a16).
  struct Linear {
    std::int64_t n = 0, k = 0;
    bool int4 = false;
    DeviceBuffer weight;  // [n, k] of the dtype; int4: n * k / 2 bytes, w4a16's packed layout
    DeviceBuffer scales;  // int4 only: [k / group, n] of the dtype, w4a16's pair order
  };
  struct Layer {
    DeviceBuffer input_norm, post_norm, q_norm, k_norm;
    Linear qkv, o, gate_up, down;  // gate_up and down: dense layers only
    bool sparse = false;           // a Qwen3-MoE layer: router and experts
    DeviceBuffer router;           // [experts, hidden]
    DeviceBuffer w1, w2;  // [experts, 2 I, hidden] (gate then up rows), [experts, hidden, I]
    DeviceBuffer k_cache, v_cache;
  };
  enum class Pass { kPrefill, kDecode };

  // The layers, the final norm, the LM head and the argmax over the tokens staged in the device
  // buffers: `tokens` rows; `seqs` sequences whose logits and tokens go to rows [first_seq,
  // first_seq + seqs) of logits_ / next_.
  void forward(Pass pass, int tokens, int seqs, int first_seq, int max_seqlen_q);
  void attention(Pass pass, const Layer& layer, int tokens, int seqs, int max_seqlen_q);
  void mlp(const Layer& layer, int tokens);
  void project(const Linear& linear, const void* x, void* y, std::int64_t m);
  Linear loadLinear(const Checkpoint& checkpoint, const std::vector<std::string>& prefixes,
                    const std::vector<std::int64_t>& outs, std::int64_t in);
  void uploadPageTable();
  std::vector<std::int32_t> readTokens(int seqs, std::vector<float>* logits);
  void releaseGraphs();

  Config config_;
  EngineOptions options_;
  detail::Shapes s_;
  cudaDataType_t cuda_dtype_;
  int device_sm_ = 0;
  int multiprocessors_ = 0;
  std::uint64_t dense_bytes_per_step_ = 0;    // every weight a step reads but the experts
  std::uint64_t expert_bytes_per_layer_ = 0;  // one expert's w1 + w2, times the sparse layers

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
  PageAllocator pages_;
  std::uint64_t uploaded_table_version_ = ~0ull;

  DeviceBuffer embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  // Activations, [s_.max_tokens, ...] of the dtype unless noted.
  DeviceBuffer h_, xn_, qkv_, q_, k_new_, v_new_, attn_, proj_, gate_up_, act_, last_rows_;
  DeviceBuffer logits_;  // [max_batch, vocab] fp32
  DeviceBuffer next_;    // [max_batch] int32: each sequence's latest token
  DeviceBuffer decode_workspace_, w4a16_workspace_, moe_workspace_;
  DeviceBuffer router_logits_;  // [s_.max_tokens, experts] of the dtype (MoE)
  // Per-step inputs, device and their pinned staging.
  DeviceBuffer ids_, positions_, slots_, cu_seqlens_, seq_lens_, last_index_, page_table_;
  PinnedBuffer ids_h_, positions_h_, slots_h_, cu_seqlens_h_, seq_lens_h_, last_index_h_,
      page_table_h_, next_h_, logits_h_;
  std::map<int, cudaGraphExec_t> graphs_;  // decode bucket -> its captured step
};

}  // namespace qwen3
