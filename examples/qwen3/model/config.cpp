#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <span>

#include "model/error.h"
#include "model/json.h"

namespace qwen3 {

namespace {

using detail::Json;

// Bounds on sizes, far above any released Qwen3 and low enough that every product the loader
// forms (vocab x hidden, experts x moe_intermediate x hidden) stays well inside 64 bits.
constexpr std::int64_t kMaxHidden = 65536;
constexpr std::int64_t kMaxIntermediate = 1 << 20;
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxHeads = 1024;
constexpr std::int64_t kMaxVocab = 1 << 22;
constexpr std::int64_t kMaxPositions = 1 << 24;
constexpr std::int64_t kMaxExperts = 1024;
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

std::string list(std::span<const int> values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

// The keys of one JSON object (the top level, or quantization_config), each read with its type
// and range checked, and every error prefixed with the file and the key's path.
class Reader {
 public:
  Reader(const Json& object, std::string source, std::string path)
      : j_(object), source_(std::move(source)), path_(std::move(path)) {}

  // Absent or null both mean "not set" (transformers writes "rope_scaling": null).
  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const Json& at(const char* key) const {
    if (!has(key)) fail(key, "is missing" + std::string(j_.contains(key) ? " (null)" : ""));
    return j_[key];
  }

  std::int64_t integer(const char* key, std::int64_t lo, std::int64_t hi) const {
    const Json& v = at(key);
    if (!v.is_number_integer()) mistyped(key, v, "an integer");
    // An unsigned value above INT64_MAX is out of range whatever lo and hi are.
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)) {
      fail(key, detail::show(v), outOfRange(lo, hi));
    }
    const auto value = v.get<std::int64_t>();
    if (value < lo || value > hi) fail(key, detail::show(v), outOfRange(lo, hi));
    return value;
  }
  // A positive, finite number; an integer is taken too (rope_theta is 1000000 in some files).
  double positive(const char* key) const {
    const Json& v = at(key);
    if (!v.is_number()) mistyped(key, v, "a number");
    const auto value = v.get<double>();
    if (!(value > 0) || !std::isfinite(value)) fail(key, detail::show(v), "must be positive");
    return value;
  }
  bool boolean(const char* key) const {
    const Json& v = at(key);
    if (!v.is_boolean()) mistyped(key, v, "true or false");
    return v.get<bool>();
  }
  std::string string(const char* key) const {
    const Json& v = at(key);
    if (!v.is_string()) mistyped(key, v, "a string");
    return v.get<std::string>();
  }
  // Refuses a key that is set to anything but `allowed` (a string, bool or null in the file).
  void onlyIf(const char* key, const Json& allowed, const std::string& why) const {
    if (has(key) && j_[key] != allowed) fail(key, detail::show(j_[key]), "is not supported " + why);
  }

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw Error(source_ + ": " + path_ + key + " " + what);
  }
  [[noreturn]] void fail(const char* key, const std::string& value, const std::string& why) const {
    throw Error(source_ + ": " + path_ + key + " " + value + " " + why);
  }

 private:
  [[noreturn]] void mistyped(const char* key, const Json& v, const char* wanted) const {
    fail(key, "is " + detail::typeOf(v) + " (" + detail::show(v) + "); it must be " + wanted);
  }
  static std::string outOfRange(std::int64_t lo, std::int64_t hi) {
    return "is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")";
  }

  const Json& j_;
  std::string source_;
  std::string path_;  // "" at the top level, "quantization_config." inside it
};

Dtype parseDtype(const Reader& r) {
  // transformers writes "torch_dtype"; from 4.56 "dtype". Either, and both must agree.
  std::optional<std::string> name;
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (!r.has(key)) continue;
    const std::string value = r.string(key);
    if (name && *name != value) {
      r.fail(key, "\"" + value + "\"", "disagrees with torch_dtype \"" + *name + "\"");
    }
    name = value;
  }
  if (!name) r.fail("torch_dtype", "is missing (nor is there a \"dtype\")");
  if (*name == "bfloat16") return Dtype::kBF16;
  if (*name == "float16") return Dtype::kF16;
  r.fail("torch_dtype", "\"" + *name + "\"",
         "is not supported (kiln's kernels take bfloat16, float16)");
}

