// CUDA 12 beside CUDA 13 (issue 34; docs/cli.md, "CUDA versions"): --cuda-version parsing, the
// toolkit selection (a CUDA 12 nvcc as it is, else the split toolchain: the system nvcc's PTX
// lowered to the CUDA 12 ptxas' ISA and assembled by it), the split front end's commands and its
// build end to end on the fake toolchain, the metadata it records, the merge refused across
// CUDA majors, and the setup script's pin.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <regex>

#include "core/builder.h"
#include "core/codegen.h"
#include "core/fingerprint.h"
#include "core/frontend.h"
#include "core/metadata.h"
#include "core/toolchain.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using kiln::testing::FakeTools;
using kiln::testing::TempDir;

TEST(CudaVersionOption, AcceptsTheMajorsKilnBuildsWith) {
  EXPECT_EQ(*parseCudaMajor("12"), 12);
  EXPECT_EQ(*parseCudaMajor("13"), 13);
  for (const char* bad : {"11", "14", "12.6", "cuda12", "", " 12"}) {
    auto r = parseCudaMajor(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
    EXPECT_NE(r.error().find("allowed values: 12, 13"), std::string::npos) << r.error();
  }
  EXPECT_EQ(parseCudaMajor("11").error(),
            "--cuda-version 11: kiln builds with CUDA 12 or 13 (allowed values: 12, 13)");
}

TEST(CudaVersionOption, VersionNumbersAndPtxIsas) {
  EXPECT_EQ(cudaVersionNumber("12.6.85"), 12060);
  EXPECT_EQ(cudaVersionNumber("13.0.88"), 13000);
  EXPECT_EQ(cudaVersionNumber("12.10"), 12100);
  EXPECT_EQ(cudaVersionNumber(""), 0);
  EXPECT_EQ(cudaVersionNumber("twelve"), 0);
  EXPECT_EQ(ptxIsaOf("12.6.85"), "8.5");
  EXPECT_EQ(ptxIsaOf("12.9.86"), "8.8");
  EXPECT_EQ(ptxIsaOf("12.7.1"), "");
  EXPECT_EQ(ptxIsaOf("13.0.88"), "");
}

TEST(CudaVersionOption, PtxasArchListIsTheGpuNameOptionsOnly) {
  const std::string help =
      "--foo\n        Allowed values for this option:  'sm_10'.\n"
      "--gpu-name <gpu name>    (-arch)\n"
      "        Allowed values for this option:  'compute_90','compute_90a','lto_90','sm_75',\n"
      "        'sm_80','sm_87','sm_90','sm_90a','sm_80'.\n"
      "\n--help\n        Allowed values for this option:  'sm_100'.\n";
  EXPECT_EQ(parsePtxasArchList(help), (std::vector<int>{75, 80, 87, 90}));
  EXPECT_TRUE(parsePtxasArchList("no such option").empty());
}

TEST(RetargetPtx, LowersOnlyTheVersionDirective) {
  const std::string ptx =
      "//\n// .version 9.0 in a comment stays\n//\n\n.version 9.0\n.target sm_90a\n"
      ".address_size 64\n";
  auto lowered = retargetPtx(ptx, "8.5");
  ASSERT_TRUE(lowered) << lowered.error();
  EXPECT_EQ(*lowered,
            "//\n// .version 9.0 in a comment stays\n//\n\n.version 8.5\n.target sm_90a\n"
            ".address_size 64\n");
  // Not newer: left alone, byte for byte.
  const std::string old = ".version 8.0\n.target sm_87\n";
  EXPECT_EQ(*retargetPtx(old, "8.5"), old);
  EXPECT_EQ(*retargetPtx(".version 8.5\r\n", "8.5"), ".version 8.5\r\n");
  auto none = retargetPtx(".target sm_90\n", "8.5");
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("no .version directive"), std::string::npos);
}

class ToolkitSelection : public ::testing::Test {
 protected:
  std::string home() const { return (tmp_.path() / kCuda12Toolkit).string(); }
  TempDir tmp_;
  FakeTools tools_;
};

