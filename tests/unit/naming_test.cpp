// Names derived from a variant name (contract 4): symbols, define, header, cubin and PTX paths,
// constant macros and identifiers, the nvcc targets, the gpu_archs entries (sm_NN, compute_NN)
// and the artifact tag.
#include <gtest/gtest.h>

#include "core/naming.h"

namespace kiln::core {
namespace {

TEST(Naming, SymbolsAndDefines) {
  EXPECT_EQ(imageSymbol("rmsnorm_h4096_bf16", 90), "kiln_rmsnorm_h4096_bf16__arch90_image");
  EXPECT_EQ(variantSymbol("rmsnorm_h4096_bf16"), "kiln_rmsnorm_h4096_bf16_variant");
  EXPECT_EQ(enabledDefine("fmha_wgmma_d128_bf16_causal"),
            "KILN_FMHA_WGMMA_D128_BF16_CAUSAL_ENABLED");
}

TEST(Naming, Paths) {
  EXPECT_EQ(cubinPath("rmsnorm_h4096_bf16", 87), "cubins/rmsnorm_h4096_bf16.sm_87.cubin");
  EXPECT_EQ(variantHeaderPath("rmsnorm_h4096_bf16"), "include/kiln/variants/rmsnorm_h4096_bf16.h");
  EXPECT_EQ(groupHeaderPath("rmsnorm"), "include/kiln/groups/rmsnorm.h");
  EXPECT_EQ(ptxPath("rmsnorm_h4096_bf16", 80), "cubins/rmsnorm_h4096_bf16.compute_80.ptx");
  EXPECT_EQ(imagePath("rmsnorm_h4096_bf16", 80, true), "cubins/rmsnorm_h4096_bf16.compute_80.ptx");
  EXPECT_EQ(imagePath("rmsnorm_h4096_bf16", 87, false), "cubins/rmsnorm_h4096_bf16.sm_87.cubin");
  // The shim and its library member are named like the image file.
  EXPECT_EQ(imageStem("rmsnorm_h4096_bf16", 87, false), "rmsnorm_h4096_bf16.sm_87");
  EXPECT_EQ(imageStem("rmsnorm_h4096_bf16", 80, true), "rmsnorm_h4096_bf16.compute_80");
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

TEST(Naming, PtxTargetsAndTags) {
  EXPECT_EQ(ptxTarget(80), "compute_80");
  EXPECT_EQ(nvccTarget(80, false, true), "compute_80");
  EXPECT_EQ(nvccTarget(90, true, true), "compute_90");  // PTX is never arch-specific here
  EXPECT_EQ(nvccTarget(90, true, false), "sm_90a");
  EXPECT_EQ(gpuArchName(GpuArch(90)), "sm_90");
  EXPECT_EQ(gpuArchName(GpuArch(80, true)), "compute_80");
  EXPECT_EQ(gpuArchName(GpuArch(120, true)), "compute_120");
  EXPECT_EQ(artifactTag({GpuArch(80, true)}), "compute_80");
  // Ascending by SM, each entry spelled as its kind.
  EXPECT_EQ(artifactTag({GpuArch(90, true), GpuArch(80)}), "sm_80_compute_90");
  EXPECT_EQ(artifactTag({GpuArch(100, true), GpuArch(87), GpuArch(90)}), "sm_87_sm_90_compute_100");
}

TEST(Naming, ParsesGpuArchEntries) {
  EXPECT_EQ(parseGpuArch("sm_90"), GpuArch(90));
  EXPECT_EQ(parseGpuArch("compute_80"), GpuArch(80, true));
  EXPECT_EQ(parseGpuArch("compute_120"), GpuArch(120, true));
  EXPECT_FALSE(parseGpuArch("sm_90").ptx);
  EXPECT_TRUE(parseGpuArch("compute_80").ptx);
  // Malformed: SM 0 (arch-specific targets come from kiln.toml, not from a tag).
  for (const char* bad : {"sm_90a", "compute_80a", "compute_", "sm_", "compute_8x", "compute_1000",
                          "lto_80", "compute80", "", "80", " sm_90"}) {
    EXPECT_EQ(parseGpuArch(bad).sm, 0) << "'" << bad << "'";
  }
  // Round trip through the name.
  for (const GpuArch arch : {GpuArch(75), GpuArch(87, true), GpuArch(110, true)}) {
    EXPECT_EQ(parseGpuArch(gpuArchName(arch)), arch) << gpuArchName(arch);
  }
}

}  // namespace
}  // namespace kiln::core
