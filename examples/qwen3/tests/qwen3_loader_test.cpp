// The checkpoint loader on files each test writes itself: a tiny Qwen3 (2 layers, hidden 64) read
// back byte for byte, single-file, sharded, MoE and GPTQ; and every kind of bad input refused with
// a message naming the file, the tensor or key, the value and the limit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "model/config.h"
#include "model/error.h"
#include "model/safetensors.h"

namespace qwen3 {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Bytes = std::vector<std::byte>;
using Shape = std::vector<std::int64_t>;

// The config of the tiny model: 2 layers, hidden 64, 2 query heads sharing 1 KV head of dim 64.
Json tinyConfig() {
  return Json{{"architectures", {"Qwen3ForCausalLM"}},
              {"model_type", "qwen3"},
              {"hidden_size", 64},
              {"intermediate_size", 128},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 2},
              {"num_key_value_heads", 1},
              {"head_dim", 64},
              {"vocab_size", 32},
              {"max_position_embeddings", 256},
              {"rms_norm_eps", 1e-6},
              {"rope_theta", 1000000.0},
              {"rope_scaling", nullptr},
              {"hidden_act", "silu"},
              {"attention_bias", false},
              {"use_sliding_window", false},
              {"sliding_window", nullptr},
              {"tie_word_embeddings", false},
              {"torch_dtype", "bfloat16"},
              {"bos_token_id", 1}};
}

// The tiny config as a Qwen3-MoE: 4 experts of 32, top 2, every layer sparse.
Json tinyMoeConfig() {
  Json c = tinyConfig();
  c["architectures"] = {"Qwen3MoeForCausalLM"};
  c["model_type"] = "qwen3_moe";
  c["num_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  c["moe_intermediate_size"] = 32;
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 1;
  c["mlp_only_layers"] = Json::array();
  return c;
}

// The tiny config as a GPTQ int4 checkpoint: hidden 128 and intermediate 256, so that every
// projection's input features are whole groups of 128.
Json tinyGptqConfig() {
  Json c = tinyConfig();
  c["hidden_size"] = 128;
  c["intermediate_size"] = 256;
  c["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4},
                              {"group_size", 128},      {"sym", true},
                              {"desc_act", false},      {"checkpoint_format", "gptq"}};
  return c;
}

// The tiny model's tensors, written out here rather than taken from expectedTensors(), so that
// the loader's list is checked against an independent one.
std::vector<std::pair<std::string, Shape>> tinyTensors(bool tied) {
  std::vector<std::pair<std::string, Shape>> t = {{"model.embed_tokens.weight", {32, 64}}};
  for (const std::string l : {"0", "1"}) {
    const std::string p = "model.layers." + l + ".";
    t.push_back({p + "input_layernorm.weight", {64}});
    t.push_back({p + "self_attn.q_proj.weight", {128, 64}});
    t.push_back({p + "self_attn.k_proj.weight", {64, 64}});
    t.push_back({p + "self_attn.v_proj.weight", {64, 64}});
    t.push_back({p + "self_attn.o_proj.weight", {64, 128}});
    t.push_back({p + "self_attn.q_norm.weight", {64}});
    t.push_back({p + "self_attn.k_norm.weight", {64}});
    t.push_back({p + "post_attention_layernorm.weight", {64}});
    t.push_back({p + "mlp.gate_proj.weight", {128, 64}});
    t.push_back({p + "mlp.up_proj.weight", {128, 64}});
    t.push_back({p + "mlp.down_proj.weight", {64, 128}});
  }
  t.push_back({"model.norm.weight", {64}});
  if (!tied) t.push_back({"lm_head.weight", {32, 64}});
  return t;
}

struct Tensor {
  std::string name;
  std::string dtype;
  Shape shape;
  Bytes bytes;
};

std::int64_t elements(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Bytes that differ from tensor to tensor and position to position, so that a tensor read from
// the wrong offset, or another tensor's bytes, cannot compare equal.
Bytes pattern(std::size_t size, unsigned seed) {
  Bytes b(size);
  for (std::size_t i = 0; i < size; ++i) {
    b[i] = static_cast<std::byte>((i * 131 + seed * 71 + (i >> 8) * 17) & 0xff);
  }
  return b;
}

Tensor bf16(const std::string& name, const Shape& shape, unsigned seed) {
  return {name, "BF16", shape, pattern(static_cast<std::size_t>(elements(shape)) * 2, seed)};
}

// The 8-byte little-endian length, the header text, the data: a file as the format lays it out.
Bytes fileBytes(const std::string& header, const Bytes& data, std::uint64_t length) {
  Bytes out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>((length >> (8 * i)) & 0xff);
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}
Bytes fileBytes(const std::string& header, const Bytes& data) {
  return fileBytes(header, data, header.size());
}

// A well-formed file of `tensors`, laid out in order; the header as the writer would make it.
Json headerOf(const std::vector<Tensor>& tensors) {
  Json h = Json::object();
  std::uint64_t at = 0;
  for (const Tensor& t : tensors) {
    h[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes.size()}}};
    at += t.bytes.size();
  }
  return h;
}
Bytes dataOf(const std::vector<Tensor>& tensors) {
  Bytes data;
  for (const Tensor& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  return data;
}
Bytes safetensors(const std::vector<Tensor>& tensors) {
  return fileBytes(headerOf(tensors).dump(), dataOf(tensors));
}

// The message fn throws as qwen3::Error (a failure if it throws nothing, or something else).
std::string errorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no qwen3::Error was thrown";
  return "";
}