TEST_F(ToolkitSelection, Cuda13IsTheSystemNvccAndMustBeCuda13) {
  auto cuda = selectCuda(tools_.runner, {"nvcc", "", ""}, tmp_.path(), 13);
  ASSERT_TRUE(cuda) << cuda.error();
  EXPECT_EQ(cuda->version, "13.0.88");
  EXPECT_FALSE(cuda->split());
  tools_.nvcc_release = "V12.4.131";
  auto wrong = selectCuda(tools_.runner, {"nvcc", "", ""}, tmp_.path(), 13);
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(wrong.error().find("--cuda-version 13: nvcc is CUDA 12.4.131"), std::string::npos)
      << wrong.error();
}

TEST_F(ToolkitSelection, Cuda12UsesAToolkitsOwnNvccWhenItHasOne) {
  tools_.nvcc_release = "V12.6.85";
  auto cuda = selectCuda(tools_.runner, {"nvcc", "", "/opt/cuda-12.6"}, tmp_.path(), 12);
  ASSERT_TRUE(cuda) << cuda.error();
  EXPECT_EQ(cuda->nvcc, "/opt/cuda-12.6/bin/nvcc");
  EXPECT_EQ(cuda->version, "12.6.85");
  EXPECT_FALSE(cuda->split());
  EXPECT_EQ(cuda->include_dir, fs::path("/opt/cuda-12.6/include"));
}

TEST_F(ToolkitSelection, Cuda12FromTheWheelIsTheSplitToolchain) {
  tools_.runner.setMissing({home() + "/bin/nvcc"});
  auto cuda = selectCuda(tools_.runner, {"nvcc", "", ""}, tmp_.path(), 12);
  ASSERT_TRUE(cuda) << cuda.error();
  EXPECT_TRUE(cuda->split());
  EXPECT_EQ(cuda->nvcc, "nvcc");
  EXPECT_EQ(cuda->ptxas, home() + "/bin/ptxas");
  EXPECT_EQ(cuda->version, "12.6.85");
  EXPECT_EQ(cuda->frontend_version, "13.0.88");
  EXPECT_EQ(cuda->ptx_isa, "8.5");
  EXPECT_EQ(cuda->major(), 12);
  // What both compile: nvcc's list (to sm_120) cut to what ptxas 12.6 assembles (to sm_90).
  EXPECT_EQ(cuda->sms, (std::vector<int>{75, 80, 86, 87, 89, 90}));
}

TEST_F(ToolkitSelection, Cuda12MissingNamesTheSetupScriptAndThePin) {
  tools_.runner.setMissing({home() + "/bin/nvcc", home() + "/bin/ptxas"});
  auto cuda = selectCuda(tools_.runner, {"nvcc", "", ""}, tmp_.path(), 12);
  ASSERT_FALSE(cuda);
  EXPECT_EQ(cuda.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(cuda.error().find("no CUDA 12 toolkit at " + home()), std::string::npos)
      << cuda.error();
  EXPECT_NE(cuda.error().find("scripts/setup.sh"), std::string::npos);
  EXPECT_NE(cuda.error().find("nvidia-cuda-nvcc-cu12==12.6.85"), std::string::npos);
  EXPECT_NE(cuda.error().find("KILN_CUDA12_HOME"), std::string::npos);
}

TEST_F(ToolkitSelection, Cuda12PtxasOfAnotherMajorOrUnknownIsaIsRefused) {
  tools_.runner.setMissing({home() + "/bin/nvcc"});
  tools_.ptxas_release = "13.0, V13.0.88";
  auto thirteen = selectCuda(tools_.runner, {"nvcc", "", ""}, tmp_.path(), 12);
  ASSERT_FALSE(thirteen);
  EXPECT_NE(thirteen.error().find("is CUDA 13.0.88"), std::string::npos) << thirteen.error();
  tools_.ptxas_release = "12.7, V12.7.1";
  auto unknown = selectCuda(tools_.runner, {"nvcc", "", ""}, tmp_.path(), 12);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("whose PTX ISA kiln does not know"), std::string::npos)
      << unknown.error();
}

