#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kiln/runners/decodeattn.h"
#include "kiln/runners/decoderops.h"
#include "kiln/runners/fmha.h"
#include "kiln/runners/gemv.h"
#include "kiln/runners/moe.h"
#include "kiln/runners/qkrope.h"
#include "kiln/runners/rmsnorm.h"
#include "kiln/runners/w4a16.h"

namespace qwen3 {

namespace {

using detail::Shapes;

kiln::DType kilnDtype(Dtype dtype) {
  return dtype == Dtype::kF16 ? kiln::DType::kFloat16 : kiln::DType::kBFloat16;
}

int ceilDiv(std::int64_t a, std::int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

Shapes shapesOf(const Config& c, const EngineOptions& o) {
  Shapes s{};
  s.dtype = kilnDtype(c.dtype);
  s.hidden = c.hidden_size;
  s.q_heads = c.num_attention_heads;
  s.kv_heads = c.num_key_value_heads;
  s.head_dim = c.head_dim;
  s.inter = c.intermediate_size;
  s.vocab = c.vocab_size;
  s.eps = static_cast<float>(c.rms_norm_eps);
  s.theta = static_cast<float>(c.rope_theta);
  s.page_size = o.page_size;
  s.max_pages_per_seq = ceilDiv(o.max_seq_len, o.page_size);
  s.num_pages = o.max_batch * s.max_pages_per_seq;
  s.max_batch = o.max_batch;
  s.max_tokens = std::max<int>(
      o.max_batch,
      static_cast<int>(std::min<std::int64_t>(
          o.max_prefill_tokens, static_cast<std::int64_t>(o.max_batch) * o.max_seq_len)));
  s.gptq = c.gptq.has_value();
  s.gemv = o.gemv;
  s.overlap = o.overlap_launch;
  s.group_size = c.gptq ? static_cast<int>(c.gptq->group_size) : 0;
  s.moe = c.moe.has_value();
  s.experts = c.moe ? static_cast<int>(c.moe->num_experts) : 0;
  s.top_k = c.moe ? static_cast<int>(c.moe->num_experts_per_tok) : 0;
  s.moe_inter = c.moe ? c.moe->moe_intermediate_size : 0;
  s.renormalize = c.moe && c.moe->norm_topk_prob;
  return s;
}

// The problems of one step, built the same way for admission (placeholder addresses: canImplement
// reads no memory) and for the launches.
kiln::rmsnorm::Problem rmsnormProblem(const Shapes& s, std::int64_t rows, const void* x,
                                      void* residual, const void* weight, void* out) {
  kiln::rmsnorm::Problem p;
  p.dtype = s.dtype;
  p.rows = rows;
  p.hidden = s.hidden;
  p.eps = s.eps;
  p.x = x;
  p.residual = residual;
  p.weight = weight;
  p.out = out;
  p.overlap_launch = s.overlap;
  return p;
}

struct QkropeBuffers {
  const void* qkv;
  const std::int64_t* positions;
  const std::int64_t* slots;
  const void* q_norm;
  const void* k_norm;
  void* q_out;
  void* k_cache;
  void* v_cache;
  void* k_out;  // null in decode
  void* v_out;
};

kiln::qkrope::Problem qkropeProblem(const Shapes& s, std::int64_t tokens, const QkropeBuffers& b) {
  kiln::qkrope::Problem p;
  p.dtype = s.dtype;
  p.tokens = tokens;
  p.q_heads = static_cast<int>(s.q_heads);
  p.kv_heads = static_cast<int>(s.kv_heads);
  p.head_dim = static_cast<int>(s.head_dim);
  p.rotary_dim = 0;  // the whole head, as Qwen3
  p.rope_theta = s.theta;
  p.qk_norm = true;
  p.eps = s.eps;
  p.page_size = s.page_size;
  p.kv_layout = kiln::qkrope::KvLayout::kNHD;
  p.num_pages = s.num_pages;
  p.qkv = b.qkv;
  p.positions = b.positions;
  p.slot_mapping = b.slots;
  p.q_norm_weight = b.q_norm;
  p.k_norm_weight = b.k_norm;
  p.q_out = b.q_out;
  p.k_cache = b.k_cache;
  p.v_cache = b.v_cache;
  p.k_out = b.k_out;
  p.v_out = b.v_out;
  p.overlap_launch = s.overlap;
  return p;
}

float softmaxScale(const Shapes& s) {
  return 1.0f / std::sqrt(static_cast<float>(s.head_dim));
}

// Prefill attention: the packed prompts, causal, over their own keys (k_new / v_new, contiguous,
// as qkrope wrote them), so the runner may take Hopper's wgmma kernel.
kiln::fmha::Problem prefillProblem(const Shapes& s, int seqs, int tokens, int max_seqlen_q,
                                   const void* q, const void* k, const void* v,
                                   const std::int32_t* cu_seqlens, void* out) {
  kiln::fmha::Problem p;
  p.dtype = s.dtype;
  p.mask = kiln::fmha::Mask::kCausal;
  p.head_dim = static_cast<int>(s.head_dim);
  p.batch = seqs;
  p.q_heads = static_cast<int>(s.q_heads);
  p.kv_heads = static_cast<int>(s.kv_heads);
  p.total_q = tokens;
  p.total_k = tokens;
  p.max_seqlen_q = max_seqlen_q;
  p.scale = softmaxScale(s);
  p.q = q;
  p.k = k;
  p.v = v;
  p.cu_seqlens_q = cu_seqlens;
  p.cu_seqlens_k = cu_seqlens;
  p.out = out;
  return p;
}

kiln::decodeattn::Problem decodeProblem(const Shapes& s, int batch, int multiprocessors,
                                        const void* q, const void* k_cache, const void* v_cache,
                                        const std::int32_t* page_table,
                                        const std::int32_t* seq_lens, void* out) {
  kiln::decodeattn::Problem p;
  p.dtype = s.dtype;
  p.batch = batch;
  p.q_heads = static_cast<int>(s.q_heads);
  p.kv_heads = static_cast<int>(s.kv_heads);
  p.head_dim = static_cast<int>(s.head_dim);
  p.query_tokens = 1;
  p.page_size = s.page_size;
  p.kv_layout = kiln::decodeattn::KvLayout::kNHD;
  p.num_pages = s.num_pages;
  p.max_pages_per_seq = s.max_pages_per_seq;
  p.max_seq_len = 0;  // the cache's length: the split count stays fixed for the captured graph
  p.multiprocessors = multiprocessors;
  p.scale = softmaxScale(s);
  p.q = q;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.page_table = page_table;
  p.seq_lens = seq_lens;
  p.out = out;
  p.overlap_launch = s.overlap;
  return p;
}

kiln::decoderops::EmbedProblem gatherProblem(const Shapes& s, std::int64_t tokens,
                                             std::int64_t rows, std::int64_t width,
                                             const std::int32_t* ids, const void* table,
                                             void* out) {
  kiln::decoderops::EmbedProblem p;
  p.dtype = s.dtype;
  p.tokens = tokens;
  p.rows = rows;
  p.width = width;
  p.ids = ids;
  p.table = table;
  p.out = out;
  p.overlap_launch = s.overlap;
  return p;
}

kiln::decoderops::SiluMulProblem siluMulProblem(const Shapes& s, std::int64_t tokens,
                                                const void* in, void* out) {
  kiln::decoderops::SiluMulProblem p;
  p.dtype = s.dtype;
  p.tokens = tokens;
  p.width = s.inter;
  p.in = in;
  p.out = out;
  p.overlap_launch = s.overlap;
  return p;
}

kiln::decoderops::ArgmaxProblem argmaxProblem(const Shapes& s, std::int64_t rows, const float* x,
                                              std::int32_t* out) {
  kiln::decoderops::ArgmaxProblem p;
  p.dtype = kiln::DType::kFloat32;
  p.rows = rows;
  p.width = s.vocab;
  p.x = x;
  p.out = out;
  p.overlap_launch = s.overlap;
  return p;
}

kiln::w4a16::Problem int4Problem(const Shapes& s, std::int64_t m, std::int64_t n, std::int64_t k,
                                 int multiprocessors, const void* x, const void* weight,
                                 const void* scales, void* y) {
  kiln::w4a16::Problem p;
  p.dtype = s.dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.group_size = s.group_size;
  p.x = x;
  p.weight = weight;
  p.scales = scales;
  p.zeros = nullptr;  // symmetric GPTQ: z = 8
  p.y = y;
  p.multiprocessors = multiprocessors;
  return p;
}

kiln::moe::Problem moeProblem(const Shapes& s, std::int64_t tokens, const void* x,
                              const void* logits, const void* w1, const void* w2, void* y) {
  kiln::moe::Problem p;
  p.dtype = s.dtype;
  p.tokens = tokens;
  p.experts = s.experts;
  p.top_k = s.top_k;
  p.hidden = s.hidden;
  p.intermediate = s.moe_inter;
  p.renormalize = s.renormalize;
  p.logits_fp32 = false;  // the router is a linear of the dtype, as in transformers
  p.x = x;
  p.logits = logits;
  p.w1 = w1;
  p.w2 = w2;
  p.y = y;
  return p;
}

// y[m, n] = x[m, k] . w[n, k]^T on kiln's gemv (m <= kiln::gemv::kMaxM). The weights never change
// while the decoder runs, so the launch may overlap the kernel before it (overlap_launch).
kiln::gemv::GemvProblem gemvProblem(const Shapes& s, std::int64_t m, std::int64_t n, std::int64_t k,
                                    const void* x, const void* w, void* y, kiln::DType out_dtype) {
  kiln::gemv::GemvProblem p;
  p.dtype = s.dtype;
  p.out_dtype = out_dtype;
  p.m = m;
  p.n = n;
  p.k = k;
  p.x = x;
  p.w = w;
  p.y = y;
  p.overlap_launch = s.overlap;
  return p;
}

// The projections of a layer as (n, k): y[m, n] = x[m, k] . W^T.
std::vector<std::pair<std::int64_t, std::int64_t>> projections(const Shapes& s) {
  std::vector<std::pair<std::int64_t, std::int64_t>> nk = {
      {(s.q_heads + 2 * s.kv_heads) * s.head_dim, s.hidden}, {s.hidden, s.q_heads * s.head_dim}};
  if (s.inter > 0) {  // the dense MLP (every layer of a dense model)
    nk.push_back({2 * s.inter, s.hidden});
    nk.push_back({s.hidden, s.inter});
  }
  return nk;
}

// Distinct, aligned addresses that are never dereferenced: canImplement checks alignment and
// nullness only.
template <typename T = void>
T* placeholder(int i) {
  return reinterpret_cast<T*>(static_cast<std::uintptr_t>(i + 1) << 40);
}

// Runs `check` (one runner's canImplement) on every problem the decoder gives that runner, at the
// largest sizes, and collects refusals.
class Admission {
 public:
  explicit Admission(const Shapes& s) : s_(s) {}

  template <typename Check>
  void run(Check&& check) {
    const Shapes& s = s_;
    const auto p = [](int i) { return placeholder(i); };
    add("rmsnorm", check(rmsnormProblem(s, s.max_tokens, p(0), p(1), p(2), p(3))));
    add("qkrope",
        check(qkropeProblem(s, s.max_tokens,
                            {p(0), placeholder<std::int64_t>(1), placeholder<std::int64_t>(2), p(3),
                             p(4), p(5), p(6), p(7), p(8), p(9)})));
    add("fmha (prefill)", check(prefillProblem(s, s.max_batch, s.max_tokens, s.max_tokens, p(0),
                                               p(1), p(2), placeholder<std::int32_t>(3), p(4))));
    add("decodeattn",
        check(decodeProblem(s, s.max_batch, 0, p(0), p(1), p(2), placeholder<std::int32_t>(3),
                            placeholder<std::int32_t>(4), p(5))));
    add("decoderops (embedding)", check(gatherProblem(s, s.max_tokens, s.vocab, s.hidden,
                                                      placeholder<std::int32_t>(0), p(1), p(2))));
    add("decoderops (last rows)", check(gatherProblem(s, s.max_batch, s.max_tokens, s.hidden,
                                                      placeholder<std::int32_t>(0), p(1), p(2))));
    add("decoderops (silu_mul)", check(siluMulProblem(s, s.max_tokens, p(0), p(1))));
    add("decoderops (argmax)",
        check(argmaxProblem(s, s.max_batch, placeholder<float>(0), placeholder<std::int32_t>(1))));
    if (s.gptq) {  // the GEMV tile (decode) and the tiled kernel (prefill) are separate variants
      for (const auto& [n, k] : projections(s)) {
        for (const std::int64_t m : {std::int64_t{1}, std::int64_t{s.max_tokens}}) {
          add("w4a16 (" + std::to_string(n) + " x " + std::to_string(k) + ", m " +
                  std::to_string(m) + ")",
              check(int4Problem(s, m, n, k, 0, p(0), p(1), p(2), p(3))));
        }
      }
    }
    if (s.gemv) {  // the dense projections and the LM head of decode's small batches
      const std::int64_t m = std::min<std::int64_t>(kiln::gemv::kMaxM, s.max_batch);
      const auto nk =
          s.gptq ? std::vector<std::pair<std::int64_t, std::int64_t>>{} : projections(s);
      for (const auto& [n, k] : nk) {
        add("gemv (" + std::to_string(n) + " x " + std::to_string(k) + ")",
            check(gemvProblem(s, m, n, k, p(0), p(1), p(2), s.dtype)));
      }
      add("gemv (lm_head)",
          check(gemvProblem(s, m, s.vocab, s.hidden, p(0), p(1), p(2), kiln::DType::kFloat32)));
    }
    if (s.moe) {
      add("moe", check(moeProblem(s, s.max_tokens, p(0), p(1), p(2), p(3), p(4))));
    }
  }

  void add(const std::string& what, const kiln::Status& status) {
    if (!status.ok()) problems_.push_back(what + ": " + status.toString());
  }

  void throwIfRefused(const std::string& context) const {
    if (problems_.empty()) return;
    std::string message = context;
    for (const std::string& problem : problems_) message += "\n  " + problem;
    throw Error(message);
  }

 private:
  Shapes s_;
  std::vector<std::string> problems_;
};

std::size_t elementBytes(Dtype dtype) {
  return static_cast<std::size_t>(dtypeBits(dtype) / 8);
}

// Uploads tensors, concatenated along their first dimension (a fused projection's rows).
DeviceBuffer upload(const Checkpoint& checkpoint, const std::vector<std::string>& names,
                    const std::vector<std::vector<std::int64_t>>& shapes) {
  const Dtype dtype = checkpoint.config().dtype;
  std::vector<const TensorInfo*> tensors;
  std::size_t total = 0;
  for (std::size_t i = 0; i < names.size(); ++i) {
    tensors.push_back(&checkpoint.tensor(names[i], dtype, shapes[i]));
    total += tensors.back()->bytes.size();
  }
  DeviceBuffer buffer(total);
  std::size_t offset = 0;
  for (const TensorInfo* t : tensors) {
    QWEN3_CUDA(cudaMemcpy(buffer.as<std::byte>() + offset, t->bytes.data(), t->bytes.size(),
                          cudaMemcpyHostToDevice));
    offset += t->bytes.size();
  }
  return buffer;
}

// The config, once admit() took the checkpoint: the first member's initializer, so nothing is
// sized before.
const Config& admitted(const Checkpoint& checkpoint, const EngineOptions& options) {
  admit(checkpoint, options);
  return checkpoint.config();
}

// Row-major matrices of `rows` rows each, side by side: [rows, the sum of their columns]. Fuses
// GPTQ projections along their outputs (qweight [k / 8, n] and scales [k / group, n] keep n last).
std::vector<std::byte> besideEachOther(const std::vector<const TensorInfo*>& parts,
                                       std::int64_t rows) {
  std::size_t total = 0;
  for (const TensorInfo* t : parts) total += t->bytes.size();
  std::vector<std::byte> out(total);
  std::byte* to = out.data();
  for (std::int64_t r = 0; r < rows; ++r) {
    for (const TensorInfo* t : parts) {
      const std::size_t row = t->bytes.size() / static_cast<std::size_t>(rows);
      std::memcpy(to, t->bytes.data() + static_cast<std::size_t>(r) * row, row);
      to += row;
    }
  }
  return out;
}

// A symmetric GPTQ checkpoint's qzeros hold z - 1 = 7 in every nibble (z = 8, which w4a16's
// symmetric variants assume), and its g_idx, if present, is the identity grouping (no act order):
// anything else would be silently wrong, so it is refused.
void checkSymmetricGptq(const Checkpoint& checkpoint, const std::string& prefix, std::int64_t out,
                        std::int64_t in, std::int64_t group) {
  const TensorInfo& zeros = checkpoint.tensor(prefix + ".qzeros", Dtype::kI32,
                                              std::vector<std::int64_t>{in / group, out / 8});
  for (std::size_t i = 0; i < zeros.bytes.size(); i += 4) {
    std::uint32_t word;
    std::memcpy(&word, zeros.bytes.data() + i, 4);
    if (word != 0x77777777u) {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%08x", word);
      throw Error(prefix + ".qzeros word " + std::to_string(i / 4) + " is " + hex +
                  "; a symmetric GPTQ checkpoint stores z - 1 = 7 in every nibble (0x77777777)");
    }
  }
  if (const TensorInfo* g_idx = checkpoint.find(prefix + ".g_idx")) {
    for (std::int64_t i = 0; i < in; ++i) {
      std::int32_t value;
      std::memcpy(&value, g_idx->bytes.data() + 4 * i, 4);
      if (value != i / group) {
        throw Error(prefix + ".g_idx[" + std::to_string(i) + "] is " + std::to_string(value) +
                    ", not " + std::to_string(i / group) +
                    ": act-order GPTQ (a permuted grouping) is not supported");
      }
    }
  }
}

int bucketOf(int batch, int max_batch) {
  int bucket = 1;
  while (bucket < batch) bucket *= 2;
  return std::min(bucket, max_batch);
}

}  // namespace

void admit(const Config& c, const EngineOptions& o) {
  std::vector<std::string> refusals;
  if (c.moe && c.gptq) {
    refusals.push_back(c.architecture +
                       " with GPTQ experts: kiln's moe group runs fp16 / bf16 experts only");
  }
  if (c.gptq && !c.gptq->sym) {
    refusals.push_back("GPTQ sym false (zero points): this decoder runs symmetric GPTQ only");
  }
  const auto positive = [&](const char* name, std::int64_t value, std::int64_t limit) {
    if (value < 1 || value > limit) {
      refusals.push_back(std::string(name) + " " + std::to_string(value) + " is outside 1.." +
                         std::to_string(limit));
    }
  };
  positive("max_batch", o.max_batch, 1024);
  positive("max_seq_len", o.max_seq_len, c.max_position_embeddings);
  positive("max_prefill_tokens", o.max_prefill_tokens, 1 << 20);
  positive("page_size", o.page_size, 256);
  if (!refusals.empty()) {
    std::string message = "the decoder cannot run this configuration:";
    for (const std::string& r : refusals) message += "\n  " + r;
    throw Error(message);
  }
  Admission admission(shapesOf(c, o));
  // Each runner's canImplement, found by argument-dependent lookup from its problem's namespace.
  admission.run([](const auto& problem) { return canImplement(problem); });
  admission.throwIfRefused("the artifact cannot run this model (" + c.architecture + ", hidden " +
                           std::to_string(c.hidden_size) + ", head_dim " +
                           std::to_string(c.head_dim) + ", " + std::string(dtypeName(c.dtype)) +
                           "):");
}

void admit(const Checkpoint& checkpoint, const EngineOptions& options) {
  const Config& c = checkpoint.config();
  admit(c, options);
  if (!c.gptq) return;
  const std::int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim;
  const std::int64_t kv = c.num_key_value_heads * c.head_dim, i = c.intermediate_size;
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    for (const auto& [name, out, in] : {std::tuple{"self_attn.q_proj", q, h},
                                        {"self_attn.k_proj", kv, h},
                                        {"self_attn.v_proj", kv, h},
                                        {"self_attn.o_proj", h, q},
                                        {"mlp.gate_proj", i, h},
                                        {"mlp.up_proj", i, h},
                                        {"mlp.down_proj", h, i}}) {
      checkSymmetricGptq(checkpoint, p + name, out, in, c.gptq->group_size);
    }
  }
}

void checkPrompts(const Config& c, const EngineOptions& o,
                  const std::vector<std::vector<std::int32_t>>& prompts, int new_tokens) {
  if (prompts.empty() || static_cast<int>(prompts.size()) > o.max_batch) {
    throw Error("a batch of " + std::to_string(prompts.size()) + " prompts; the decoder runs 1.." +
                std::to_string(o.max_batch) + " (max_batch)");
  }
  if (new_tokens < 0) throw Error("new_tokens " + std::to_string(new_tokens) + " is negative");
  const std::int64_t limit = std::min<std::int64_t>(o.max_seq_len, c.max_position_embeddings);
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const auto& prompt = prompts[i];
    const std::string which = "prompt " + std::to_string(i);
    if (prompt.empty()) throw Error(which + " is empty; a prompt needs at least one token");
    const std::int64_t total = static_cast<std::int64_t>(prompt.size()) + new_tokens;
    if (total > limit) {
      throw Error(which + ": " + std::to_string(prompt.size()) + " tokens + " +
                  std::to_string(new_tokens) + " new = " + std::to_string(total) +
                  " tokens; the cache holds " + std::to_string(limit) +
                  " per sequence (max_seq_len " + std::to_string(o.max_seq_len) +
                  ", max_position_embeddings " + std::to_string(c.max_position_embeddings) + ")");
    }
    if (static_cast<std::int64_t>(prompt.size()) > o.max_prefill_tokens) {
      throw Error(which + ": " + std::to_string(prompt.size()) +
                  " tokens; one prefill pass takes " + std::to_string(o.max_prefill_tokens) +
                  " (max_prefill_tokens)");
    }
    for (std::size_t j = 0; j < prompt.size(); ++j) {
      if (prompt[j] < 0 || prompt[j] >= c.vocab_size) {
        throw Error(which + " token " + std::to_string(j) + " is id " + std::to_string(prompt[j]) +
                    "; the vocabulary is 0.." + std::to_string(c.vocab_size - 1));
      }
    }
  }
}