std::string parseError(const Bytes& bytes) {
  return errorOf([&] { SafetensorsFile::fromBytes(bytes, "model.safetensors"); });
}

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::path(::testing::TempDir()) /
           (std::string("qwen3_loader_") + info->test_suite_name() + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const Bytes& bytes) const {
    std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << dir_ / name;
  }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream out(dir_ / name, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << dir_ / name;
  }

  // The tiny model's tensors with their bytes; written as a checkpoint by writeCheckpoint.
  static std::vector<Tensor> tinyModel(bool tied = false) {
    std::vector<Tensor> tensors;
    unsigned seed = 1;
    for (const auto& [name, shape] : tinyTensors(tied))
      tensors.push_back(bf16(name, shape, seed++));
    return tensors;
  }
  void writeCheckpoint(const Json& config, const std::vector<Tensor>& tensors) const {
    write("config.json", config.dump(2));
    write("model.safetensors", safetensors(tensors));
  }

  // Every tensor of `tensors` is in the checkpoint, with its dtype, shape and exact bytes.
  static void expectReadBack(const Checkpoint& c, const std::vector<Tensor>& tensors) {
    ASSERT_EQ(c.tensors().size(), tensors.size());
    for (const Tensor& t : tensors) {
      const TensorInfo& info = c.tensor(t.name, *dtypeFromName(t.dtype), t.shape);
      ASSERT_EQ(info.bytes.size(), t.bytes.size()) << t.name;
      EXPECT_EQ(std::memcmp(info.bytes.data(), t.bytes.data(), t.bytes.size()), 0) << t.name;
    }
  }

  fs::path dir_;
};

// ---- a valid checkpoint -------------------------------------------------------------------------