TEST(SplitCommands, NvccWritesPtxForTheTargetAndPtxasAssemblesIt) {
  Variant v;
  v.name = "fmha_wgmma_d128_bf16_causal";
  v.group = "fmha";
  v.source = "/repo/kernels/fmha/fmha.cu";
  v.arch_specific = true;
  v.entries = {"kiln_fmha"};
  CudaToolchain cuda;
  cuda.nvcc = "/usr/local/cuda/bin/nvcc";
  cuda.version = "12.6.85";
  cuda.ptxas = "/repo/.cuda12/nvidia/cuda_nvcc/bin/ptxas";
  cuda.frontend_version = "13.0.88";
  cuda.ptx_isa = "8.5";
  CompileRequest request;
  request.variant = &v;
  request.sm = 90;
  request.root = "/repo";
  request.sources = "/stage/abc";
  request.cubin = "/art/.stage/cubins/fmha_wgmma_d128_bf16_causal.sm_90.cubin";
  request.scratch = "/art/.stage/.obj";
  request.cuda = &cuda;
  const auto commands = splitCommands(request);
  ASSERT_EQ(commands.size(), 2u);
  const std::string front = io::shellJoin(commands[0]);
  EXPECT_EQ(commands[0][0], "/usr/local/cuda/bin/nvcc");
  EXPECT_EQ(commands[0][1], "-ptx");
  EXPECT_NE(front.find(" -arch=compute_90a "), std::string::npos) << front;
  EXPECT_EQ(front.find("-Xptxas"), std::string::npos) << front;
  EXPECT_NE(front.find("-o /art/.stage/.obj/fmha_wgmma_d128_bf16_causal.sm_90a.ptx "),
            std::string::npos)
      << front;
  EXPECT_EQ(commands[1],
            (std::vector<std::string>{cuda.ptxas, "-arch=sm_90a", "-O3", "-v",
                                      "--generate-line-info", "-o", request.cubin.string(),
                                      "/art/.stage/.obj/fmha_wgmma_d128_bf16_causal.sm_90a.ptx"}));
  // A compute_NN image: nvcc's PTX only (lowered and written as the image by the front end).
  request.ptx = true;
  const auto ptx = splitCommands(request);
  ASSERT_EQ(ptx.size(), 1u);
  EXPECT_NE(io::shellJoin(ptx[0]).find(" -arch=compute_90 "), std::string::npos);
}

// The whole build on the fake toolchain, with --cuda-version 12 from the wheel's ptxas.
class Cuda12Build : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln::testing::writeGroup(tmp_.path(), "alpha");
    options_.gpu_arch = "sm_90";
    options_.arch = "x86_64";
    options_.root = tmp_.path();
    options_.output_dir = tmp_.path() / "artifacts";
    options_.nvcc = "nvcc";
    options_.jobs = 2;
    options_.kiln_version = "0.1.0";
    options_.stage_dir = (tmp_.path() / "stage").string();
    tools_.runner.setMissing({(tmp_.path() / kCuda12Toolkit / "bin/nvcc").string()});
  }
  Result<BuildSummary> build(int major, bool clean = false) {
    options_.cuda_major = major;
    options_.clean = clean;
    return runBuild(options_, tools_.runner, sink_);
  }
  nlohmann::json metadata() const {
    return nlohmann::json::parse(
        *io::readFile(tmp_.path() / "artifacts/x86_64/sm_90/metadata.json"));
  }

  TempDir tmp_;
  FakeTools tools_;
  BuildSink sink_;
  BuildOptions options_;
};

TEST_F(Cuda12Build, RecordsTheToolkitAndLowersThePtx) {
  auto r = build(12);
  ASSERT_TRUE(r) << r.error();
  const auto m = metadata();
  EXPECT_EQ(m["cuda_version"], "12.6.85");
  EXPECT_EQ(m["cuda_frontend_version"], "13.0.88");
  const auto& image = m["variants"]["alpha_h1024_bf16"]["sms"]["90"];
  EXPECT_EQ(image["kernels"]["kiln_fake"]["registers"], 32);  // ptxas' report, not nvcc's
  EXPECT_EQ(image["command"][0], (tmp_.path() / kCuda12Toolkit / "bin/ptxas").string());
  ASSERT_EQ(tools_.ptxas_read_versions.size(), 2u);
  for (const auto& line : tools_.ptxas_read_versions) EXPECT_EQ(line, ".version 8.5");
  // The generated variant table carries the toolkit for the runtime's driver check.
  const std::string shim = variantShimSource(r->metadata.variants.at("alpha_h1024_bf16"),
                                             r->metadata.provenance.cuda_version);
  EXPECT_NE(shim.find("images, 1, 12060};"), std::string::npos) << shim;
}

