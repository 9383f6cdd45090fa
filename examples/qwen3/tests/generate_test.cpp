// qwen3_generate's refusals, run as a user runs it, on checkpoints this test writes (every tensor
// the config implies, zeros): each bad input is refused with the value and the limit before CUDA
// is touched, so the test needs no GPU; and --check admits a valid batch against the artifact the
// program was built with (its rmsnorm, qkrope, fmha, decodeattn and decoderops variants).
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "model/checkpoint.h"
#include "model/config.h"

namespace qwen3 {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// A dense Qwen3 the default artifact runs: hidden 1024 (an rmsnorm variant), head dim 128.
Json smallConfig() {
  return Json{{"architectures", {"Qwen3ForCausalLM"}},
              {"hidden_size", 1024},
              {"intermediate_size", 1024},
              {"num_hidden_layers", 1},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 4},
              {"head_dim", 128},
              {"vocab_size", 512},
              {"max_position_embeddings", 4096},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 1000000.0},
              {"hidden_act", "silu"},
              {"attention_bias", false},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"}};
}

// config.json and a model.safetensors holding every tensor expectedTensors() lists, each filled
// with one byte value: `fill(name)`, zero by default.
fs::path writeCheckpoint(const std::string& name, const Json& config_json,
                         const std::function<char(const std::string&)>& fill = {},
                         bool optional_tensors = false) {
  // One directory per process: ctest runs each test case as its own process, in parallel.
  const fs::path dir =
      fs::temp_directory_path() / ("qwen3_generate_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config_json.dump(1);
  const Config config = parseConfig(config_json.dump());
  Json header = Json::object();
  std::uint64_t offset = 0;
  std::vector<std::pair<std::uint64_t, char>> fills;  // each tensor's size and byte
  for (const TensorSpec& spec : expectedTensors(config)) {
    if (!spec.required && !optional_tensors) continue;
    std::uint64_t bytes = static_cast<std::uint64_t>(dtypeBits(spec.dtype) / 8);
    for (std::int64_t d : spec.shape) bytes *= static_cast<std::uint64_t>(d);
    header[spec.name] = {{"dtype", std::string(dtypeName(spec.dtype))},
                         {"shape", spec.shape},
                         {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    fills.emplace_back(bytes, fill ? fill(spec.name) : '\0');
  }
  const std::string text = header.dump();
  const std::uint64_t length = text.size();
  std::ofstream out(dir / "model.safetensors", std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), sizeof length);  // little endian (x86, arm)
  out << text;
  for (const auto& [size, byte] : fills) {
    const std::vector<char> chunk(1 << 20, byte);
    for (std::uint64_t left = size; left > 0;) {
      const std::uint64_t n = std::min<std::uint64_t>(left, chunk.size());
      out.write(chunk.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
  }
  return dir;
}

fs::path writePrompts(const fs::path& dir, const Json& batches) {
  const fs::path path = dir / "prompts.json";
  std::ofstream(path) << Json{{"batches", batches}}.dump();
  return path;
}

Json prompt(int length, int id = 3) {
  return Json(std::vector<int>(length, id));
}

struct Result {
  int status;
  std::string output;
};

Result run(const std::string& args) {
  const std::string command = std::string(QWEN3_GENERATE) + " " + args + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string output;
  std::array<char, 4096> chunk;
  for (std::size_t n; (n = fread(chunk.data(), 1, chunk.size(), pipe.get())) > 0;) {
    output.append(chunk.data(), n);
  }
  const int status = pclose(pipe.release());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new fs::path(writeCheckpoint("small", smallConfig())); }
  static void TearDownTestSuite() {
    fs::remove_all(*model_);
    delete model_;
  }
  static std::string model() { return model_->string(); }
  static fs::path* model_;
};
fs::path* GenerateTest::model_ = nullptr;

TEST_F(GenerateTest, CheckAdmitsAValidBatch) {
  const fs::path prompts = writePrompts(
      *model_,
      Json::array({Json{{"name", "b1"}, {"prompts", {prompt(1)}}},
                   Json{{"name", "b3"}, {"prompts", {prompt(17), prompt(40), prompt(2)}}}}));
  const Result r = run("--model " + model() + " --prompts " + prompts.string() +
                       " --new-tokens 4 --out /tmp/unused --check");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("admitted: 2 batches, max_batch 3, max_seq_len 48, page_size 16"),
            std::string::npos)
      << r.output;
}

TEST_F(GenerateTest, RefusesAPromptLongerThanTheCache) {
  const fs::path prompts = writePrompts(
      *model_, Json::array({Json{{"name", "b2"}, {"prompts", {prompt(3), prompt(40)}}}}));
  const Result r = run("--model " + model() + " --prompts " + prompts.string() +
                       " --new-tokens 4 --max-seq-len 32 --out /tmp/unused");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("batch b2: prompt 1: 40 tokens + 4 new = 44 tokens; the cache holds "
                          "32 per sequence (max_seq_len 32, max_position_embeddings 4096)"),
            std::string::npos)
      << r.output;
}

TEST_F(GenerateTest, RefusesATokenOutsideTheVocabulary) {
  const fs::path prompts = writePrompts(
      *model_, Json::array({Json{{"name", "b1"}, {"prompts", {Json::array({1, 2, 512})}}}}));
  const Result r = run("--model " + model() + " --prompts " + prompts.string() +
                       " --new-tokens 2 --out /tmp/unused");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("batch b1: prompt 0 token 2 is id 512; the vocabulary is 0..511"),
            std::string::npos)
      << r.output;
}