TEST_F(LoaderTest, TinyCheckpointLoadsAndReadsBackEveryByte) {
  const std::vector<Tensor> tensors = tinyModel();
  writeCheckpoint(tinyConfig(), tensors);
  const Checkpoint c = Checkpoint::open(dir_);
  const Config& cfg = c.config();
  EXPECT_EQ(cfg.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(cfg.hidden_size, 64);
  EXPECT_EQ(cfg.intermediate_size, 128);
  EXPECT_EQ(cfg.num_hidden_layers, 2);
  EXPECT_EQ(cfg.num_attention_heads, 2);
  EXPECT_EQ(cfg.num_key_value_heads, 1);
  EXPECT_EQ(cfg.head_dim, 64);
  EXPECT_EQ(cfg.vocab_size, 32);
  EXPECT_EQ(cfg.max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(cfg.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(cfg.rope_theta, 1e6);
  EXPECT_FALSE(cfg.tie_word_embeddings);
  EXPECT_EQ(cfg.dtype, Dtype::kBF16);
  EXPECT_FALSE(cfg.moe.has_value());
  EXPECT_FALSE(cfg.gptq.has_value());
  expectReadBack(c, tensors);

  // expectedTensors() lists the same names and shapes as the test's own list, in model order.
  const std::vector<TensorSpec> specs = expectedTensors(cfg);
  const auto mine = tinyTensors(false);
  ASSERT_EQ(specs.size(), mine.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, mine[i].first);
    EXPECT_EQ(specs[i].shape, mine[i].second) << specs[i].name;
    EXPECT_EQ(specs[i].dtype, Dtype::kBF16);
    EXPECT_TRUE(specs[i].required);
  }
}

// Qwen3-0.6B's config.json as published (keys the loader does not read included): it parses.
TEST_F(LoaderTest, PublishedQwen3ConfigParses) {
  const Config c = parseConfig(R"({
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
    "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})");
  EXPECT_EQ(c.hidden_size, 1024);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_TRUE(c.tie_word_embeddings);
  // 1 embedding + 28 x 11 + the final norm; lm_head optional when tied.
  EXPECT_EQ(expectedTensors(c).size(), 1u + 28u * 11u + 1u + 1u);
  EXPECT_FALSE(expectedTensors(c).back().required);
}

TEST_F(LoaderTest, TiedEmbeddingsNeedNoLmHeadAndMayHaveOne) {
  Json config = tinyConfig();
  config["tie_word_embeddings"] = true;
  writeCheckpoint(config, tinyModel(/*tied=*/true));
  EXPECT_EQ(Checkpoint::open(dir_).find("lm_head.weight"), nullptr);
  writeCheckpoint(config, tinyModel(/*tied=*/false));
  EXPECT_NE(Checkpoint::open(dir_).find("lm_head.weight"), nullptr);
}

TEST_F(LoaderTest, Float16ModelWithNewerDtypeKey) {
  Json config = tinyConfig();
  config.erase("torch_dtype");
  config["dtype"] = "float16";  // transformers >= 4.56
  std::vector<Tensor> tensors = tinyModel();
  for (Tensor& t : tensors) t.dtype = "F16";
  writeCheckpoint(config, tensors);
  const Checkpoint c = Checkpoint::open(dir_);
  EXPECT_EQ(c.config().dtype, Dtype::kF16);
  expectReadBack(c, tensors);
}

TEST_F(LoaderTest, ShardedCheckpointLoads) {
  const std::vector<Tensor> tensors = tinyModel();
  const std::vector<Tensor> first(tensors.begin(), tensors.begin() + 10);
  const std::vector<Tensor> second(tensors.begin() + 10, tensors.end());
  Json index = {{"metadata", {{"total_size", dataOf(tensors).size()}}},
                {"weight_map", Json::object()}};
  for (const Tensor& t : first) index["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const Tensor& t : second) index["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  write("config.json", tinyConfig().dump());
  write("model-00001-of-00002.safetensors", safetensors(first));
  write("model-00002-of-00002.safetensors", safetensors(second));
  write("model.safetensors.index.json", index.dump());
  expectReadBack(Checkpoint::open(dir_), tensors);

  // The index must agree with the shards both ways.
  index["weight_map"][first[0].name] = "model-00002-of-00002.safetensors";
  write("model.safetensors.index.json", index.dump());
  EXPECT_NE(errorOf([&] { Checkpoint::open(dir_); })
                .find("lists tensor model.embed_tokens.weight in model-00002-of-00002.safetensors, "
                      "which lacks it"),
            std::string::npos);
  index["weight_map"].erase(first[0].name);
  write("model.safetensors.index.json", index.dump());
  EXPECT_NE(errorOf([&] { Checkpoint::open(dir_); })
                .find("does not list tensor model.embed_tokens.weight of "
                      "model-00001-of-00002.safetensors"),
            std::string::npos);
  index["weight_map"][first[0].name] = "../model-00001-of-00002.safetensors";
  write("model.safetensors.index.json", index.dump());
  EXPECT_NE(errorOf([&] { Checkpoint::open(dir_); })
                .find("weight_map entry model.embed_tokens.weight is "
                      "\"../model-00001-of-00002.safetensors\"; it must name a file in the "
                      "checkpoint directory"),
            std::string::npos);
}

TEST(Config, MoeExpertCountUnderEitherKey) {
  Json config = tinyMoeConfig();  // transformers 5's save_pretrained writes num_local_experts
  config.erase("num_experts");
  config["num_local_experts"] = 4;
  EXPECT_EQ(parseConfig(config.dump()).moe->num_experts, 4);
  config["num_experts"] = 4;  // both, equal
  EXPECT_EQ(parseConfig(config.dump()).moe->num_experts, 4);
}

TEST_F(LoaderTest, MoeCheckpointListsRouterAndExperts) {
  Json config = tinyMoeConfig();
  config["mlp_only_layers"] = {1};  // layer 1 keeps the dense MLP
  const Config c = parseConfig(config.dump());
  ASSERT_TRUE(c.moe.has_value());
  EXPECT_EQ(c.moe->num_experts, 4);
  EXPECT_EQ(c.moe->num_experts_per_tok, 2);
  EXPECT_TRUE(c.sparseLayer(0));
  EXPECT_FALSE(c.sparseLayer(1));

  std::map<std::string, Shape> specs;
  for (const TensorSpec& s : expectedTensors(c)) specs[s.name] = s.shape;
  EXPECT_EQ(specs.at("model.layers.0.mlp.gate.weight"), (Shape{4, 64}));
  EXPECT_EQ(specs.at("model.layers.0.mlp.experts.3.gate_proj.weight"), (Shape{32, 64}));
  EXPECT_EQ(specs.at("model.layers.0.mlp.experts.3.up_proj.weight"), (Shape{32, 64}));
  EXPECT_EQ(specs.at("model.layers.0.mlp.experts.3.down_proj.weight"), (Shape{64, 32}));
  EXPECT_EQ(specs.count("model.layers.0.mlp.experts.4.up_proj.weight"), 0u);
  EXPECT_EQ(specs.count("model.layers.0.mlp.gate_proj.weight"), 0u);
  EXPECT_EQ(specs.at("model.layers.1.mlp.gate_proj.weight"), (Shape{128, 64}));
  EXPECT_EQ(specs.count("model.layers.1.mlp.gate.weight"), 0u);

  // A checkpoint of exactly those tensors loads.
  std::vector<Tensor> tensors;
  unsigned seed = 1;
  for (const TensorSpec& s : expectedTensors(c)) tensors.push_back(bf16(s.name, s.shape, seed++));
  writeCheckpoint(config, tensors);
  expectReadBack(Checkpoint::open(dir_), tensors);
}

TEST_F(LoaderTest, GptqCheckpointListsPackedTensors) {
  Json config = tinyGptqConfig();
  config["torch_dtype"] = "float16";
  const Config c = parseConfig(config.dump());
  ASSERT_TRUE(c.gptq.has_value());
  EXPECT_EQ(c.gptq->group_size, 128);
  std::map<std::string, TensorSpec> specs;
  for (const TensorSpec& s : expectedTensors(c)) specs[s.name] = s;
  // q_proj: 128 outputs (2 heads x 64) from 128 inputs.
  const std::string q = "model.layers.0.self_attn.q_proj.";
  EXPECT_EQ(specs.count(q + "weight"), 0u);
  EXPECT_EQ(specs.at(q + "qweight").shape, (Shape{16, 128}));
  EXPECT_EQ(specs.at(q + "qweight").dtype, Dtype::kI32);
  EXPECT_EQ(specs.at(q + "qzeros").shape, (Shape{1, 16}));
  EXPECT_EQ(specs.at(q + "scales").shape, (Shape{1, 128}));
  EXPECT_EQ(specs.at(q + "scales").dtype, Dtype::kF16);
  EXPECT_EQ(specs.at(q + "g_idx").shape, (Shape{128}));
  EXPECT_FALSE(specs.at(q + "g_idx").required);
  // down_proj: 128 outputs from 256 inputs, two groups.
  EXPECT_EQ(specs.at("model.layers.1.mlp.down_proj.qweight").shape, (Shape{32, 128}));
  EXPECT_EQ(specs.at("model.layers.1.mlp.down_proj.scales").shape, (Shape{2, 128}));
  // Norms, embedding and lm_head stay in the model dtype.
  EXPECT_EQ(specs.at("lm_head.weight").dtype, Dtype::kF16);
  EXPECT_EQ(specs.at("model.layers.0.self_attn.q_norm.weight").shape, (Shape{64}));
}

TEST_F(LoaderTest, MetadataAndEmptyTensorsAreRead) {
  Json h = headerOf({bf16("a", {2, 2}, 1), bf16("b", {0, 64}, 2), bf16("c", {3}, 3)});
  h["__metadata__"] = {{"format", "pt"}};
  const SafetensorsFile f = SafetensorsFile::fromBytes(
      fileBytes(h.dump(), dataOf({bf16("a", {2, 2}, 1), bf16("c", {3}, 3)})), "m.safetensors");
  EXPECT_EQ(f.metadata().at("format"), "pt");
  ASSERT_NE(f.find("b"), nullptr);
  EXPECT_EQ(f.find("b")->bytes.size(), 0u);
  EXPECT_EQ(f.find("c")->begin, 8u);
  // A header padded with trailing spaces, as the format allows.
  const std::string padded = headerOf({bf16("a", {2}, 1)}).dump() + "    ";
  EXPECT_NO_THROW(SafetensorsFile::fromBytes(fileBytes(padded, pattern(4, 1)), "m.safetensors"));
}

// ---- a bad safetensors file ---------------------------------------------------------------------

TEST_F(LoaderTest, TruncatedFileIsRefused) {
  const Bytes whole = safetensors(tinyModel());
  // Cut inside the data: the last tensor runs past the end.
  Bytes cut(whole.begin(), whole.end() - 100);
  write("model.safetensors", cut);
  const std::size_t data = dataOf(tinyModel()).size();  // lm_head, 32 x 64 BF16, is last
  EXPECT_EQ(errorOf([&] { SafetensorsFile::open(dir_ / "model.safetensors"); }),
            "model.safetensors: tensor lm_head.weight: data_offsets [" +
                std::to_string(data - 4096) + ", " + std::to_string(data) +
                "] run past the end of the data section (" + std::to_string(data - 100) +
                " bytes after the header)");
  // Cut inside the header.
  cut.assign(whole.begin(), whole.begin() + 100);
  const std::uint64_t n = headerOf(tinyModel()).dump().size();
  EXPECT_EQ(parseError(cut), "model.safetensors: header length " + std::to_string(n) +
                                 " runs past the end of the file (100 bytes: at most 92 bytes of "
                                 "header; is the file truncated?)");
  // Cut inside the length.
  write("model.safetensors", Bytes(whole.begin(), whole.begin() + 5));
  EXPECT_EQ(errorOf([&] { SafetensorsFile::open(dir_ / "model.safetensors"); }),
            "model.safetensors: the file is 5 bytes, shorter than the 8-byte header length that "
            "begins a safetensors file");
  write("model.safetensors", Bytes{});
  EXPECT_NE(errorOf([&] {
              SafetensorsFile::open(dir_ / "model.safetensors");
            }).find("the file is 0 bytes"),
            std::string::npos);
}

TEST_F(LoaderTest, HeaderLengthPastTheEndOrTooLargeIsRefused) {
  const std::string header = headerOf({bf16("a", {2}, 1)}).dump();
  EXPECT_EQ(parseError(fileBytes(header, pattern(4, 1), 1000)),
            "model.safetensors: header length 1000 runs past the end of the file (" +
                std::to_string(8 + header.size() + 4) + " bytes: at most " +
                std::to_string(header.size() + 4) + " bytes of header; is the file truncated?)");
  EXPECT_EQ(parseError(fileBytes(header, pattern(4, 1), 100'000'001)),
            "model.safetensors: header length 100000001 is more than the limit of 100000000 bytes");
  EXPECT_EQ(parseError(fileBytes(header, pattern(4, 1), UINT64_MAX)),
            "model.safetensors: header length 18446744073709551615 is more than the limit of "
            "100000000 bytes");
}

TEST_F(LoaderTest, HeaderThatIsNotAJsonObjectIsRefused) {
  EXPECT_NE(parseError(fileBytes("{\"a\": {\"dtype\": ", {}))
                .find("model.safetensors: header: not valid JSON: "),
            std::string::npos);
  EXPECT_EQ(parseError(fileBytes("[1, 2]", {})),
            "model.safetensors: the header does not begin with '{' (a safetensors header is a JSON "
            "object)");
  EXPECT_EQ(parseError(fileBytes("", {})),
            "model.safetensors: the header does not begin with '{' (a safetensors header is a JSON "
            "object)");
  std::string deep = "{\"a\": ";
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  EXPECT_EQ(parseError(fileBytes(deep + "}", {})),
            "model.safetensors: header: nests more than 16 levels deep");
}

TEST_F(LoaderTest, BadTensorEntriesAreRefused) {
  const auto one = [](const std::string& entry, std::size_t data = 8) {
    return parseError(fileBytes("{\"t\": " + entry + "}", pattern(data, 1)));
  };
  EXPECT_EQ(one(R"({"dtype": "Q4", "shape": [4], "data_offsets": [0, 8]})"),
            "model.safetensors: tensor t: dtype \"Q4\" is not a safetensors dtype (BOOL, F4, "
            "F6_E2M3, F6_E3M2, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, "
            "F32, F64, I64, U64)");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})"),
            "model.safetensors: tensor t: shape[0] is -2; it must not be negative");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]})"),
            "model.safetensors: tensor t: shape[0] is a float (2.0); it must be a non-negative "
            "integer");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]})"),
            "model.safetensors: tensor t: shape [4294967296, 4294967296] x F32 overflows 64 bits");
  EXPECT_EQ(one(R"({"dtype": "F4", "shape": [3], "data_offsets": [0, 8]})"),
            "model.safetensors: tensor t: shape [3] x F4 is 12 bits, not a whole number of bytes");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})"),
            "model.safetensors: tensor t: data_offsets [8, 0] end before they begin");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0]})"),
            "model.safetensors: tensor t: data_offsets is [0]; it must be an array [begin, end]");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [2]})"),
            "model.safetensors: tensor t: has no data_offsets");
  EXPECT_EQ(one(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "extra": 1})"),
            "model.safetensors: tensor t: has the key \"extra\"; a tensor entry has only dtype, "
            "shape and data_offsets");
  EXPECT_EQ(one(R"([0, 8])"),
            "model.safetensors: tensor t: is an array; a tensor entry is an object {dtype, shape, "
            "data_offsets}");
  EXPECT_EQ(parseError(fileBytes(R"({"__metadata__": {"format": 1}})", {})),
            "model.safetensors: __metadata__ \"format\" is an integer; __metadata__ holds strings "
            "only");
}

