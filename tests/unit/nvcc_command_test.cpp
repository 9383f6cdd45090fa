// The CUDA front end's nvcc command: the -D contract of docs/registry.md, the target choice
// (sm_90 vs sm_90a vs compute_80 PTX, which has no -Xptxas -v), the SM constant, the CUTLASS
// include, and the sources read from their staged copy, never from the checkout; checked without
// running nvcc.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/frontend.h"
#include "core/toolchain.h"

namespace kiln::core {
namespace {

Variant makeVariant() {
  Variant v;
  v.name = "rmsnorm_h4096_bf16";
  v.group = "rmsnorm";
  v.source = "/repo/kernels/rmsnorm/rmsnorm.cu";
  v.entries = {"kiln_rmsnorm"};
  v.supported_sms = {80, 90};
  v.constants = {{"hidden", ConstantType::kInt, std::int64_t{4096}},
                 {"dtype", ConstantType::kDtype, std::string("bf16")},
                 {"causal", ConstantType::kBool, true},
                 {"mask", ConstantType::kEnum, std::string("sliding")}};
  v.nvcc_flags = {"--use_fast_math"};
  return v;
}

// Where the builder staged the sources (core/inputs.h).
constexpr char kStaged[] = "/tmp/kiln-src-0123456789abcdef";

bool has(const std::vector<std::string>& argv, const std::string& arg) {
  return std::find(argv.begin(), argv.end(), arg) != argv.end();
}

TEST(NvccCommand, PassesEveryConstantAsTheRegistryDocumentSays) {
  Variant v = makeVariant();
  CudaToolchain cuda;
  cuda.nvcc = "/usr/local/cuda/bin/nvcc";
  CompileRequest request{&v,    90, "/repo", "/stage/cubins/rmsnorm_h4096_bf16.sm_90.cubin",
                         &cuda, {}};
  request.sources = kStaged;
  const auto argv = nvccCommand(request);
  const std::vector<std::string> head = {"/usr/local/cuda/bin/nvcc",
                                         "-cubin",
                                         "-arch=sm_90",
                                         "-O3",
                                         "-std=c++17",
                                         "-Xptxas",
                                         "-v",
                                         "-lineinfo",
                                         "-I",
                                         std::string(kStaged) + "/kernels"};
  ASSERT_GE(argv.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), argv.begin()));
  EXPECT_TRUE(has(argv, "-DKILN_CONST_HIDDEN=4096"));
  EXPECT_TRUE(has(argv, "-DKILN_CONST_DTYPE=__nv_bfloat16"));
  EXPECT_TRUE(has(argv, "-DKILN_CONST_DTYPE_BF16=1"));
  EXPECT_TRUE(has(argv, "-DKILN_CONST_CAUSAL=1"));
  EXPECT_TRUE(has(argv, "-DKILN_CONST_MASK_SLIDING=1"));
  EXPECT_FALSE(has(argv, "-DKILN_CONST_MASK=sliding"));
  EXPECT_TRUE(has(argv, "-DKILN_VARIANT_NAME=rmsnorm_h4096_bf16"));
  EXPECT_TRUE(has(argv, "--use_fast_math"));
  EXPECT_FALSE(has(argv, "-DKILN_TARGET_SM=90"));
  // -c: no effect with -cubin, but ccache caches nvcc only with it (docs/cli.md).
  const std::vector<std::string> tail = {"-c", "-o", "/stage/cubins/rmsnorm_h4096_bf16.sm_90.cubin",
                                         std::string(kStaged) + "/kernels/rmsnorm/rmsnorm.cu"};
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), argv.end() - 4));
  for (const auto& arg : argv) EXPECT_EQ(arg.find("/repo"), std::string::npos) << arg;
}

TEST(NvccCommand, ArchSpecificSmConstantAndCutlass) {
  Variant v = makeVariant();
  v.arch_specific = true;
  v.sm_constant = true;
  v.uses = {"cutlass"};
  CompileRequest request{&v, 90, "/repo", "/o.cubin", nullptr, "/venv/cutlass/include"};
  const auto argv = nvccCommand(request);
  EXPECT_TRUE(has(argv, "-arch=sm_90a"));
  EXPECT_TRUE(has(argv, "-DKILN_TARGET_SM=90"));
  auto it = std::find(argv.begin(), argv.end(), "/venv/cutlass/include");
  ASSERT_NE(it, argv.end());
  EXPECT_EQ(*(it - 1), "-I");
}

