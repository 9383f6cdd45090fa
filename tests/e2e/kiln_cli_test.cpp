// The real `kiln` binary end to end: a build of the two-variant fixture group for sm_90 with the
// real nvcc and g++, its metadata and cubins, `inspect`, a merge re-run, a refused merge, a
// --clean rebuild, and the exit codes of usage errors (docs/cli.md). The build lifecycle is one
// sequential test so CI (2 cores) compiles the runtime as few times as possible.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/fs.h"
#include "io/process.h"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun kiln(std::vector<std::string> args) {
  args.insert(args.begin(), KILN_BINARY);
  kiln::io::PosixProcessRunner runner;
  auto r = runner.run(args);
  if (!r) return {-1, "", r.error()};
  return {r->exit_code, r->stdout_text, r->stderr_text};
}

std::vector<std::string> buildArgs(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"build", "--gpu-arch", "sm_90", "--root", KILN_E2E_FIXTURES,
                                   "--runtime-dir", KILN_E2E_RUNTIME, "--output-dir", out.string(), "-j", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

bool haveNvcc() {
  kiln::io::PosixProcessRunner runner;
  return runner.available("/usr/local/cuda/bin/nvcc") || runner.available("nvcc");
}

class KilnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = fs::path(KILN_E2E_WORK) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  fs::path work_;
};

TEST_F(KilnCli, BuildInspectMergeClean) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path artifact = work_ / "x86_64/sm_90";

  CliRun first = kiln(buildArgs(work_, {"--arch", "x86_64"}));
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("[2/2] "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("tiny_f2_fp32"), std::string::npos);
  EXPECT_NE(first.out.find(artifact.string()), std::string::npos);

  const auto metadata = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(metadata["schema_version"], 1);
  EXPECT_EQ(metadata["tag"], "sm_90");
  EXPECT_EQ(metadata["arch"], "x86_64");
  EXPECT_EQ(metadata["gpu_archs"], nlohmann::json::array({"sm_90"}));
  EXPECT_EQ(metadata["variants"].size(), 2u);
  const auto& image = metadata["variants"]["tiny_f3_fp32"]["sms"]["90"];
  EXPECT_EQ(image["target"], "sm_90");
  EXPECT_GT(image["kernels"]["kiln_tiny_scale"]["registers"].get<int>(), 0);
  EXPECT_NE(std::find(image["command"].begin(), image["command"].end(), "-DKILN_CONST_FACTOR=3"),
            image["command"].end());
  const fs::path cubin = artifact / image["cubin"].get<std::string>();
  EXPECT_EQ(*kiln::io::elfMachine(cubin), kiln::io::kElfMachineCuda);
  EXPECT_EQ(*kiln::io::sha256File(cubin), image["sha256"]);
  EXPECT_EQ(*kiln::io::sha256File(artifact / "lib/libkiln.a"), metadata["library"]["sha256"]);
  EXPECT_TRUE(fs::is_regular_file(artifact / "include/kiln/variants/tiny_f2_fp32.h"));
  EXPECT_TRUE(fs::is_regular_file(artifact / "include/kiln/runtime.h"));

  CliRun json = kiln({"inspect", artifact.string(), "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out), metadata);
  CliRun table = kiln({"inspect", artifact.string()});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("tiny_f3_fp32"), std::string::npos);
  EXPECT_NE(table.out.find(metadata["fingerprint"].get<std::string>()), std::string::npos);

  // Same provenance: merges (both variants rebuilt, nothing lost), and the fingerprint is stable.
  CliRun merge = kiln(buildArgs(work_, {"--arch", "x86_64"}));
  ASSERT_EQ(merge.code, 0) << merge.out << merge.err;
  const auto merged = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(merged["variants"].size(), 2u);
  EXPECT_EQ(merged["fingerprint"], metadata["fingerprint"]);

  // Another host compiler command: refused, exit 2, artifact untouched.
  kiln::io::PosixProcessRunner runner;
  if (runner.available("x86_64-linux-gnu-g++")) {
    const auto before = *kiln::io::sha256File(artifact / "metadata.json");
    ::setenv("KILN_CXX", "x86_64-linux-gnu-g++", 1);
    CliRun refused = kiln(buildArgs(work_));
    ::unsetenv("KILN_CXX");
    EXPECT_EQ(refused.code, 2) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("re-run with --clean"), std::string::npos) << refused.err;
    EXPECT_EQ(*kiln::io::sha256File(artifact / "metadata.json"), before);
  }

  CliRun clean = kiln(buildArgs(work_, {"--clean", "--kernels", "tiny"}));
  ASSERT_EQ(clean.code, 0) << clean.out << clean.err;
  for (const auto& entry : fs::directory_iterator(work_ / "x86_64")) {
    EXPECT_EQ(entry.path().filename(), "sm_90") << "left behind: " << entry.path();
  }
}

TEST_F(KilnCli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(kiln({"build"}).code, 2);  // --gpu-arch is required
  EXPECT_EQ(kiln({}).code, 2);         // a subcommand is required
  EXPECT_EQ(kiln({"frobnicate"}).code, 2);
  CliRun unknown = kiln(buildArgs(work_, {"--kernels", "nope"}));
  if (haveNvcc()) {
    EXPECT_EQ(unknown.code, 2) << unknown.err;
    EXPECT_NE(unknown.err.find("unknown group 'nope'; known groups: tiny"), std::string::npos) << unknown.err;
    CliRun multi = kiln({"build", "--gpu-arch", "sm_87,sm_90", "--root", KILN_E2E_FIXTURES});
    EXPECT_EQ(multi.code, 2);
    EXPECT_NE(multi.err.find("not supported yet"), std::string::npos) << multi.err;
  }
  CliRun missing = kiln({"inspect", (work_ / "nothing").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("not a kiln artifact"), std::string::npos) << missing.err;
  EXPECT_EQ(kiln({"--help"}).code, 0);
}

TEST_F(KilnCli, ListShowsTheFixtureGroup) {
  CliRun list = kiln({"list", "--root", KILN_E2E_FIXTURES});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("tiny_f2_fp32"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("factor:int"), std::string::npos) << list.out;
}

}  // namespace
