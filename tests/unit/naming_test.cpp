// Names derived from a variant name (contract 4): symbols, define, header and cubin paths,
// constant macros and identifiers, the artifact tag.
#include <gtest/gtest.h>

#include "core/naming.h"

namespace kiln::core {
namespace {

TEST(Naming, SymbolsAndDefines) {
  EXPECT_EQ(imageSymbol("rmsnorm_h4096_bf16", 90), "kiln_rmsnorm_h4096_bf16__arch90_image");
  EXPECT_EQ(variantSymbol("rmsnorm_h4096_bf16"), "kiln_rmsnorm_h4096_bf16_variant");
  EXPECT_EQ(enabledDefine("fmha_wgmma_d128_bf16_causal"), "KILN_FMHA_WGMMA_D128_BF16_CAUSAL_ENABLED");
}

TEST(Naming, Paths) {
  EXPECT_EQ(cubinPath("rmsnorm_h4096_bf16", 87), "cubins/rmsnorm_h4096_bf16.sm_87.cubin");
  EXPECT_EQ(variantHeaderPath("rmsnorm_h4096_bf16"), "include/kiln/variants/rmsnorm_h4096_bf16.h");
  EXPECT_EQ(groupHeaderPath("rmsnorm"), "include/kiln/groups/rmsnorm.h");
}

TEST(Naming, Constants) {
  EXPECT_EQ(constantMacro("head_dim"), "KILN_CONST_HEAD_DIM");
  EXPECT_EQ(constantIdentifier("head_dim"), "kHeadDim");
  EXPECT_EQ(constantIdentifier("hidden"), "kHidden");
}

TEST(Naming, TargetsAndTags) {
  EXPECT_EQ(nvccTarget(90, false), "sm_90");
  EXPECT_EQ(nvccTarget(90, true), "sm_90a");
  EXPECT_EQ(artifactTag({90}), "sm_90");
  EXPECT_EQ(artifactTag({90, 87}), "sm_87_sm_90");
  EXPECT_EQ(artifactTag({110, 87}), "sm_87_sm_110");
}

}  // namespace
}  // namespace kiln::core
