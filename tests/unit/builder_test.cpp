// The build pipeline with a fake toolchain in a scratch repository: dependency checks, the
// artifact layout and metadata, merge accepted and refused, --clean, and the staged publish
// (a build that fails midway leaves the previous artifact byte-identical and no staging dir).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/builder.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using kiln::testing::FakeTools;
using kiln::testing::TempDir;

class RecordingSink : public BuildSink {
 public:
  void note(const std::string& line) override { notes.push_back(line); }
  void compiled(const CompileProgress& p) override { progress.push_back(p); }
  std::vector<std::string> notes;
  std::vector<CompileProgress> progress;
};

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln::testing::writeGroup(tmp_.path(), "alpha");
    kiln::testing::writeGroup(tmp_.path(), "beta");
    options_.gpu_arch = "sm_90";
    options_.arch = "x86_64";
    options_.root = tmp_.path();
    options_.output_dir = tmp_.path() / "artifacts";
    options_.nvcc = "nvcc";
    options_.jobs = 2;
    options_.kiln_version = "0.1.0";
  }
  Result<BuildSummary> build(const std::string& kernels = "ALL", bool clean = false) {
    options_.kernels = kernels;
    options_.clean = clean;
    return runBuild(options_, tools_.runner, sink_);
  }
  fs::path artifact() const { return tmp_.path() / "artifacts/x86_64/sm_90"; }
  nlohmann::json metadata() const {
    return nlohmann::json::parse(*io::readFile(artifact() / "metadata.json"));
  }
  bool stagingLeft() const {
    for (const auto& e : fs::directory_iterator(artifact().parent_path())) {
      if (e.path().filename().string().rfind(".sm_90.", 0) == 0) return true;
    }
    return false;
  }

  TempDir tmp_;
  FakeTools tools_;
  RecordingSink sink_;
  BuildOptions options_;
};