// The dims every quantized linear is built from must tile int4 packing and the scale groups.
void checkGptqShapes(const Config& c, const Reader& q) {
  struct Linear {
    const char* what;
    std::int64_t k;  // input features: packed 8 per int32 in qweight, grouped for scales
    std::int64_t n;  // output features: packed 8 per int32 in qzeros
  };
  std::vector<Linear> linears = {
      {"q_proj", c.hidden_size, c.num_attention_heads * c.head_dim},
      {"k_proj", c.hidden_size, c.num_key_value_heads * c.head_dim},
      {"o_proj", c.num_attention_heads * c.head_dim, c.hidden_size},
      {"gate_proj", c.hidden_size, c.intermediate_size},
      {"down_proj", c.intermediate_size, c.hidden_size},
  };
  if (c.moe) {
    linears.push_back({"experts' gate_proj", c.hidden_size, c.moe->moe_intermediate_size});
    linears.push_back({"experts' down_proj", c.moe->moe_intermediate_size, c.hidden_size});
  }
  const std::int64_t g = c.gptq->group_size;
  for (const Linear& l : linears) {
    if (l.k % g != 0 || l.n % 8 != 0) {
      q.fail("group_size", std::to_string(g),
             "does not fit " + std::string(l.what) + " [" + std::to_string(l.n) + " x " +
                 std::to_string(l.k) + "]: input features must be a multiple of group_size and " +
                 "output features of 8 (int4 packed in int32)");
    }
  }
}

}  // namespace

bool Config::sparseLayer(std::int64_t layer) const {
  if (!moe) return false;
  if (std::binary_search(moe->mlp_only_layers.begin(), moe->mlp_only_layers.end(), layer)) {
    return false;
  }
  return (layer + 1) % moe->decoder_sparse_step == 0;
}

