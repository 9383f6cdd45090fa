// The moe group's shapes, shared by the GPU numerics test: the models of issue 27 (Qwen3-30B-A3B,
// Mixtral-8x7B, a gpt-oss-like 2880 x 2880) at token counts from 1 to 1000, and routings that
// stress the alignment (every token to one expert; experts with no token).
#pragma once

#include <cstdint>

namespace kiln::moe::cases {

// How the case's router logits are drawn.
enum class Routing {
  kRandom,     // a random permutation of distinct values per token: no near-ties
  kOneExpert,  // every token prefers the same k experts (one expert takes every token when k = 1)
  kTied,       // every logit of a token equal: the top k are experts 0..k-1, weights 1/E or 1/k
};

struct Case {
  const char* name;
  std::int64_t tokens;
  int experts;
  int top_k;
  std::int64_t hidden;
  std::int64_t intermediate;
  Routing routing = Routing::kRandom;
  bool residual = false;
  bool logits_fp32 = false;
  bool renormalize = true;
};

inline constexpr Case kCases[] = {
    {"qwen3_t1", 1, 128, 8, 2048, 768},
    {"qwen3_t3", 3, 128, 8, 2048, 768, Routing::kRandom, true, true},
    {"qwen3_t17", 17, 128, 8, 2048, 768, Routing::kRandom, false, false, false},
    {"qwen3_t1000", 1000, 128, 8, 2048, 768, Routing::kRandom, true},
    {"qwen3_t300_one_expert_set", 300, 128, 8, 2048, 768, Routing::kOneExpert},
    {"mixtral_t1", 1, 8, 2, 4096, 14336, Routing::kRandom, true, true},
    {"mixtral_t17", 17, 8, 2, 4096, 14336},
    {"mixtral_t200", 200, 8, 2, 4096, 14336, Routing::kRandom, false, true},
    {"gptoss_t17_e64_k4", 17, 64, 4, 2880, 2880, Routing::kRandom, true},
    {"gptoss_t129_e64_k4", 129, 64, 4, 2880, 2880, Routing::kRandom, false, false, false},
    {"e8_k1_t1000_one_expert", 1000, 8, 1, 2048, 768, Routing::kOneExpert, true},
    {"e8_k1_t64", 64, 8, 1, 2048, 768, Routing::kRandom, false, true},
    {"e512_k16_t33", 33, 512, 16, 256, 128, Routing::kRandom, true, true},
    {"e16_k4_t5_tied", 5, 16, 4, 512, 256, Routing::kTied},
};

// The host reference checks at most this many expert rows of act and of down, and of y's tokens,
// per case (spread over all of them); every row when there are fewer.
inline constexpr int kSampledRows = 48;

}  // namespace kiln::moe::cases