Engine::Engine(const Checkpoint& checkpoint, const EngineOptions& options)
    : config_(admitted(checkpoint, options)),
      options_(options),
      s_(shapesOf(config_, options)),
      cuda_dtype_(config_.dtype == Dtype::kF16 ? CUDA_R_16F : CUDA_R_16BF),
      pages_(s_.page_size, s_.num_pages, s_.max_batch, s_.max_pages_per_seq, options.page_seed) {
  int device = 0;
  QWEN3_CUDA(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  QWEN3_CUDA(cudaGetDeviceProperties(&prop, device));
  device_sm_ = prop.major * 10 + prop.minor;
  multiprocessors_ = prop.multiProcessorCount;
  Admission on_device(s_);
  on_device.run([sm = device_sm_](const auto& problem) { return canImplement(problem, sm); });
  on_device.throwIfRefused("the artifact has no kernel for this GPU (" + std::string(prop.name) +
                           ", sm_" + std::to_string(device_sm_) + "):");

  QWEN3_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  gemm_ = std::make_unique<Gemm>(cuda_dtype_, options_.tune_gemms ? options_.max_batch : 0);

  // Weights: the fused projections' rows in the order the kernels read them.
  const std::int64_t h = s_.hidden, d = s_.head_dim;
  const std::size_t elt = elementBytes(config_.dtype);
  embed_ = upload(checkpoint, {"model.embed_tokens.weight"}, {{s_.vocab, h}});
  final_norm_ = upload(checkpoint, {"model.norm.weight"}, {{h}});
  lm_head_ = upload(checkpoint,
                    {config_.tie_word_embeddings && checkpoint.find("lm_head.weight") == nullptr
                         ? "model.embed_tokens.weight"
                         : "lm_head.weight"},
                    {{s_.vocab, h}});
  const std::uint64_t kv_bytes = static_cast<std::uint64_t>(s_.num_pages) * options_.page_size *
                                 static_cast<std::uint64_t>(s_.kv_heads * d) * elt;
  for (std::int64_t l = 0; l < config_.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Layer layer;
    layer.input_norm = upload(checkpoint, {p + "input_layernorm.weight"}, {{h}});
    layer.post_norm = upload(checkpoint, {p + "post_attention_layernorm.weight"}, {{h}});
    layer.q_norm = upload(checkpoint, {p + "self_attn.q_norm.weight"}, {{d}});
    layer.k_norm = upload(checkpoint, {p + "self_attn.k_norm.weight"}, {{d}});
    layer.qkv = loadLinear(checkpoint,
                           {p + "self_attn.q_proj", p + "self_attn.k_proj", p + "self_attn.v_proj"},
                           {s_.q_heads * d, s_.kv_heads * d, s_.kv_heads * d}, h);
    layer.o = loadLinear(checkpoint, {p + "self_attn.o_proj"}, {h}, s_.q_heads * d);
    layer.k_cache = DeviceBuffer(kv_bytes);
    layer.v_cache = DeviceBuffer(kv_bytes);
    dense_bytes_per_step_ += layer.input_norm.bytes() + layer.post_norm.bytes() +
                             layer.q_norm.bytes() + layer.k_norm.bytes() +
                             layer.qkv.weight.bytes() + layer.qkv.scales.bytes() +
                             layer.o.weight.bytes() + layer.o.scales.bytes();
    layer.sparse = config_.sparseLayer(l);
    if (layer.sparse) {  // w1: each expert's gate rows then its up rows; w2: each expert's down
      const std::int64_t experts = config_.moe->num_experts;
      const std::int64_t inter = config_.moe->moe_intermediate_size;
      std::vector<std::string> w1, w2;
      std::vector<std::vector<std::int64_t>> w1_shapes, w2_shapes;
      for (std::int64_t e = 0; e < experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        w1.insert(w1.end(), {x + "gate_proj.weight", x + "up_proj.weight"});
        w1_shapes.insert(w1_shapes.end(), {{inter, h}, {inter, h}});
        w2.push_back(x + "down_proj.weight");
        w2_shapes.push_back({h, inter});
      }
      layer.router = upload(checkpoint, {p + "mlp.gate.weight"}, {{experts, h}});
      layer.w1 = upload(checkpoint, w1, w1_shapes);
      layer.w2 = upload(checkpoint, w2, w2_shapes);
      dense_bytes_per_step_ += layer.router.bytes();
      expert_bytes_per_layer_ +=
          (layer.w1.bytes() + layer.w2.bytes()) / static_cast<std::uint64_t>(experts);
    } else {
      layer.gate_up =
          loadLinear(checkpoint, {p + "mlp.gate_proj", p + "mlp.up_proj"}, {s_.inter, s_.inter}, h);
      layer.down = loadLinear(checkpoint, {p + "mlp.down_proj"}, {h}, s_.inter);
      dense_bytes_per_step_ += layer.gate_up.weight.bytes() + layer.gate_up.scales.bytes() +
                               layer.down.weight.bytes() + layer.down.scales.bytes();
    }
    layers_.push_back(std::move(layer));
  }
  dense_bytes_per_step_ += final_norm_.bytes() + lm_head_.bytes();

  // Activations and per-step inputs.
  const auto rows = [&](std::int64_t width) {
    return DeviceBuffer(static_cast<std::size_t>(s_.max_tokens) * static_cast<std::size_t>(width) *
                        elt);
  };
  h_ = rows(h);
  xn_ = rows(h);
  qkv_ = rows((s_.q_heads + 2 * s_.kv_heads) * s_.head_dim);
  q_ = rows(s_.q_heads * d);
  k_new_ = rows(s_.kv_heads * d);
  v_new_ = rows(s_.kv_heads * d);
  attn_ = rows(s_.q_heads * d);
  proj_ = rows(h);
  gate_up_ = rows(2 * s_.inter);
  act_ = rows(s_.inter);
  const std::size_t batch = static_cast<std::size_t>(options_.max_batch);
  last_rows_ = DeviceBuffer(batch * static_cast<std::size_t>(h) * elt);
  logits_ = DeviceBuffer(batch * static_cast<std::size_t>(s_.vocab) * sizeof(float));
  next_ = DeviceBuffer(batch * sizeof(std::int32_t));
  QWEN3_CUDA(cudaMemset(next_.get(), 0, next_.bytes()));

  const std::size_t tokens = static_cast<std::size_t>(s_.max_tokens);
  const std::size_t table = pages_.pageTable().size() * sizeof(std::int32_t);
  ids_ = DeviceBuffer(tokens * sizeof(std::int32_t));
  positions_ = DeviceBuffer(tokens * sizeof(std::int64_t));
  slots_ = DeviceBuffer(tokens * sizeof(std::int64_t));
  cu_seqlens_ = DeviceBuffer((batch + 1) * sizeof(std::int32_t));
  seq_lens_ = DeviceBuffer(batch * sizeof(std::int32_t));
  last_index_ = DeviceBuffer(batch * sizeof(std::int32_t));
  page_table_ = DeviceBuffer(table);
  ids_h_ = PinnedBuffer(ids_.bytes());
  positions_h_ = PinnedBuffer(positions_.bytes());
  slots_h_ = PinnedBuffer(slots_.bytes());
  cu_seqlens_h_ = PinnedBuffer(cu_seqlens_.bytes());
  seq_lens_h_ = PinnedBuffer(seq_lens_.bytes());
  last_index_h_ = PinnedBuffer(last_index_.bytes());
  page_table_h_ = PinnedBuffer(table);
  next_h_ = PinnedBuffer(next_.bytes());
  logits_h_ = PinnedBuffer(logits_.bytes());

  // The split-KV workspace of the largest bucket covers the smaller ones.
  std::size_t workspace = 0;
  for (int bucket = 1;; bucket = std::min(bucket * 2, options_.max_batch)) {
    workspace = std::max(workspace, kiln::decodeattn::workspaceSize(decodeProblem(
                                        s_, bucket, multiprocessors_, nullptr, nullptr, nullptr,
                                        nullptr, nullptr, nullptr)));
    if (bucket == options_.max_batch) break;
  }
  decode_workspace_ = DeviceBuffer(workspace);
  if (s_.gptq) {  // w4a16's split-K partials: the most any projection needs at any m
    std::size_t int4 = 0;
    for (const auto& [n, k] : projections(s_)) {
      for (std::int64_t m = 1; m <= s_.max_tokens; ++m) {
        int4 =
            std::max(int4, kiln::w4a16::workspaceSize(int4Problem(
                               s_, m, n, k, multiprocessors_, nullptr, nullptr, nullptr, nullptr)));
      }
    }
    w4a16_workspace_ = DeviceBuffer(int4);
  }
  if (s_.moe) {
    moe_workspace_ = DeviceBuffer(kiln::moe::workspaceSize(
        moeProblem(s_, s_.max_tokens, nullptr, nullptr, nullptr, nullptr, nullptr)));
    router_logits_ = rows(s_.experts);
  }
  QWEN3_CUDA(cudaDeviceSynchronize());
}

Engine::~Engine() {
  releaseGraphs();
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

void Engine::releaseGraphs() {
  for (auto& [bucket, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

std::uint64_t Engine::kvBytesPerToken() const {
  return 2ull * static_cast<std::uint64_t>(s_.kv_heads * s_.head_dim) * elementBytes(config_.dtype);
}

void Engine::uploadPageTable() {
  if (uploaded_table_version_ == pages_.pageTableVersion()) return;
  const auto& table = pages_.pageTable();
  std::memcpy(page_table_h_.as<std::int32_t>(), table.data(), table.size() * sizeof(std::int32_t));
  QWEN3_CUDA(cudaMemcpyAsync(page_table_.get(), page_table_h_.as<std::int32_t>(),
                             table.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice, stream_));
  uploaded_table_version_ = pages_.pageTableVersion();
}

std::vector<std::int32_t> Engine::prefill(const std::vector<std::vector<std::int32_t>>& prompts,
                                          std::vector<float>* logits) {
  checkPrompts(config_, options_, prompts, 0);
  const int n = static_cast<int>(prompts.size());
  pages_.reset(n);
  for (int first = 0; first < n;) {
    // One pass: whole prompts while they fit s_.max_tokens (checkPrompts: each one does).
    int last = first, tokens = 0, longest = 0;
    while (last < n && tokens + static_cast<int>(prompts[last].size()) <= s_.max_tokens) {
      tokens += static_cast<int>(prompts[last].size());
      longest = std::max(longest, static_cast<int>(prompts[last].size()));
      ++last;
    }
    if (first > 0) QWEN3_CUDA(cudaStreamSynchronize(stream_));  // the staging is reused
    auto* ids = ids_h_.as<std::int32_t>();
    auto* positions = positions_h_.as<std::int64_t>();
    auto* slots = slots_h_.as<std::int64_t>();
    auto* cu = cu_seqlens_h_.as<std::int32_t>();
    auto* last_index = last_index_h_.as<std::int32_t>();
    int t = 0;
    cu[0] = 0;
    for (int seq = first; seq < last; ++seq) {
      const auto& prompt = prompts[static_cast<std::size_t>(seq)];
      for (std::size_t j = 0; j < prompt.size(); ++j, ++t) {
        ids[t] = prompt[j];
        positions[t] = static_cast<std::int64_t>(j);
        slots[t] = pages_.append(seq);
      }
      cu[seq - first + 1] = t;
      last_index[seq - first] = t - 1;
    }
    const int seqs = last - first;
    const auto copy = [&](const DeviceBuffer& to, const PinnedBuffer& from, std::size_t bytes) {
      QWEN3_CUDA(
          cudaMemcpyAsync(to.get(), from.as<std::byte>(), bytes, cudaMemcpyHostToDevice, stream_));
    };
    copy(ids_, ids_h_, static_cast<std::size_t>(t) * sizeof(std::int32_t));
    copy(positions_, positions_h_, static_cast<std::size_t>(t) * sizeof(std::int64_t));
    copy(slots_, slots_h_, static_cast<std::size_t>(t) * sizeof(std::int64_t));
    copy(cu_seqlens_, cu_seqlens_h_, static_cast<std::size_t>(seqs + 1) * sizeof(std::int32_t));
    copy(last_index_, last_index_h_, static_cast<std::size_t>(seqs) * sizeof(std::int32_t));
    forward(Pass::kPrefill, t, seqs, first, longest);
    first = last;
  }
  return readTokens(n, logits);
}

std::vector<std::int32_t> Engine::decode(std::vector<float>* logits) {
  const int n = batch();
  if (n == 0) throw Error("decode before prefill: no sequence is running");
  const int bucket = bucketOf(n, options_.max_batch);
  auto* positions = positions_h_.as<std::int64_t>();
  auto* slots = slots_h_.as<std::int64_t>();
  auto* seq_lens = seq_lens_h_.as<std::int32_t>();
  for (int seq = 0; seq < bucket; ++seq) {
    if (seq < n) {
      positions[seq] = pages_.length(seq);
      slots[seq] = pages_.append(seq);
      seq_lens[seq] = pages_.length(seq);
    } else {  // padding: no cache write (slot -1), no keys (an all-zero output)
      positions[seq] = 0;
      slots[seq] = -1;
      seq_lens[seq] = 0;
    }
  }
  const std::size_t rows = static_cast<std::size_t>(bucket);
  QWEN3_CUDA(cudaMemcpyAsync(positions_.get(), positions, rows * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice, stream_));
  QWEN3_CUDA(cudaMemcpyAsync(slots_.get(), slots, rows * sizeof(std::int64_t),
                             cudaMemcpyHostToDevice, stream_));
  QWEN3_CUDA(cudaMemcpyAsync(seq_lens_.get(), seq_lens, rows * sizeof(std::int32_t),
                             cudaMemcpyHostToDevice, stream_));
  uploadPageTable();

  if (const auto it = graphs_.find(bucket); it != graphs_.end()) {
    QWEN3_CUDA(cudaGraphLaunch(it->second, stream_));
  } else {
    forward(Pass::kDecode, bucket, bucket, 0, 1);
    if (options_.cuda_graphs) {  // the bucket's first step ran eagerly; capture the next ones
      cudaGraph_t graph = nullptr;
      QWEN3_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        forward(Pass::kDecode, bucket, bucket, 0, 1);
      } catch (...) {
        cudaStreamEndCapture(stream_, &graph);
        if (graph != nullptr) cudaGraphDestroy(graph);
        throw;
      }
      QWEN3_CUDA(cudaStreamEndCapture(stream_, &graph));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      QWEN3_CUDA(instantiated);
      graphs_[bucket] = exec;
    }
  }
  return readTokens(n, logits);
}

std::vector<std::int32_t> Engine::readTokens(int seqs, std::vector<float>* logits) {
  const std::size_t n = static_cast<std::size_t>(seqs);
  QWEN3_CUDA(cudaMemcpyAsync(next_h_.as<std::int32_t>(), next_.get(), n * sizeof(std::int32_t),
                             cudaMemcpyDeviceToHost, stream_));
  const std::size_t logit_count = n * static_cast<std::size_t>(s_.vocab);
  if (logits != nullptr) {
    QWEN3_CUDA(cudaMemcpyAsync(logits_h_.as<float>(), logits_.get(), logit_count * sizeof(float),
                               cudaMemcpyDeviceToHost, stream_));
  }
  QWEN3_CUDA(cudaStreamSynchronize(stream_));
  if (logits != nullptr) logits->assign(logits_h_.as<float>(), logits_h_.as<float>() + logit_count);
  return {next_h_.as<std::int32_t>(), next_h_.as<std::int32_t>() + n};
}

void Engine::forward(Pass pass, int tokens, int seqs, int first_seq, int max_seqlen_q) {
  const std::int64_t h = s_.hidden, t = tokens;
  const auto* ids = pass == Pass::kPrefill ? ids_.as<std::int32_t>() : next_.as<std::int32_t>();
  checkKiln(kiln::decoderops::run(gatherProblem(s_, t, s_.vocab, h, ids, embed_.get(), h_.get()),
                                  nullptr, 0, stream_),
            "embedding");
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    // xn = norm(h), the residual first taking the previous layer's MLP output.
    checkKiln(kiln::rmsnorm::run(
                  rmsnormProblem(s_, t, l == 0 ? h_.get() : proj_.get(),
                                 l == 0 ? nullptr : h_.get(), layer.input_norm.get(), xn_.get()),
                  nullptr, 0, stream_),
              "input rmsnorm");
    project(layer.qkv, xn_.get(), qkv_.get(), t);
    const bool prefill = pass == Pass::kPrefill;
    checkKiln(
        kiln::qkrope::run(
            qkropeProblem(s_, t,
                          {qkv_.get(), positions_.as<std::int64_t>(), slots_.as<std::int64_t>(),
                           layer.q_norm.get(), layer.k_norm.get(), q_.get(), layer.k_cache.get(),
                           layer.v_cache.get(), prefill ? k_new_.get() : nullptr,
                           prefill ? v_new_.get() : nullptr}),
            nullptr, 0, stream_),
        "qkrope");
    attention(pass, layer, tokens, seqs, max_seqlen_q);
    project(layer.o, attn_.get(), proj_.get(), t);
    checkKiln(kiln::rmsnorm::run(
                  rmsnormProblem(s_, t, proj_.get(), h_.get(), layer.post_norm.get(), xn_.get()),
                  nullptr, 0, stream_),
              "post-attention rmsnorm");
    mlp(layer, tokens);
  }
  checkKiln(
      kiln::rmsnorm::run(rmsnormProblem(s_, t, proj_.get(), h_.get(), final_norm_.get(), xn_.get()),
                         nullptr, 0, stream_),
      "final rmsnorm");
  // The LM head reads each sequence's last row: a prefill's are gathered, a decode's are all.
  const void* rows = xn_.get();
  if (pass == Pass::kPrefill) {
    checkKiln(kiln::decoderops::run(gatherProblem(s_, seqs, t, h, last_index_.as<std::int32_t>(),
                                                  xn_.get(), last_rows_.get()),
                                    nullptr, 0, stream_),
              "last-token gather");
    rows = last_rows_.get();
  }
  float* logits = logits_.as<float>() + static_cast<std::size_t>(first_seq) * s_.vocab;
  if (s_.gemv && seqs <= kiln::gemv::kMaxM) {
    checkKiln(kiln::gemv::run(gemvProblem(s_, seqs, s_.vocab, h, rows, lm_head_.get(), logits,
                                          kiln::DType::kFloat32),
                              nullptr, 0, stream_),
              "gemv (lm_head)");
  } else {
    gemm_->run(rows, lm_head_.get(), logits, seqs, s_.vocab, h, CUDA_R_32F, stream_);
  }
  checkKiln(
      kiln::decoderops::run(argmaxProblem(s_, seqs, logits, next_.as<std::int32_t>() + first_seq),
                            nullptr, 0, stream_),
      "argmax");
}

Engine::Linear Engine::loadLinear(const Checkpoint& checkpoint,
                                  const std::vector<std::string>& prefixes,
                                  const std::vector<std::int64_t>& outs, std::int64_t in) {
  Linear linear;
  linear.k = in;
  for (const std::int64_t out : outs) linear.n += out;
  if (!config_.gptq) {
    std::vector<std::string> names;
    std::vector<std::vector<std::int64_t>> shapes;
    for (std::size_t i = 0; i < prefixes.size(); ++i) {
      names.push_back(prefixes[i] + ".weight");
      shapes.push_back({outs[i], in});
    }
    linear.weight = upload(checkpoint, names, shapes);
    return linear;
  }
  // GPTQ: the parts side by side on the host, then w4a16's repack into kiln's packed layout.
  const std::int64_t group = config_.gptq->group_size;
  std::vector<const TensorInfo*> qweights, scales;
  for (std::size_t i = 0; i < prefixes.size(); ++i) {  // admit() checked qzeros and g_idx
    qweights.push_back(&checkpoint.tensor(prefixes[i] + ".qweight", Dtype::kI32,
                                          std::vector<std::int64_t>{in / 8, outs[i]}));
    scales.push_back(&checkpoint.tensor(prefixes[i] + ".scales", Dtype::kF16,
                                        std::vector<std::int64_t>{in / group, outs[i]}));
  }
  const std::vector<std::byte> qweight = besideEachOther(qweights, in / 8);
  const std::vector<std::byte> scale = besideEachOther(scales, in / group);
  DeviceBuffer qweight_d(qweight.size()), scales_d(scale.size());
  QWEN3_CUDA(cudaMemcpy(qweight_d.get(), qweight.data(), qweight.size(), cudaMemcpyHostToDevice));
  QWEN3_CUDA(cudaMemcpy(scales_d.get(), scale.data(), scale.size(), cudaMemcpyHostToDevice));
  linear.int4 = true;
  linear.weight = DeviceBuffer(static_cast<std::size_t>(linear.n * in / 2));
  linear.scales =
      DeviceBuffer(static_cast<std::size_t>(in / group * linear.n) * elementBytes(config_.dtype));
  kiln::w4a16::RepackProblem repack;
  repack.format = kiln::w4a16::SourceFormat::kGptq;
  repack.dtype = s_.dtype;
  repack.scales_dtype = kiln::DType::kFloat16;
  repack.n = linear.n;
  repack.k = in;
  repack.group_size = static_cast<int>(group);
  repack.qweight = qweight_d.get();
  repack.src_scales = scales_d.get();
  repack.weight = linear.weight.get();
  repack.scales = linear.scales.get();
  checkKiln(kiln::w4a16::repack(repack, stream_), "w4a16 repack of " + prefixes.front());
  QWEN3_CUDA(cudaStreamSynchronize(stream_));  // before the staging buffers are freed
  return linear;
}

std::uint64_t Engine::weightBytesPerStep(int batch) const {
  if (!config_.moe) return dense_bytes_per_step_;
  const double experts = static_cast<double>(config_.moe->num_experts);
  const double k = static_cast<double>(config_.moe->num_experts_per_tok);
  const double touched = experts * (1.0 - std::pow(1.0 - k / experts, batch));
  return dense_bytes_per_step_ +
         static_cast<std::uint64_t>(touched * static_cast<double>(expert_bytes_per_layer_));
}

void Engine::project(const Linear& linear, const void* x, void* y, std::int64_t m) {
  if (!linear.int4 && s_.gemv && m <= kiln::gemv::kMaxM) {
    checkKiln(
        kiln::gemv::run(gemvProblem(s_, m, linear.n, linear.k, x, linear.weight.get(), y, s_.dtype),
                        nullptr, 0, stream_),
        "gemv");
    return;
  }
  if (!linear.int4) {
    gemm_->run(x, linear.weight.get(), y, m, linear.n, linear.k, cuda_dtype_, stream_);
    return;
  }
  checkKiln(kiln::w4a16::run(int4Problem(s_, m, linear.n, linear.k, multiprocessors_, x,
                                         linear.weight.get(), linear.scales.get(), y),
                             w4a16_workspace_.get(), w4a16_workspace_.bytes(), stream_),
            "w4a16");
}

void Engine::mlp(const Layer& layer, int tokens) {
  const std::int64_t t = tokens;
  if (layer.sparse) {  // the router's logits, then routing, experts and the weighted sum
    gemm_->run(xn_.get(), layer.router.get(), router_logits_.get(), t, s_.experts, s_.hidden,
               cuda_dtype_, stream_);
    checkKiln(kiln::moe::run(moeProblem(s_, t, xn_.get(), router_logits_.get(), layer.w1.get(),
                                        layer.w2.get(), proj_.get()),
                             moe_workspace_.get(), moe_workspace_.bytes(), stream_),
              "moe");
    return;
  }
  project(layer.gate_up, xn_.get(), gate_up_.get(), t);
  checkKiln(
      kiln::decoderops::run(siluMulProblem(s_, t, gate_up_.get(), act_.get()), nullptr, 0, stream_),
      "silu_mul");
  project(layer.down, act_.get(), proj_.get(), t);
}

void Engine::attention(Pass pass, const Layer& layer, int tokens, int seqs, int max_seqlen_q) {
  if (pass == Pass::kPrefill) {
    checkKiln(
        kiln::fmha::run(prefillProblem(s_, seqs, tokens, max_seqlen_q, q_.get(), k_new_.get(),
                                       v_new_.get(), cu_seqlens_.as<std::int32_t>(), attn_.get()),
                        nullptr, 0, stream_),
        "fmha (prefill)");
    return;
  }
  const kiln::decodeattn::Problem p =
      decodeProblem(s_, seqs, multiprocessors_, q_.get(), layer.k_cache.get(), layer.v_cache.get(),
                    page_table_.as<std::int32_t>(), seq_lens_.as<std::int32_t>(), attn_.get());
  checkKiln(kiln::decodeattn::run(p, decode_workspace_.get(), decode_workspace_.bytes(), stream_),
            "decodeattn");
}

}  // namespace qwen3
