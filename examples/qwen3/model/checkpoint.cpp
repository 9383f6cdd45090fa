#include "model/checkpoint.h"

#include <algorithm>
#include <set>

#include "model/error.h"
#include "model/json.h"

namespace qwen3 {

namespace {

using detail::Json;

// An index lists one line per tensor: about 100 bytes each, so 64 MiB is some 600,000 tensors.
constexpr std::uintmax_t kMaxIndexBytes = 64u << 20;
// Problems listed in one refusal before the rest are counted.
constexpr std::size_t kMaxProblems = 12;

std::string describe(Dtype dtype, std::span<const std::int64_t> shape) {
  return std::string(dtypeName(dtype)) + " " + formatShape(shape);
}

// model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file name}}.
// Returns the weight map; the shard names must be plain file names in the checkpoint directory.
std::map<std::string, std::string> readIndex(const std::filesystem::path& path) {
  const std::string label = path.filename().string();
  const Json j = detail::parseJson(detail::readTextFile(path, kMaxIndexBytes), label);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
    throw Error(label + ": has no weight_map object ({\"weight_map\": {tensor: file}})");
  }
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    const std::string shard = file.is_string() ? file.get<std::string>() : "";
    if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos) {
      throw Error(label + ": weight_map entry " + name + " is " + detail::show(file) +
                  "; it must name a file in the checkpoint directory");
    }
    map[name] = shard;
  }
  return map;
}

}  // namespace

std::vector<TensorSpec> expectedTensors(const Config& c) {
  std::vector<TensorSpec> specs;
  const Dtype dt = c.dtype;
  const auto add = [&](std::string name, Dtype dtype, std::vector<std::int64_t> shape,
                       bool required = true) {
    specs.push_back({std::move(name), dtype, std::move(shape), required});
  };
  // A linear layer y = x W^T of `out` x `in`: a weight [out, in], or GPTQ's int4 packing of it
  // (8 values to an int32: qweight packs W^T along in, qzeros the zero points along out).
  const auto linear = [&](const std::string& prefix, std::int64_t out, std::int64_t in) {
    if (!c.gptq) return add(prefix + ".weight", dt, {out, in});
    const std::int64_t pack = 32 / c.gptq->bits;
    const std::int64_t groups = in / c.gptq->group_size;
    add(prefix + ".qweight", Dtype::kI32, {in / pack, out});
    add(prefix + ".qzeros", Dtype::kI32, {groups, out / pack});
    add(prefix + ".scales", Dtype::kF16, {groups, out});
    add(prefix + ".g_idx", Dtype::kI32, {in}, /*required=*/false);
  };
  const std::int64_t h = c.hidden_size;
  const std::int64_t q = c.num_attention_heads * c.head_dim;
  const std::int64_t kv = c.num_key_value_heads * c.head_dim;

  add("model.embed_tokens.weight", dt, {c.vocab_size, h});
  for (std::int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", dt, {h});
    linear(p + "self_attn.q_proj", q, h);
    linear(p + "self_attn.k_proj", kv, h);
    linear(p + "self_attn.v_proj", kv, h);
    linear(p + "self_attn.o_proj", h, q);
    add(p + "self_attn.q_norm.weight", dt, {c.head_dim});
    add(p + "self_attn.k_norm.weight", dt, {c.head_dim});
    add(p + "post_attention_layernorm.weight", dt, {h});
    if (c.sparseLayer(l)) {
      // The router stays unquantized in GPTQ exports: a linear of num_experts outputs.
      add(p + "mlp.gate.weight", dt, {c.moe->num_experts, h});
      for (std::int64_t e = 0; e < c.moe->num_experts; ++e) {
        const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
        linear(x + "gate_proj", c.moe->moe_intermediate_size, h);
        linear(x + "up_proj", c.moe->moe_intermediate_size, h);
        linear(x + "down_proj", h, c.moe->moe_intermediate_size);
      }
    } else {
      linear(p + "mlp.gate_proj", c.intermediate_size, h);
      linear(p + "mlp.up_proj", c.intermediate_size, h);
      linear(p + "mlp.down_proj", h, c.intermediate_size);
    }
  }
  add("model.norm.weight", dt, {h});
  // GPTQ keeps lm_head unquantized, like the embedding it may share.
  add("lm_head.weight", dt, {c.vocab_size, h}, /*required=*/!c.tie_word_embeddings);
  return specs;
}