// A PTX request: `-ptx -arch=compute_80` and no ptxas flags; every other argument as the cubin
// request's, in the same order, so the PTX is the code the cubin would be compiled from.
TEST(NvccCommand, PtxRequestCompilesToPtxWithoutPtxas) {
  Variant v = makeVariant();
  v.sm_constant = true;
  CudaToolchain cuda;
  cuda.nvcc = "/usr/local/cuda/bin/nvcc";
  CompileRequest cubin_request{&v,    80, "/repo", "/stage/cubins/rmsnorm_h4096_bf16.sm_80.cubin",
                               &cuda, {}};
  CompileRequest request{&v,    80, "/repo", "/stage/cubins/rmsnorm_h4096_bf16.compute_80.ptx",
                         &cuda, {}};
  cubin_request.sources = kStaged;
  request.sources = kStaged;
  request.ptx = true;
  const auto argv = nvccCommand(request);
  const std::vector<std::string> head = {"/usr/local/cuda/bin/nvcc",
                                         "-ptx",
                                         "-arch=compute_80",
                                         "-O3",
                                         "-std=c++17",
                                         "-lineinfo",
                                         "-I",
                                         std::string(kStaged) + "/kernels"};
  ASSERT_GE(argv.size(), head.size());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), argv.begin()));
  EXPECT_FALSE(has(argv, "-cubin"));
  EXPECT_FALSE(has(argv, "-Xptxas"));
  EXPECT_FALSE(has(argv, "-v"));
  EXPECT_FALSE(has(argv, "-arch=sm_80"));
  EXPECT_TRUE(has(argv, "-DKILN_TARGET_SM=80"));
  const std::vector<std::string> tail = {"-o", "/stage/cubins/rmsnorm_h4096_bf16.compute_80.ptx",
                                         std::string(kStaged) + "/kernels/rmsnorm/rmsnorm.cu"};
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), argv.end() - 3));

  // The cubin command less -Xptxas -v, with -ptx/-arch swapped and the output path changed.
  std::vector<std::string> expected = nvccCommand(cubin_request);
  ASSERT_EQ(expected[1], "-cubin");
  ASSERT_EQ(expected[2], "-arch=sm_80");
  ASSERT_EQ(expected[5], "-Xptxas");
  ASSERT_EQ(expected[6], "-v");
  expected[1] = "-ptx";
  expected[2] = "-arch=compute_80";
  expected.erase(expected.begin() + 5, expected.begin() + 7);
  expected[expected.size() - 2] = "/stage/cubins/rmsnorm_h4096_bf16.compute_80.ptx";
  EXPECT_EQ(argv, expected);
}

TEST(NvccCommand, FalseBoolIsZero) {
  Variant v = makeVariant();
  v.constants[2].value = false;
  CompileRequest request{&v, 87, "/repo", "/o.cubin", nullptr, {}};
  const auto argv = nvccCommand(request);
  EXPECT_TRUE(has(argv, "-DKILN_CONST_CAUSAL=0"));
  EXPECT_TRUE(has(argv, "-arch=sm_87"));
}

TEST(Toolchain, ParsesNvccVersionAndTargets) {
  EXPECT_EQ(parseNvccVersion("Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0"),
            "13.0.88");
  EXPECT_EQ(parseNvccVersion("no version"), "");
  EXPECT_EQ(parseGpuCodeList("sm_75\nsm_80\nsm_90\nsm_100\nsm_90\ncompute_90\n"),
            (std::vector<int>{75, 80, 90, 100}));
}

TEST(FrontEnd, EachKindHasItsFrontEnd) {
  auto cuda = frontEndFor(SourceKind::kCuda);
  auto dsl = frontEndFor(SourceKind::kCuteDsl);  // tests/unit/cute_dsl_frontend_test.cpp
  ASSERT_TRUE(cuda);
  ASSERT_TRUE(dsl);
  EXPECT_NE(*cuda, *dsl);
}

}  // namespace
}  // namespace kiln::core