TEST_F(LoaderTest, OffsetsNotMatchingTheShapeAreRefused) {
  const std::string header = R"({"model.layers.0.self_attn.q_proj.weight": {"dtype": "BF16",
      "shape": [64, 64], "data_offsets": [0, 100]}})";
  EXPECT_EQ(parseError(fileBytes(header, pattern(100, 1))),
            "model.safetensors: tensor model.layers.0.self_attn.q_proj.weight: data_offsets "
            "[0, 100] do not match shape [64, 64] x BF16 = 8192 bytes");
}

TEST_F(LoaderTest, OverlappingTensorsAreRefused) {
  const std::string header = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                 "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})";
  EXPECT_EQ(parseError(fileBytes(header, pattern(24, 1))),
            "model.safetensors: tensor b: data_offsets [8, 24] overlap tensor a at [0, 16]");
  // Two tensors on the same bytes: an alias the format does not allow either.
  const std::string alias = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                "b": {"dtype": "I32", "shape": [4], "data_offsets": [0, 16]}})";
  EXPECT_EQ(parseError(fileBytes(alias, pattern(16, 1))),
            "model.safetensors: tensor b: data_offsets [0, 16] overlap tensor a at [0, 16]");
}

TEST_F(LoaderTest, GapsAndUncoveredBytesAreRefused) {
  const std::string gap = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})";
  EXPECT_EQ(parseError(fileBytes(gap, pattern(20, 1))),
            "model.safetensors: tensor b: data_offsets [12, 20] leave the bytes [8, 12] before "
            "them unused (tensor a ends at 8); the format allows no gaps");
  const std::string late = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  EXPECT_EQ(parseError(fileBytes(late, pattern(12, 1))),
            "model.safetensors: tensor a: data_offsets [4, 12] leave the bytes [0, 4] before them "
            "unused (the data section starts at 0); the format allows no gaps");
  const std::string tail = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_EQ(parseError(fileBytes(tail, pattern(12, 1))),
            "model.safetensors: the tensors cover 8 bytes of the data section, which has 12 (the "
            "file is " +
                std::to_string(8 + tail.size() + 12) +
                " bytes); the format allows no unindexed bytes");
}