Config parseConfig(std::string_view text, std::string_view source) {
  const std::string src(source);
  const Json j = detail::parseJson(text, src);
  if (!j.is_object()) throw Error(src + ": is " + detail::typeOf(j) + ", not a JSON object");
  const Reader r(j, src, "");
  Config c;

  const Json& archs = r.at("architectures");
  if (!archs.is_array() || archs.size() != 1 || !archs[0].is_string()) {
    r.fail("architectures", detail::show(archs),
           "is not supported (one of [\"Qwen3ForCausalLM\"], [\"Qwen3MoeForCausalLM\"])");
  }
  c.architecture = archs[0].get<std::string>();
  const bool moe = c.architecture == "Qwen3MoeForCausalLM";
  if (!moe && c.architecture != "Qwen3ForCausalLM") {
    r.fail("architectures", detail::show(archs),
           "is not supported (this decoder runs Qwen3ForCausalLM, Qwen3MoeForCausalLM)");
  }
  r.onlyIf("model_type", moe ? "qwen3_moe" : "qwen3",
           std::string("(a ") + c.architecture + " has model_type " +
               (moe ? "\"qwen3_moe\")" : "\"qwen3\")"));

  c.hidden_size = r.integer("hidden_size", 1, kMaxHidden);
  c.intermediate_size = r.integer("intermediate_size", 1, kMaxIntermediate);
  c.num_hidden_layers = r.integer("num_hidden_layers", 1, kMaxLayers);
  c.num_attention_heads = r.integer("num_attention_heads", 1, kMaxHeads);
  c.num_key_value_heads = r.integer("num_key_value_heads", 1, c.num_attention_heads);
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    r.fail("num_key_value_heads", std::to_string(c.num_key_value_heads),
           "does not divide num_attention_heads " + std::to_string(c.num_attention_heads) +
               " (grouped-query attention shares each KV head among a whole group)");
  }
  c.head_dim = r.integer("head_dim", 1, INT64_MAX);
  if (std::find(std::begin(kSupportedHeadDims), std::end(kSupportedHeadDims), c.head_dim) ==
      std::end(kSupportedHeadDims)) {
    r.fail("head_dim", std::to_string(c.head_dim),
           "is not supported (kiln builds " + list(kSupportedHeadDims) +
               ": the head dims decodeattn, fmha and qkrope share)");
  }
  c.vocab_size = r.integer("vocab_size", 1, kMaxVocab);
  c.max_position_embeddings = r.integer("max_position_embeddings", 1, kMaxPositions);
  c.rms_norm_eps = r.positive("rms_norm_eps");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings");
  c.dtype = parseDtype(r);

  // Rotary embedding: plain NeoX RoPE over the whole head, no scaling. transformers 5 moves
  // rope_theta into rope_parameters {"rope_type": "default", "rope_theta": ...}.
  if (r.has("rope_scaling")) {
    r.fail("rope_scaling", detail::show(j["rope_scaling"]),
           "is not supported (only unscaled RoPE: rope_scaling absent or null)");
  }
  if (r.has("rope_parameters")) {
    const Json& rp = r.at("rope_parameters");
    if (!rp.is_object()) {
      r.fail("rope_parameters", "is " + detail::typeOf(rp) + "; it must be an object");
    }
    const Reader rope(rp, src, "rope_parameters.");
    rope.onlyIf("rope_type", "default", "(only unscaled RoPE: rope_type \"default\")");
    c.rope_theta = r.has("rope_theta") ? r.positive("rope_theta") : rope.positive("rope_theta");
  } else {
    c.rope_theta = r.positive("rope_theta");
  }
  r.onlyIf("hidden_act", "silu", "(Qwen3's MLP is SiLU(gate) * up: hidden_act \"silu\")");
  r.onlyIf("attention_bias", false, "(Qwen3's projections have no bias: attention_bias false)");
  r.onlyIf("use_sliding_window", false,
           "(every layer attends to the whole sequence: use_sliding_window false)");
  if (r.has("layer_types")) {
    const Json& types = r.at("layer_types");
    if (!types.is_array() || std::any_of(types.begin(), types.end(),
                                         [](const Json& t) { return t != "full_attention"; })) {
      r.fail("layer_types", detail::show(types),
             "is not supported (every layer \"full_attention\")");
    }
  }

  if (moe) {
    MoeConfig m;
    // transformers 5's save_pretrained writes the experts' count as num_local_experts (the Hub's
    // Qwen3-MoE configs say num_experts): either key, and equal if both are there.
    const bool local = r.has("num_local_experts");
    m.num_experts = r.has("num_experts") || !local ? r.integer("num_experts", 1, kMaxExperts)
                                                   : r.integer("num_local_experts", 1, kMaxExperts);
    if (local && r.has("num_experts")) {
      const std::int64_t other = r.integer("num_local_experts", 1, kMaxExperts);
      if (other != m.num_experts) {
        r.fail("num_local_experts", std::to_string(other),
               "differs from num_experts " + std::to_string(m.num_experts));
      }
    }
    m.num_experts_per_tok = r.integer("num_experts_per_tok", 1, m.num_experts);
    m.moe_intermediate_size = r.integer("moe_intermediate_size", 1, kMaxIntermediate);
    m.norm_topk_prob = r.boolean("norm_topk_prob");
    m.decoder_sparse_step = r.integer("decoder_sparse_step", 1, c.num_hidden_layers);
    const Json& only = r.at("mlp_only_layers");
    if (!only.is_array()) {
      r.fail("mlp_only_layers", "is " + detail::typeOf(only) + "; it must be an array of layers");
    }
    for (const Json& layer : only) {
      if (!layer.is_number_integer() || layer.get<std::int64_t>() < 0 ||
          layer.get<std::int64_t>() >= c.num_hidden_layers) {
        r.fail("mlp_only_layers", "entry " + detail::show(layer),
               "is not a layer (0 to " + std::to_string(c.num_hidden_layers - 1) + ")");
      }
      m.mlp_only_layers.push_back(layer.get<std::int64_t>());
    }
    std::sort(m.mlp_only_layers.begin(), m.mlp_only_layers.end());
    m.mlp_only_layers.erase(std::unique(m.mlp_only_layers.begin(), m.mlp_only_layers.end()),
                            m.mlp_only_layers.end());
    c.moe = m;
  }

  if (r.has("quantization_config")) {
    const Json& qj = r.at("quantization_config");
    if (!qj.is_object()) {
      r.fail("quantization_config", "is " + detail::typeOf(qj) + "; it must be an object");
    }
    const Reader q(qj, src, "quantization_config.");
    const std::string method = q.string("quant_method");
    if (method != "gptq") {
      q.fail("quant_method", "\"" + method + "\"", "is not supported (this loader reads gptq)");
    }
    GptqConfig g;
    g.bits = static_cast<int>(q.integer("bits", 1, 64));
    if (g.bits != 4) q.fail("bits", std::to_string(g.bits), "is not supported (int4: bits 4)");
    g.group_size = q.integer("group_size", -1, INT64_MAX);
    if (std::find(std::begin(kSupportedGptqGroupSizes), std::end(kSupportedGptqGroupSizes),
                  g.group_size) == std::end(kSupportedGptqGroupSizes)) {
      q.fail("group_size", std::to_string(g.group_size),
             "is not supported (kiln's w4a16 builds " + list(kSupportedGptqGroupSizes) + ")");
    }
    g.sym = q.boolean("sym");
    if (q.boolean("desc_act")) {
      q.fail("desc_act", "true",
             "is not supported (act-order permutes the input rows: only desc_act false)");
    }
    q.onlyIf("checkpoint_format", "gptq",
             "(the zero points of checkpoint_format \"gptq\" only; gptq_v2 stores them unshifted)");
    c.gptq = g;
    checkGptqShapes(c, q);
  }
  return c;
}

Config loadConfig(const std::filesystem::path& path) {
  return parseConfig(detail::readTextFile(path, kMaxConfigBytes), path.filename().string());
}

}  // namespace qwen3
