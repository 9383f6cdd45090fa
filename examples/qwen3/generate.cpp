// qwen3_generate: batched greedy generation with a Qwen3 checkpoint on kiln's kernels, and the
// decoder's speed runs.
//
//   qwen3_generate --model DIR --prompts PROMPTS.json --new-tokens N --out OUTDIR
//                  [--page-size 16] [--max-seq-len L] [--no-graphs] [--tune-gemms] [--no-gemv]
//                  [--no-overlap] [--check]
//     PROMPTS.json: {"batches": [{"name": "b3", "prompts": [[token ids], ...]}, ...]}. For each
//     batch: one prefill and N - 1 decode steps; OUTDIR/<name>.json holds the generated tokens,
//     OUTDIR/<name>_logits.f32 the fp32 logits that chose them ([prompts, N, vocab], little
//     endian; reference/README.md). --check stops after the host-side admission (no GPU needed).
//
//   qwen3_generate --model DIR --bench --out BENCH.json [--batches 1,8,32,64] [--prompt-len 128]
//                  [--steps 128] [--prefill 1x4096,8x1024]
//     Decode tokens/s per batch size (after a prompt of --prompt-len random tokens per sequence),
//     prefill milliseconds per batch x length, the device's copy bandwidth and each decode row's
//     memory floor (weights + the KV cache read per step over the copy bandwidth).
//
//   --tune-gemms: cuBLASLt's algorithm for each decode GEMM (m <= the batch) by timing its first
//   8 heuristic candidates on the first call, instead of the heuristic's first.
//   --no-gemv: the dense projections and the LM head of decode's small batches (m <= 8) on cuBLASLt
//   too, instead of kiln's gemv (the A/B of the decoder's speed runs).
//   --no-overlap: kiln's kernels launched without overlap_launch (programmatic dependent launch),
//   each after the one before has finished (the A/B of what the overlap saves).
//
// Every input is checked on the host before anything is allocated on the GPU: the checkpoint
// (model/checkpoint.h), the config against the artifact (admit), the prompts against the cache.
// Exit status: 0 done, 1 refused or failed (the message names the value and the limit), 2 usage.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "runtime/engine.h"

namespace {

namespace fs = std::filesystem;
using qwen3::Error;
using Prompts = std::vector<std::vector<std::int32_t>>;

struct Args {
  fs::path model, prompts, out;
  int new_tokens = 16;
  int page_size = 16;
  int max_seq_len = 0;  // 0: what the prompts need
  bool graphs = true, check_only = false, bench = false, tune_gemms = false, gemv = true;
  bool overlap = true;
  std::vector<int> batches = {1, 8, 32, 64};
  int prompt_len = 128, steps = 128;
  std::vector<std::pair<int, int>> prefill = {{1, 4096}, {8, 1024}};
};

// The options both modes take from the command line; each mode sizes the rest.
qwen3::EngineOptions engineOptions(const Args& a) {
  qwen3::EngineOptions options;
  options.page_size = a.page_size;
  options.cuda_graphs = a.graphs;
  options.tune_gemms = a.tune_gemms;
  options.gemv = a.gemv;
  options.overlap_launch = a.overlap;
  return options;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "qwen3_generate: %s\nusage: qwen3_generate --model DIR --prompts FILE "
               "--new-tokens N --out DIR [--page-size P] [--max-seq-len L] [--no-graphs] "
               "[--tune-gemms] [--no-gemv] [--no-overlap] "
               "[--check]\n       qwen3_generate --model DIR --bench --out FILE [--batches "
               "1,8,32,64] [--prompt-len 128] [--steps 128] [--prefill 1x4096,8x1024]\n",
               why.c_str());
  std::exit(2);
}

int toInt(const std::string& flag, const std::string& text) {
  std::size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) usage(flag + " takes an integer, not '" + text + "'");
  return value;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  for (std::string part; std::getline(stream, part, sep);) parts.push_back(part);
  return parts;
}