TEST_F(LoaderTest, OffsetsPastTheEndAreRefused) {
  const std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                 "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})";
  EXPECT_EQ(parseError(fileBytes(header, pattern(16, 1))),
            "model.safetensors: tensor b: data_offsets [8, 24] run past the end of the data "
            "section (16 bytes after the header)");
}

TEST_F(LoaderTest, RepeatedTensorNameIsRefused) {
  const std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                 "a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
  EXPECT_EQ(parseError(fileBytes(header, pattern(16, 1))),
            "model.safetensors: header: repeats the key \"a\" in one object");
}

// ---- a checkpoint that does not match its config ------------------------------------------------

TEST_F(LoaderTest, MissingRequiredTensorIsRefused) {
  std::vector<Tensor> tensors = tinyModel();
  std::erase_if(tensors,
                [](const Tensor& t) { return t.name == "model.layers.1.mlp.down_proj.weight"; });
  writeCheckpoint(tinyConfig(), tensors);
  EXPECT_EQ(
      errorOf([&] { Checkpoint::open(dir_); }),
      dir_.string() +
          ": the tensors do not match config.json (Qwen3ForCausalLM, 2 layers, hidden_size "
          "64, BF16): 1 problem(s)\n"
          "  tensor model.layers.1.mlp.down_proj.weight is missing (expected BF16 [64, 128])");
  // Tied embeddings off: lm_head is required.
  tensors = tinyModel(/*tied=*/true);
  writeCheckpoint(tinyConfig(), tensors);
  EXPECT_NE(errorOf([&] {
              Checkpoint::open(dir_);
            }).find("tensor lm_head.weight is missing (expected BF16 [32, 64])"),
            std::string::npos);
}

