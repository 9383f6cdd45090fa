// A Qwen3 checkpoint directory as Hugging Face saves it: config.json and either model.safetensors
// or shards listed by model.safetensors.index.json. Opening one reads the config, maps and checks
// every file, and then holds the tensors to the list the config implies (expectedTensors): every
// required tensor present with its dtype and shape, and no tensor the config does not explain (an
// attention bias, a layer too many, experts of a dense config). So an inconsistent checkpoint is
// refused, with every problem named, before anything is allocated on a device or launched.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace qwen3 {

struct TensorSpec {
  std::string name;
  Dtype dtype = Dtype::kBF16;
  std::vector<std::int64_t> shape;
  // False for a tensor a checkpoint may leave out: lm_head.weight of tied embeddings (some
  // exports write it anyway), a GPTQ linear's g_idx (no act order: the identity).
  bool required = true;
};

// The tensors a checkpoint of `config` holds, in model order, with their dtypes and shapes: the
// embedding, per layer the two RMSNorms, q/k/v/o and Qwen3's per-head q_norm / k_norm, the MLP
// (gate/up/down; for a sparse MoE layer the router and every expert's three), the final norm and
// lm_head. A GPTQ linear is its qweight, qzeros, scales and g_idx instead of a weight.
std::vector<TensorSpec> expectedTensors(const Config& config);

class Checkpoint {
 public:
  // Opens `dir`: config.json, then model.safetensors, or model.safetensors.index.json and the
  // shards its weight_map names (plain file names in `dir`). Throws Error listing every problem.
  static Checkpoint open(const std::filesystem::path& dir);
  // The same over a parsed config and files already opened (tests, and callers with their own
  // layout); `label` names the checkpoint in errors.
  static Checkpoint fromFiles(Config config, std::vector<SafetensorsFile> files, std::string label);

  const Config& config() const { return config_; }
  // Every tensor, by name, across all files.
  const std::map<std::string, const TensorInfo*, std::less<>>& tensors() const { return index_; }
  // The tensor `name`, which must have `dtype` and `shape`; else an Error naming what differs.
  const TensorInfo& tensor(std::string_view name, Dtype dtype,
                           std::span<const std::int64_t> shape) const;
  const TensorInfo* find(std::string_view name) const;

 private:
  Checkpoint() = default;
  void check() const;

  Config config_;
  std::string label_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, const TensorInfo*, std::less<>> index_;
  std::map<std::string, std::string, std::less<>> file_of_;  // tensor -> its file's label
};

}  // namespace qwen3
