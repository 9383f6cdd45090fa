// A Qwen3 (dense) or Qwen3-MoE decoder's config.json, as Hugging Face transformers writes it,
// read with nlohmann_json and held to what this decoder runs: every key it needs present with the
// right JSON type and a supported value, and every key that would change the model in a way it
// does not implement (rope_scaling, a sliding window, attention biases, an activation other than
// SiLU, act-order GPTQ) refused rather than ignored. Each refusal is an Error naming the key, the
// value and what is supported. Keys that do not change the computation (token ids,
// initializer_range, transformers_version, ...) are not read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/safetensors.h"

namespace qwen3 {

// The head dims every attention kernel the decoder launches is built for: decodeattn (64, 128),
// fmha (64, 128, 256) and qkrope (64, 128, 256) share these two.
inline constexpr int kSupportedHeadDims[] = {64, 128};
// K per scale of kiln's w4a16 group (kernels/w4a16/kiln.toml).
inline constexpr int kSupportedGptqGroupSizes[] = {128};

struct MoeConfig {
  std::int64_t num_experts = 0;
  std::int64_t num_experts_per_tok = 0;
  std::int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  std::int64_t decoder_sparse_step = 1;
  std::vector<std::int64_t> mlp_only_layers;  // sorted, unique, each < num_hidden_layers
};

// quantization_config of a GPTQ checkpoint (quant_method "gptq"); int4 only, no act order.
struct GptqConfig {
  int bits = 4;
  std::int64_t group_size = 128;
  bool sym = true;
};

struct Config {
  std::string architecture;  // "Qwen3ForCausalLM" or "Qwen3MoeForCausalLM"
  std::int64_t hidden_size = 0;
  std::int64_t intermediate_size = 0;  // the dense MLP's (every layer of a dense model)
  std::int64_t num_hidden_layers = 0;
  std::int64_t num_attention_heads = 0;
  std::int64_t num_key_value_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab_size = 0;
  std::int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  bool tie_word_embeddings = false;
  Dtype dtype = Dtype::kBF16;      // torch_dtype (or transformers' newer "dtype"): F16 or BF16
  std::optional<MoeConfig> moe;    // set exactly for Qwen3MoeForCausalLM
  std::optional<GptqConfig> gptq;  // set when quantization_config is present

  // Whether `layer` uses the experts (transformers' Qwen3MoeDecoderLayer: not in mlp_only_layers,
  // experts present, and (layer + 1) a multiple of decoder_sparse_step); else the dense MLP.
  bool sparseLayer(std::int64_t layer) const;
};

// Parses config.json text; `source` names it in errors.
Config parseConfig(std::string_view text, std::string_view source = "config.json");
// Reads and parses a config.json file (at most 1 MiB: real ones are about 1 KiB).
Config loadConfig(const std::filesystem::path& path);

}  // namespace qwen3