Args parseArgs(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--model")
      a.model = value();
    else if (flag == "--prompts")
      a.prompts = value();
    else if (flag == "--out")
      a.out = value();
    else if (flag == "--new-tokens")
      a.new_tokens = toInt(flag, value());
    else if (flag == "--page-size")
      a.page_size = toInt(flag, value());
    else if (flag == "--max-seq-len")
      a.max_seq_len = toInt(flag, value());
    else if (flag == "--no-graphs")
      a.graphs = false;
    else if (flag == "--no-gemv")
      a.gemv = false;
    else if (flag == "--no-overlap")
      a.overlap = false;
    else if (flag == "--check")
      a.check_only = true;
    else if (flag == "--bench")
      a.bench = true;
    else if (flag == "--prompt-len")
      a.prompt_len = toInt(flag, value());
    else if (flag == "--steps")
      a.steps = toInt(flag, value());
    else if (flag == "--batches") {
      a.batches.clear();
      for (const auto& b : split(value(), ',')) a.batches.push_back(toInt(flag, b));
    } else if (flag == "--prefill") {
      a.prefill.clear();
      for (const auto& shape : split(value(), ',')) {
        const auto bl = split(shape, 'x');
        if (bl.size() != 2) usage("--prefill takes BATCHxLENGTH,..., not '" + shape + "'");
        a.prefill.emplace_back(toInt(flag, bl[0]), toInt(flag, bl[1]));
      }
    } else {
      usage("unknown argument '" + flag + "'");
    }
  }
  if (a.model.empty() || a.out.empty()) usage("--model and --out are required");
  if (!a.bench && a.prompts.empty()) usage("--prompts is required (or --bench)");
  if (a.new_tokens < 1) usage("--new-tokens must be >= 1");
  if (a.bench && (a.batches.empty() || a.steps < 1 || a.prompt_len < 1)) {
    usage("--bench needs batches >= 1, --steps >= 1 and --prompt-len >= 1");
  }
  return a;
}

struct Batch {
  std::string name;
  Prompts prompts;
};

std::vector<Batch> readPrompts(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot be read");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const std::exception& e) {
    throw Error(path.string() + ": not JSON: " + e.what());
  }
  std::vector<Batch> batches;
  try {
    for (const auto& b : j.at("batches")) {
      batches.push_back({b.at("name").get<std::string>(), b.at("prompts").get<Prompts>()});
      const std::string& name = batches.back().name;
      if (name.empty() || name.find_first_of("/\\.") != std::string::npos) {
        throw Error(path.string() + ": batch name '" + name + "' must be a plain file name stem");
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() +
                ": expected {\"batches\": [{\"name\": str, \"prompts\": "
                "[[int, ...], ...]}, ...]}: " +
                e.what());
  }
  if (batches.empty()) throw Error(path.string() + ": has no batch");
  return batches;
}