TEST_F(GenerateTest, RefusesMalformedPromptsAndArguments) {
  const fs::path bad = *model_ / "bad_prompts.json";
  std::ofstream(bad) << R"({"batches": [{"name": "b1", "prompts": [[1, "x"]]}]})";
  Result r = run("--model " + model() + " --prompts " + bad.string() + " --out /tmp/unused");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("expected {\"batches\""), std::string::npos) << r.output;

  r = run("--model " + model() + " --prompts " + bad.string());
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--model and --out are required"), std::string::npos) << r.output;
  r = run("--model " + model() + " --out x --bench --steps zero");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--steps takes an integer, not 'zero'"), std::string::npos) << r.output;
}

TEST(Generate, RefusesAHiddenSizeTheArtifactLacks) {
  Json config = smallConfig();
  config["hidden_size"] = 1000;
  const fs::path dir = writeCheckpoint("hidden1000", config);
  const fs::path prompts =
      writePrompts(dir, Json::array({Json{{"name", "b1"}, {"prompts", {prompt(4)}}}}));
  const Result r = run("--model " + dir.string() + " --prompts " + prompts.string() +
                       " --new-tokens 2 --out /tmp/unused");
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("the artifact cannot run this model (Qwen3ForCausalLM, hidden 1000, "
                          "head_dim 128, BF16):\n  rmsnorm: "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("hidden 1000"), std::string::npos) << r.output;
}

Json moeConfig() {
  Json config = smallConfig();
  config["architectures"] = {"Qwen3MoeForCausalLM"};
  config["num_experts"] = 4;
  config["num_experts_per_tok"] = 2;
  config["moe_intermediate_size"] = 256;
  config["norm_topk_prob"] = true;
  config["decoder_sparse_step"] = 1;
  config["mlp_only_layers"] = Json::array();
  return config;
}

Json gptqConfig() {
  Json config = smallConfig();
  config["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4},
                                   {"group_size", 128},      {"sym", true},
                                   {"desc_act", false},      {"checkpoint_format", "gptq"}};
  return config;
}

// qzeros of a symmetric GPTQ checkpoint: z - 1 = 7 in every nibble.
char symmetricZeros(const std::string& name) {
  return name.ends_with(".qzeros") ? static_cast<char>(0x77) : '\0';
}

// qwen3_generate --check (admission only, no GPU) on a checkpoint writeCheckpoint writes with
// these arguments and removes afterwards.
Result checkOnly(const std::string& name, const Json& config_json,
                 const std::function<char(const std::string&)>& fill = {},
                 bool optional_tensors = false) {
  const fs::path dir = writeCheckpoint(name, config_json, fill, optional_tensors);
  const fs::path prompts =
      writePrompts(dir, Json::array({Json{{"name", "b1"}, {"prompts", {prompt(4)}}}}));
  Result r = run("--model " + dir.string() + " --prompts " + prompts.string() +
                 " --new-tokens 2 --out /tmp/unused --check");
  fs::remove_all(dir);
  return r;
}

TEST(Generate, AdmitsAMoeCheckpoint) {
  const Result r = checkOnly("moe", moeConfig());
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("admitted: 1 batches"), std::string::npos) << r.output;
}

TEST(Generate, AdmitsASymmetricGptqCheckpoint) {
  const Result r = checkOnly("gptq", gptqConfig(), symmetricZeros);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("admitted: 1 batches"), std::string::npos) << r.output;
}

TEST(Generate, RefusesGptqZerosOtherThanSymmetric) {
  const Result r = checkOnly("gptq_zeros", gptqConfig());  // qzeros 0: z = 1
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("model.layers.0.self_attn.q_proj.qzeros word 0 is 0x00000000; a "
                          "symmetric GPTQ checkpoint stores z - 1 = 7 in every nibble"),
            std::string::npos)
      << r.output;
}

TEST(Generate, RefusesActOrderGptq) {
  // Every optional tensor written, GPTQ's g_idx among them, all zero: group 0 for every k, where
  // a checkpoint without act order has k / 128.
  const Result r = checkOnly("gptq_g_idx", gptqConfig(), symmetricZeros, /*optional_tensors=*/true);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("model.layers.0.self_attn.q_proj.g_idx[128] is 0, not 1: act-order "
                          "GPTQ (a permuted grouping) is not supported"),
            std::string::npos)
      << r.output;
}

TEST(Generate, RefusesGptqExpertsAndAsymmetricGptq) {
  Json config = moeConfig();
  config["quantization_config"] = gptqConfig()["quantization_config"];
  Result r = checkOnly("moe_gptq", config, symmetricZeros);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("the decoder cannot run this configuration:\n  Qwen3MoeForCausalLM "
                          "with GPTQ experts: kiln's moe group runs fp16 / bf16 experts only"),
            std::string::npos)
      << r.output;

  config = gptqConfig();
  config["quantization_config"]["sym"] = false;
  r = checkOnly("gptq_asym", config, symmetricZeros);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("GPTQ sym false (zero points): this decoder runs symmetric GPTQ only"),
            std::string::npos)
      << r.output;
}

TEST(Generate, RefusesATruncatedCheckpoint) {
  const fs::path dir = writeCheckpoint("truncated", smallConfig());
  const fs::path file = dir / "model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 100);
  const fs::path prompts =
      writePrompts(dir, Json::array({Json{{"name", "b1"}, {"prompts", {prompt(4)}}}}));
  const Result r = run("--model " + dir.string() + " --prompts " + prompts.string() +
                       " --new-tokens 2 --out /tmp/unused");
  fs::remove_all(dir);
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("model.safetensors"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace qwen3