Checkpoint Checkpoint::open(const std::filesystem::path& dir) {
  Config config = loadConfig(dir / "config.json");
  const std::filesystem::path single = dir / "model.safetensors";
  const std::filesystem::path index = dir / "model.safetensors.index.json";
  const bool has_single = std::filesystem::exists(single);
  const bool has_index = std::filesystem::exists(index);
  if (has_single && has_index) {
    throw Error(dir.string() +
                ": holds both model.safetensors and model.safetensors.index.json; "
                "a checkpoint is one or the other");
  }
  if (!has_single && !has_index) {
    throw Error(dir.string() +
                ": holds neither model.safetensors nor model.safetensors.index.json");
  }
  std::vector<SafetensorsFile> files;
  if (has_single) {
    files.push_back(SafetensorsFile::open(single));
    return fromFiles(std::move(config), std::move(files), dir.string());
  }
  const std::map<std::string, std::string> weight_map = readIndex(index);
  std::set<std::string> shards;
  for (const auto& [name, shard] : weight_map) shards.insert(shard);
  for (const std::string& shard : shards) files.push_back(SafetensorsFile::open(dir / shard));
  // The index and the shards must agree both ways: a tensor listed for a shard that lacks it, or
  // a tensor in a shard that the index does not list there, is a broken or mixed-up download.
  for (const auto& [name, shard] : weight_map) {
    const auto file = std::find_if(files.begin(), files.end(),
                                   [&](const SafetensorsFile& f) { return f.label() == shard; });
    if (file->find(name) == nullptr) {
      throw Error(index.string() + ": lists tensor " + name + " in " + shard + ", which lacks it");
    }
  }
  for (const SafetensorsFile& f : files) {
    for (const auto& [name, info] : f.tensors()) {
      const auto it = weight_map.find(name);
      if (it == weight_map.end() || it->second != f.label()) {
        throw Error(index.string() + ": does not list tensor " + name + " of " + f.label() +
                    (it == weight_map.end() ? "" : " (it names " + it->second + ")"));
      }
    }
  }
  return fromFiles(std::move(config), std::move(files), dir.string());
}

Checkpoint Checkpoint::fromFiles(Config config, std::vector<SafetensorsFile> files,
                                 std::string label) {
  Checkpoint c;
  c.config_ = std::move(config);
  c.label_ = std::move(label);
  c.files_ = std::move(files);
  // After the move: the TensorInfo nodes belong to the files' maps, which moving keeps in place.
  for (const SafetensorsFile& f : c.files_) {
    for (const auto& [name, info] : f.tensors()) {
      if (!c.index_.emplace(name, &info).second) {
        throw Error(c.label_ + ": tensor " + name + " is in both " + c.file_of_[name] + " and " +
                    f.label());
      }
      c.file_of_[name] = f.label();
    }
  }
  c.check();
  return c;
}

void Checkpoint::check() const {
  std::vector<std::string> problems;
  std::set<std::string, std::less<>> expected;
  const std::vector<TensorSpec> specs = expectedTensors(config_);
  for (const TensorSpec& spec : specs) {
    expected.insert(spec.name);
    const TensorInfo* t = find(spec.name);
    if (t == nullptr) {
      if (spec.required) {
        problems.push_back("tensor " + spec.name + " is missing (expected " +
                           describe(spec.dtype, spec.shape) + ")");
      }
    } else if (t->dtype != spec.dtype || t->shape != spec.shape) {
      problems.push_back("tensor " + spec.name + " in " + file_of_.find(spec.name)->second +
                         " is " + describe(t->dtype, t->shape) + "; expected " +
                         describe(spec.dtype, spec.shape));
    }
  }
  for (const auto& [name, info] : index_) {
    if (!expected.contains(name)) {
      problems.push_back("tensor " + name + " in " + file_of_.find(name)->second +
                         " is not one of this config's tensors");
    }
  }
  if (problems.empty()) return;
  std::string message =
      label_ + ": the tensors do not match config.json (" + config_.architecture + ", " +
      std::to_string(config_.num_hidden_layers) + " layers, hidden_size " +
      std::to_string(config_.hidden_size) + ", " + std::string(dtypeName(config_.dtype)) +
      (config_.gptq ? ", GPTQ int4" : "") + "): " + std::to_string(problems.size()) + " problem(s)";
  for (std::size_t i = 0; i < problems.size() && i < kMaxProblems; ++i) {
    message += "\n  " + problems[i];
  }
  if (problems.size() > kMaxProblems) {
    message += "\n  ... and " + std::to_string(problems.size() - kMaxProblems) + " more";
  }
  throw Error(message);
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::tensor(std::string_view name, Dtype dtype,
                                     std::span<const std::int64_t> shape) const {
  const TensorInfo* t = find(name);
  if (t == nullptr) throw Error(label_ + ": tensor " + std::string(name) + " is missing");
  if (t->dtype != dtype ||
      !std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end())) {
    throw Error(label_ + ": tensor " + std::string(name) + " in " + file_of_.find(name)->second +
                " is " + describe(t->dtype, t->shape) + "; expected " + describe(dtype, shape));
  }
  return *t;
}

}  // namespace qwen3
