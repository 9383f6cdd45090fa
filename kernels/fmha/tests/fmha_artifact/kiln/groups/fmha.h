#pragma once
// A stand-in for the kiln/groups/fmha.h that `kiln build` generates (tools/kiln/core/codegen.cpp,
// groupHeader), so that fmha_runner_test compiles kernels/fmha/runner/runner.cpp as an artifact
// does: the same namespace, struct and member names (one member per kiln.toml constant: head_dim
// as int, the dtype and enum constants dtype and mask as const char*). The variant functions are
// defined by the test, over fake cubins.
#include "kiln/variant.h"
#ifdef __cplusplus
extern "C" {
#endif
const kiln_variant* kiln_fmha_wgmma_d128_bf16_causal_variant(void);
const kiln_variant* kiln_fmha_wgmma_d64_fp16_full_variant(void);
#ifdef __cplusplus
}
namespace kiln::generated::fmha {
struct VariantEntry {
  const char* name;
  const kiln_variant* (*variant)();
  int head_dim;
  const char* dtype;
  const char* mask;
};
inline constexpr VariantEntry kVariants[] = {
    {"fmha_wgmma_d128_bf16_causal", &kiln_fmha_wgmma_d128_bf16_causal_variant, 128, "bf16",
     "causal"},
    {"fmha_wgmma_d64_fp16_full", &kiln_fmha_wgmma_d64_fp16_full_variant, 64, "fp16", "full"},
};
inline constexpr int kNumVariants = 2;
}  // namespace kiln::generated::fmha
#endif