TEST_F(Cuda12Build, PtxasFailureNamesBothToolsAndTheIsa) {
  tools_.fail_ptxas = 1;
  auto r = build(12);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("ptxas 12.6.85 failed with exit code 255 on nvcc 13.0.88's PTX "
                           "(lowered to PTX ISA 8.5"),
            std::string::npos)
      << r.error();
}

TEST_F(Cuda12Build, PtxasOptionsInNvccFlagsAreRefusedNotDropped) {
  kiln::testing::writeGroup(tmp_.path(), "alpha", "nvcc_flags = [\"-maxrregcount=64\"]\n");
  auto r = build(12);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(r.error().find("nvcc_flags '-maxrregcount=64' is a ptxas option, which the split CUDA "
                           "12.6.85 toolchain (nvcc's PTX, then ptxas) does not forward"),
            std::string::npos)
      << r.error();
}

TEST_F(Cuda12Build, AnSmTheToolkitCannotTargetIsRefusedNamingIt) {
  options_.gpu_arch = "sm_100";
  auto r = build(12);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("--gpu-arch sm_100: CUDA 12.6.85 (ptxas "), std::string::npos)
      << r.error();
  EXPECT_NE(r.error().find("it targets sm_75, sm_80, sm_86, sm_87, sm_89, sm_90)"),
            std::string::npos)
      << r.error();
}

TEST_F(Cuda12Build, MergeAcrossCudaMajorsIsRefusedAndCleanReplaces) {
  ASSERT_TRUE(build(13));
  EXPECT_EQ(metadata()["cuda_version"], "13.0.88");
  EXPECT_FALSE(metadata().contains("cuda_frontend_version"));
  auto merged = build(12);
  ASSERT_FALSE(merged);
  EXPECT_EQ(merged.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(merged.error().find("CUDA version differs (old: 13.0.88, new: 12.6.85); re-run with "
                                "--clean"),
            std::string::npos)
      << merged.error();
  ASSERT_TRUE(build(12, true));
  EXPECT_EQ(metadata()["cuda_version"], "12.6.85");
  auto back = build(13);
  ASSERT_FALSE(back);
  EXPECT_NE(back.error().find("(old: 12.6.85, new: 13.0.88)"), std::string::npos) << back.error();
}

TEST(Cuda12Metadata, FrontEndVersionRoundTripsAndEntersTheFingerprints) {
  Provenance split;
  split.cuda_version = "12.6.85";
  Provenance whole = split;
  split.cuda_frontend_version = "13.0.88";
  auto refused = checkMergeable(split, whole);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("(old: 13.0.88, new: none)"), std::string::npos)
      << refused.error();
  EXPECT_TRUE(checkMergeable(split, split));
  ArtifactMetadata m;
  m.provenance = split;
  m.provenance.gpu_archs = {GpuArch{90, false}};
  m.provenance.tag = "sm_90";
  auto parsed = parseMetadata(toJson(m));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->provenance.cuda_frontend_version, std::optional<std::string>("13.0.88"));
  ArtifactMetadata plain = m;
  plain.provenance.cuda_frontend_version.reset();
  EXPECT_NE(artifactFingerprint(m), artifactFingerprint(plain));
  EXPECT_FALSE(parseMetadata(toJson(plain))->provenance.cuda_frontend_version);
}

// scripts/setup.sh installs exactly the wheel kiln names in its errors.
TEST(Cuda12Setup, SetupScriptPinsTheSameWheel) {
  auto script = io::readFile(fs::path(KILN_SOURCE_DIR) / "scripts/setup.sh");
  ASSERT_TRUE(script) << script.error();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(*script, match, std::regex("CUDA12_NVCC_VERSION=\"([^\"]+)\"")));
  EXPECT_EQ(match[1], kCuda12NvccWheelVersion);
}

}  // namespace
}  // namespace kiln::core