TEST_F(BuilderTest, BuildsTheDocumentedLayout) {
  auto r = build();
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->artifact_dir, artifact());
  EXPECT_EQ(r->built.size(), 4u);
  EXPECT_EQ(sink_.progress.size(), 4u);
  EXPECT_EQ(sink_.progress.back().done, 4);
  for (const char* rel : {"metadata.json", "lib/libkiln.a", "include/kiln/variant.h", "include/kiln/kiln_all.h",
                          "include/kiln/groups/alpha.h", "include/kiln/variants/alpha_h1024_bf16.h",
                          "cubins/beta_h2048_bf16.sm_90.cubin"}) {
    EXPECT_TRUE(fs::is_regular_file(artifact() / rel)) << rel;
  }
  EXPECT_FALSE(fs::exists(artifact() / ".src"));
  EXPECT_FALSE(fs::exists(artifact() / ".obj"));
  EXPECT_FALSE(stagingLeft());
  const auto m = metadata();
  EXPECT_EQ(m["schema_version"], 1);
  EXPECT_EQ(m["cuda_version"], "13.0.88");
  EXPECT_EQ(m["host_target"], "x86_64-linux-gnu");
  EXPECT_EQ(m["host_compiler"]["version"], "g++ (Fake) 12.2.0");
  EXPECT_EQ(m["compile_targets"], nlohmann::json::array({"sm_90"}));
  EXPECT_EQ(m["groups"]["alpha"]["variants"], nlohmann::json::array({"alpha_h1024_bf16", "alpha_h2048_bf16"}));
  const auto& v = m["variants"]["alpha_h1024_bf16"];
  EXPECT_EQ(v["constants"]["hidden"], 1024);
  EXPECT_EQ(v["constants"]["dtype"], "bf16");
  EXPECT_TRUE(v["inputs"].contains("kernels/alpha/k.cu"));
  EXPECT_TRUE(v["inputs"].contains("kernels/alpha/kiln.toml"));
  const auto& sm = v["sms"]["90"];
  EXPECT_EQ(sm["symbol"], "kiln_alpha_h1024_bf16__arch90_image");
  EXPECT_EQ(sm["kernels"]["kiln_fake"]["registers"], 40);
  EXPECT_EQ(sm["kernels"]["kiln_fake"]["spill_store_bytes"], 4);
  EXPECT_EQ(sm["sha256"], *io::sha256File(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin"));
  EXPECT_EQ(m["library"]["sha256"], *io::sha256File(artifact() / "lib/libkiln.a"));
  // The nvcc command recorded is the one that ran, with the published cubin path.
  const auto command = sm["command"].get<std::vector<std::string>>();
  ASSERT_GE(command.size(), 3u);
  EXPECT_EQ(command[command.size() - 2], (artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin").string());
  bool found = false;
  for (const auto& call : tools_.runner.calls()) {
    if (call.size() == command.size() && call.back() == command.back() &&
        std::equal(call.begin(), call.end() - 3, command.begin())) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(BuilderTest, MergeKeepsOldVariantsAndRebuildsSelected) {
  ASSERT_TRUE(build("alpha"));
  const std::string alpha_cubin = *io::sha256File(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin");
  auto r = build("beta");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->kept.size(), 2u);
  const auto m = metadata();
  EXPECT_EQ(m["variants"].size(), 4u);
  EXPECT_TRUE(m["groups"].contains("alpha"));
  EXPECT_TRUE(m["groups"].contains("beta"));
  EXPECT_EQ(*io::sha256File(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin"), alpha_cubin);
  // The generated aggregate header includes both groups.
  const auto all = *io::readFile(artifact() / "include/kiln/kiln_all.h");
  EXPECT_NE(all.find("groups/alpha.h"), std::string::npos);
  EXPECT_NE(all.find("groups/beta.h"), std::string::npos);
}

TEST_F(BuilderTest, MergeRefusedWhenProvenanceDiffersAndCleanReplaces) {
  ASSERT_TRUE(build("alpha"));
  const auto before = kiln::testing::snapshot(artifact());
  tools_.cxx_version = "g++ (Fake) 13.1.0";
  auto r = build("beta");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(r.error().find("host compiler version differs (old: g++ (Fake) 12.2.0, new: g++ (Fake) 13.1.0); "
                           "re-run with --clean"),
            std::string::npos)
      << r.error();
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
  auto clean = build("beta", /*clean=*/true);
  ASSERT_TRUE(clean) << clean.error();
  const auto m = metadata();
  EXPECT_EQ(m["variants"].size(), 2u);
  EXPECT_FALSE(m["groups"].contains("alpha"));
}

TEST_F(BuilderTest, FailedBuildLeavesThePreviousArtifactIntact) {
  ASSERT_TRUE(build());
  const auto before = kiln::testing::snapshot(artifact());
  tools_.nvcc_compiles = 0;
  tools_.fail_nvcc_after = 1;  // the second compile fails
  auto r = build("ALL", /*clean=*/true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kFailure);
  EXPECT_NE(r.error().find("nvcc failed with exit code 2"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("identifier \"oops\" is undefined"), std::string::npos);
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
  EXPECT_FALSE(stagingLeft());
}

TEST_F(BuilderTest, TamperedOldCubinRefusesTheMerge) {
  ASSERT_TRUE(build("alpha"));
  ASSERT_TRUE(io::writeFile(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin", "tampered"));
  auto r = build("beta");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("re-run with --clean"), std::string::npos) << r.error();
  EXPECT_FALSE(stagingLeft());
}

TEST_F(BuilderTest, MissingNvccIsAnEnvironmentErrorBeforeAnythingIsTouched) {
  ASSERT_TRUE(build());
  const auto before = kiln::testing::snapshot(artifact());
  tools_.runner.setMissing({"nvcc"});
  auto r = build("ALL", /*clean=*/true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("nvcc not found"), std::string::npos) << r.error();
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
}

TEST_F(BuilderTest, MissingCrossCompilerNamesThePackage) {
  options_.arch = "aarch64";
  tools_.runner.setMissing({"aarch64-linux-gnu-g++"});
  auto r = build();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("aarch64-linux-gnu-g++ not found"), std::string::npos) << r.error();
}

TEST_F(BuilderTest, CrossBuildChecksObjectMachines) {
  options_.arch = "aarch64";
  auto r = build();
  ASSERT_TRUE(r) << r.error();
  const auto m = nlohmann::json::parse(*io::readFile(tmp_.path() / "artifacts/aarch64/sm_90/metadata.json"));
  EXPECT_EQ(m["host_target"], "aarch64-linux-gnu");
  EXPECT_EQ(m["arch"], "aarch64");
  EXPECT_TRUE(fs::exists(tmp_.path() / "artifacts/aarch64/sm_90/lib/libkiln.a"));
}

TEST_F(BuilderTest, ObjectOfTheWrongArchFailsBeforePublishing) {
  tools_.object_machine = 62;  // an x86_64 object in an aarch64 build
  options_.arch = "aarch64";
  auto r = build();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("ELF machine 62 but --arch aarch64 needs 183"), std::string::npos) << r.error();
  EXPECT_FALSE(fs::exists(tmp_.path() / "artifacts/aarch64/sm_90"));
}

TEST_F(BuilderTest, MissingCutlassNamesTheSetupScript) {
  kiln::testing::writeGroup(tmp_.path(), "gamma", "uses = [\"cutlass\"]\n");
  auto r = build("gamma");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("scripts/setup.sh"), std::string::npos) << r.error();
}

TEST_F(BuilderTest, SelectionErrorsAndNotes) {
  auto unknown = build("alpha,nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(unknown.error().find("unknown group 'nope'; known groups: alpha, beta"), std::string::npos);
  options_.gpu_arch = "sm_87";
  auto nothing = build();
  ASSERT_FALSE(nothing);
  EXPECT_NE(nothing.error().find("nothing to build"), std::string::npos);
  EXPECT_NE(nothing.error().find("lists sm_87"), std::string::npos) << nothing.error();
  options_.gpu_arch = "sm_87,sm_90";
  auto multi = build();
  ASSERT_FALSE(multi);
  EXPECT_NE(multi.error().find("multi-SM builds (--gpu-arch sm_87,sm_90) are not supported yet"),
            std::string::npos);
  options_.gpu_arch = "sm_95";
  auto unknown_sm = build();
  ASSERT_FALSE(unknown_sm);
  EXPECT_EQ(unknown_sm.errorKind(), ErrorKind::kEnvironment);
}

TEST_F(BuilderTest, AbandonedStagingDirectoriesAreRemoved) {
  const fs::path abandoned = tmp_.path() / "artifacts/x86_64/.sm_90.staging-999999999";
  ASSERT_TRUE(io::writeFile(abandoned / "metadata.json", "{}"));
  ASSERT_TRUE(build());
  EXPECT_FALSE(fs::exists(abandoned));
}

}  // namespace
}  // namespace kiln::core