// Writes `bytes` to `path` through a temporary file renamed into place: no half-written output.
void writeFile(const fs::path& path, const void* bytes, std::size_t size) {
  const fs::path staged = path.string() + ".partial";
  {
    std::ofstream out(staged, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
    if (!out) throw Error(staged.string() + ": write failed");
  }
  fs::rename(staged, path);
}

void writeJson(const fs::path& path, const nlohmann::json& j) {
  const std::string text = j.dump(1) + "\n";
  writeFile(path, text.data(), text.size());
}

int roundUp(int value, int multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

int generate(const Args& a, const qwen3::Checkpoint& checkpoint) {
  const qwen3::Config& config = checkpoint.config();
  const std::vector<Batch> batches = readPrompts(a.prompts);
  qwen3::EngineOptions options = engineOptions(a);
  int longest = 0, widest = 0;
  for (const Batch& b : batches) {
    widest = std::max(widest, static_cast<int>(b.prompts.size()));
    for (const auto& p : b.prompts) longest = std::max(longest, static_cast<int>(p.size()));
  }
  options.max_batch = widest;
  options.max_seq_len =
      a.max_seq_len > 0 ? a.max_seq_len : roundUp(longest + a.new_tokens, a.page_size);
  qwen3::admit(checkpoint, options);
  for (const Batch& b : batches) {
    try {
      qwen3::checkPrompts(config, options, b.prompts, a.new_tokens);
    } catch (const Error& e) {
      throw Error("batch " + b.name + ": " + e.what());
    }
  }
  std::printf("admitted: %zu batches, max_batch %d, max_seq_len %d, page_size %d\n", batches.size(),
              options.max_batch, options.max_seq_len, options.page_size);
  if (a.check_only) return 0;

  qwen3::Engine engine(checkpoint, options);
  fs::create_directories(a.out);
  const std::size_t vocab = static_cast<std::size_t>(config.vocab_size);
  const std::size_t steps = static_cast<std::size_t>(a.new_tokens);
  for (const Batch& b : batches) {
    const std::size_t n = b.prompts.size();
    std::vector<std::vector<std::int32_t>> tokens(n);
    std::vector<float> all(n * steps * vocab), step_logits;
    const auto keep = [&](std::size_t step, const std::vector<std::int32_t>& next) {
      for (std::size_t s = 0; s < n; ++s) {
        tokens[s].push_back(next[s]);
        std::copy_n(step_logits.begin() + static_cast<std::ptrdiff_t>(s * vocab), vocab,
                    all.begin() + static_cast<std::ptrdiff_t>((s * steps + step) * vocab));
      }
    };
    const auto start = std::chrono::steady_clock::now();
    keep(0, engine.prefill(b.prompts, &step_logits));
    for (std::size_t step = 1; step < steps; ++step) keep(step, engine.decode(&step_logits));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string logits_file = b.name + "_logits.f32";
    writeFile(a.out / logits_file, all.data(), all.size() * sizeof(float));
    writeJson(a.out / (b.name + ".json"), {{"name", b.name},
                                           {"new_tokens", a.new_tokens},
                                           {"vocab", config.vocab_size},
                                           {"tokens", tokens},
                                           {"logits_file", logits_file}});
    std::printf("%s: %zu prompts, %d new tokens each, %.1f ms (with the logits copied out)\n",
                b.name.c_str(), n, a.new_tokens, seconds * 1e3);
  }
  return 0;
}

// Milliseconds between two events recorded on the engine's stream around `body`.
template <typename Body>
double timeMs(cudaStream_t stream, Body&& body) {
  cudaEvent_t begin, end;
  QWEN3_CUDA(cudaEventCreate(&begin));
  QWEN3_CUDA(cudaEventCreate(&end));
  QWEN3_CUDA(cudaEventRecord(begin, stream));
  body();
  QWEN3_CUDA(cudaEventRecord(end, stream));
  QWEN3_CUDA(cudaEventSynchronize(end));
  float ms = 0;
  QWEN3_CUDA(cudaEventElapsedTime(&ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return ms;
}

// Device-to-device copy bandwidth, bytes read + written per second, best of 5 of 1 GiB.
double copyBandwidth(cudaStream_t stream) {
  const std::size_t bytes = 1ull << 30;
  qwen3::DeviceBuffer a(bytes), b(bytes);
  QWEN3_CUDA(cudaMemsetAsync(a.get(), 1, bytes, stream));
  double best = 1e30;
  for (int i = 0; i < 6; ++i) {
    const double ms = timeMs(stream, [&] {
      QWEN3_CUDA(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    });
    if (i > 0) best = std::min(best, ms);
  }
  return 2.0 * static_cast<double>(bytes) / (best * 1e-3);
}

Prompts randomPrompts(int batch, int length, std::int64_t vocab, std::mt19937& rng) {
  std::uniform_int_distribution<std::int32_t> id(0, static_cast<std::int32_t>(vocab - 1));
  Prompts prompts(static_cast<std::size_t>(batch), std::vector<std::int32_t>(length));
  for (auto& p : prompts) std::generate(p.begin(), p.end(), [&] { return id(rng); });
  return prompts;
}

int bench(const Args& a, const qwen3::Checkpoint& checkpoint) {
  const qwen3::Config& config = checkpoint.config();
  constexpr int kWarmSteps = 4;
  qwen3::EngineOptions options = engineOptions(a);
  options.max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  options.max_seq_len = roundUp(a.prompt_len + kWarmSteps + a.steps, a.page_size);
  options.max_prefill_tokens = options.max_batch * a.prompt_len;
  for (const auto& [batch, length] : a.prefill) {
    options.max_batch = std::max(options.max_batch, batch);
    options.max_seq_len = std::max(options.max_seq_len, roundUp(length, a.page_size));
    options.max_prefill_tokens = std::max(options.max_prefill_tokens, batch * length);
  }
  qwen3::Engine engine(checkpoint, options);  // admits first
  cudaStream_t stream = engine.stream();
  std::mt19937 rng(7);
  cudaDeviceProp prop{};
  QWEN3_CUDA(cudaGetDeviceProperties(&prop, 0));
  int driver = 0;
  QWEN3_CUDA(cudaDriverGetVersion(&driver));

  const double copy = copyBandwidth(stream);
  nlohmann::json out = {{"gpu", prop.name},
                        {"sm", engine.deviceSm()},
                        {"cuda_driver", driver},
                        {"copy_bytes_per_s", copy},
                        {"weight_bytes_per_step", engine.weightBytesPerStep(1)},
                        {"kv_bytes_per_token_per_layer", engine.kvBytesPerToken()},
                        {"layers", config.num_hidden_layers},
                        {"page_size", a.page_size},
                        {"cuda_graphs", a.graphs},
                        {"tune_gemms", a.tune_gemms},
                        {"gemv", a.gemv},
                        {"overlap_launch", a.overlap},
                        {"prompt_len", a.prompt_len},
                        {"steps", a.steps}};
  for (const int batch : a.batches) {
    engine.prefill(randomPrompts(batch, a.prompt_len, config.vocab_size, rng));
    for (int i = 0; i < kWarmSteps; ++i) engine.decode();  // loads, captures the graph
    const double ms = timeMs(stream, [&] {
      for (int i = 0; i < a.steps; ++i) engine.decode();
    });
    // The memory floor of a step: every weight it reads once (in MoE layers, the experts the
    // batch is expected to route to), and each sequence's cached K and V per layer (its mean
    // length over the timed steps).
    const double mean_len = a.prompt_len + kWarmSteps + (a.steps + 1) / 2.0;
    const double bytes = static_cast<double>(engine.weightBytesPerStep(batch)) +
                         batch * mean_len * static_cast<double>(engine.kvBytesPerToken()) *
                             static_cast<double>(config.num_hidden_layers);
    const double step_ms = ms / a.steps;
    const double floor_ms = bytes / copy * 1e3;
    out["decode"].push_back({{"batch", batch},
                             {"step_ms", step_ms},
                             {"tokens_per_s", batch * a.steps / (ms * 1e-3)},
                             {"bytes_per_step", bytes},
                             {"floor_ms", floor_ms},
                             {"fraction_of_floor", floor_ms / step_ms}});
    std::printf("decode batch %d: %.3f ms/step, %.0f tokens/s, floor %.3f ms (%.1f%%)\n", batch,
                step_ms, batch * a.steps / (ms * 1e-3), floor_ms, 100 * floor_ms / step_ms);
  }
  for (const auto& [batch, length] : a.prefill) {
    const Prompts prompts = randomPrompts(batch, length, config.vocab_size, rng);
    engine.prefill(prompts);  // warm: loads the prefill kernels, plans the GEMMs
    double best = 1e30;
    for (int i = 0; i < 3; ++i) {
      best = std::min(best, timeMs(stream, [&] { engine.prefill(prompts); }));
    }
    out["prefill"].push_back({{"batch", batch}, {"length", length}, {"ms", best}});
    std::printf("prefill %d x %d: %.2f ms\n", batch, length, best);
  }
  writeJson(a.out, out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parseArgs(argc, argv);
  try {
    const qwen3::Checkpoint checkpoint = qwen3::Checkpoint::open(args.model);
    return args.bench ? bench(args, checkpoint) : generate(args, checkpoint);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3_generate: %s\n", e.what());
    return 1;
  }
}