TEST_F(LoaderTest, TensorOfTheWrongShapeOrDtypeIsRefused) {
  std::vector<Tensor> tensors = tinyModel();
  for (Tensor& t : tensors) {
    if (t.name == "model.layers.0.self_attn.k_proj.weight") t = bf16(t.name, {128, 64}, 99);
    if (t.name == "model.norm.weight") t.dtype = "F16";
  }
  writeCheckpoint(tinyConfig(), tensors);
  EXPECT_EQ(errorOf([&] { Checkpoint::open(dir_); }),
            dir_.string() +
                ": the tensors do not match config.json (Qwen3ForCausalLM, 2 layers, hidden_size "
                "64, BF16): 2 problem(s)\n"
                "  tensor model.layers.0.self_attn.k_proj.weight in model.safetensors is BF16 "
                "[128, 64]; expected BF16 [64, 64]\n"
                "  tensor model.norm.weight in model.safetensors is F16 [64]; expected BF16 [64]");
}

TEST_F(LoaderTest, TensorTheConfigDoesNotExplainIsRefused) {
  std::vector<Tensor> tensors = tinyModel();
  tensors.push_back(bf16("model.layers.0.self_attn.q_proj.bias", {128}, 50));
  tensors.push_back(bf16("model.layers.2.input_layernorm.weight", {64}, 51));
  writeCheckpoint(tinyConfig(), tensors);
  const std::string e = errorOf([&] { Checkpoint::open(dir_); });
  EXPECT_NE(e.find("2 problem(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor model.layers.0.self_attn.q_proj.bias in model.safetensors is not one "
                   "of this config's tensors"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("tensor model.layers.2.input_layernorm.weight in model.safetensors is not one "
                   "of this config's tensors"),
            std::string::npos)
      << e;
}

TEST_F(LoaderTest, TypedLookupNamesWhatDiffers) {
  writeCheckpoint(tinyConfig(), tinyModel());
  const Checkpoint c = Checkpoint::open(dir_);
  EXPECT_NO_THROW(c.tensor("model.norm.weight", Dtype::kBF16, Shape{64}));
  EXPECT_EQ(errorOf([&] { c.tensor("model.norm.bias", Dtype::kBF16, Shape{64}); }),
            dir_.string() + ": tensor model.norm.bias is missing");
  EXPECT_EQ(errorOf([&] { c.tensor("model.norm.weight", Dtype::kF32, Shape{64}); }),
            dir_.string() +
                ": tensor model.norm.weight in model.safetensors is BF16 [64]; "
                "expected F32 [64]");
  EXPECT_EQ(errorOf([&] {
              c.tensor("model.norm.weight", Dtype::kBF16, Shape{1, 64});
            }),
            dir_.string() +
                ": tensor model.norm.weight in model.safetensors is BF16 [64]; "
                "expected BF16 [1, 64]");
}

TEST_F(LoaderTest, MissingFilesAreNamed) {
  EXPECT_NE(errorOf([&] { Checkpoint::open(dir_); }).find("config.json: cannot read"),
            std::string::npos);
  write("config.json", tinyConfig().dump());
  EXPECT_EQ(errorOf([&] { Checkpoint::open(dir_); }),
            dir_.string() + ": holds neither model.safetensors nor model.safetensors.index.json");
}

// ---- an unsupported config ----------------------------------------------------------------------

struct ConfigCase {
  const char* what;
  std::function<void(Json&)> edit;
  std::string error;  // the whole message
};

TEST_F(LoaderTest, UnsupportedConfigValuesAreRefused) {
  const auto moe = [](Json& c) { c = tinyMoeConfig(); };
  const auto gptq = [](Json& c) { c = tinyGptqConfig(); };
  const std::vector<ConfigCase> cases = {
      {"head dim", [](Json& c) { c["head_dim"] = 96; },
       "config.json: head_dim 96 is not supported (kiln builds 64, 128: the head dims decodeattn, "
       "fmha and qkrope share)"},
      {"missing key", [](Json& c) { c.erase("num_key_value_heads"); },
       "config.json: num_key_value_heads is missing"},
      {"null key", [](Json& c) { c["vocab_size"] = nullptr; },
       "config.json: vocab_size is missing (null)"},
      {"string for integer", [](Json& c) { c["hidden_size"] = "64"; },
       "config.json: hidden_size is a string (\"64\"); it must be an integer"},
      {"float for integer", [](Json& c) { c["hidden_size"] = 64.0; },
       "config.json: hidden_size is a float (64.0); it must be an integer"},
      {"bool type", [](Json& c) { c["tie_word_embeddings"] = 0; },
       "config.json: tie_word_embeddings is an integer (0); it must be true or false"},
      {"out of range", [](Json& c) { c["num_hidden_layers"] = 0; },
       "config.json: num_hidden_layers 0 is out of range (1 to 1024)"},
      {"huge", [](Json& c) { c["vocab_size"] = UINT64_MAX; },
       "config.json: vocab_size 18446744073709551615 is out of range (1 to 4194304)"},
      {"gqa",
       [](Json& c) {
         c["num_attention_heads"] = 3;
         c["num_key_value_heads"] = 2;
       },
       "config.json: num_key_value_heads 2 does not divide num_attention_heads 3 (grouped-query "
       "attention shares each KV head among a whole group)"},
      {"eps", [](Json& c) { c["rms_norm_eps"] = -1e-6; },
       "config.json: rms_norm_eps -1e-06 must be positive"},
      {"architecture", [](Json& c) { c["architectures"] = {"LlamaForCausalLM"}; },
       "config.json: architectures [\"LlamaForCausalLM\"] is not supported (this decoder runs "
       "Qwen3ForCausalLM, Qwen3MoeForCausalLM)"},
      {"model type", [](Json& c) { c["model_type"] = "qwen2"; },
       "config.json: model_type \"qwen2\" is not supported (a Qwen3ForCausalLM has model_type "
       "\"qwen3\")"},
      {"dtype", [](Json& c) { c["torch_dtype"] = "float32"; },
       "config.json: torch_dtype \"float32\" is not supported (kiln's kernels take bfloat16, "
       "float16)"},
      {"dtypes disagree", [](Json& c) { c["dtype"] = "float16"; },
       "config.json: dtype \"float16\" disagrees with torch_dtype \"bfloat16\""},
      {"rope scaling",
       [](Json& c) {
         c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
       },
       "config.json: rope_scaling {\"factor\":4.0,\"rope_type\":\"yarn\"} is not supported (only "
       "unscaled RoPE: rope_scaling absent or null)"},
      {"rope parameters",
       [](Json& c) {
         c.erase("rope_theta");
         c["rope_parameters"] = {{"rope_type", "dynamic"}, {"rope_theta", 1e6}};
       },
       "config.json: rope_parameters.rope_type \"dynamic\" is not supported (only unscaled RoPE: "
       "rope_type \"default\")"},
      {"sliding window", [](Json& c) { c["use_sliding_window"] = true; },
       "config.json: use_sliding_window true is not supported (every layer attends to the whole "
       "sequence: use_sliding_window false)"},
      {"bias", [](Json& c) { c["attention_bias"] = true; },
       "config.json: attention_bias true is not supported (Qwen3's projections have no bias: "
       "attention_bias false)"},
      {"activation", [](Json& c) { c["hidden_act"] = "gelu"; },
       "config.json: hidden_act \"gelu\" is not supported (Qwen3's MLP is SiLU(gate) * up: "
       "hidden_act \"silu\")"},
      {"moe key missing",
       [&](Json& c) {
         moe(c);
         c.erase("num_experts");
       },
       "config.json: num_experts is missing"},
      {"moe expert counts differ",
       [&](Json& c) {
         moe(c);
         c["num_local_experts"] = 8;
       },
       "config.json: num_local_experts 8 differs from num_experts 4"},
      {"moe top-k",
       [&](Json& c) {
         moe(c);
         c["num_experts_per_tok"] = 5;
       },
       "config.json: num_experts_per_tok 5 is out of range (1 to 4)"},
      {"moe dense layer",
       [&](Json& c) {
         moe(c);
         c["mlp_only_layers"] = {2};
       },
       "config.json: mlp_only_layers entry 2 is not a layer (0 to 1)"},
      {"desc_act",
       [&](Json& c) {
         gptq(c);
         c["quantization_config"]["desc_act"] = true;
       },
       "config.json: quantization_config.desc_act true is not supported (act-order permutes the "
       "input rows: only desc_act false)"},
      {"bits",
       [&](Json& c) {
         gptq(c);
         c["quantization_config"]["bits"] = 8;
       },
       "config.json: quantization_config.bits 8 is not supported (int4: bits 4)"},
      {"group size",
       [&](Json& c) {
         gptq(c);
         c["quantization_config"]["group_size"] = 64;
       },
       "config.json: quantization_config.group_size 64 is not supported (kiln's w4a16 builds "
       "128)"},
      {"awq",
       [&](Json& c) {
         gptq(c);
         c["quantization_config"]["quant_method"] = "awq";
       },
       "config.json: quantization_config.quant_method \"awq\" is not supported (this loader reads "
       "gptq)"},
      {"gptq shapes",
       [&](Json& c) {
         gptq(c);
         c["hidden_size"] = 64;
       },
       "config.json: quantization_config.group_size 128 does not fit q_proj [128 x 64]: input "
       "features must be a multiple of group_size and output features of 8 (int4 packed in "
       "int32)"},
  };
  for (const ConfigCase& k : cases) {
    Json config = tinyConfig();
    k.edit(config);
    EXPECT_EQ(errorOf([&] { parseConfig(config.dump()); }), k.error) << k.what;
  }
  // A key written twice: the DOM would keep the second; the loader refuses both.
  EXPECT_EQ(errorOf([] { parseConfig(R"({"head_dim": 96, "head_dim": 128})"); }),
            "config.json: repeats the key \"head_dim\" in one object");
  EXPECT_NE(
      errorOf([] { parseConfig("{\"hidden_size\": 64,"); }).find("config.json: not valid JSON: "),
      std::string::npos);
}

}  // namespace
}  // namespace qwen3
