// The real `kiln` binary on the CuTe DSL fixture (fixtures/dsl/kernels/dslcopy) with the real
// venv: the script runs GPU-free (this test passes on machines without libcuda), the artifact has
// a CUDA variant's shape with kind "cute_dsl", the cubin's entry is kiln's name with the
// parameter layout of its placeholders, and a multi-SM aarch64 build works as for CUDA C++.
// Skipped, with the reason, when the venv lacks the pinned DSL or nvcc is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/cubin_abi.h"
#include "core/cute_dsl_frontend.h"
#include "core/elf.h"
#include "io/fs.h"
#include "io/process.h"

namespace {

namespace fs = std::filesystem;

// e_machine of the ELF file at `path`, through kiln's ELF reader (core/elf.h); -1 when unreadable.
int elfMachineOf(const fs::path& path) {
  auto bytes = kiln::io::readFile(path);
  if (!bytes) return -1;
  auto header = kiln::core::readElfHeader(*bytes, path.string());
  return header ? header->machine : -1;
}

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

std::string python() {
  const char* env = std::getenv("KILN_PYTHON");
  return env != nullptr ? env : (fs::path(KILN_SOURCE_DIR) / ".venv/bin/python").string();
}

CliRun kilnRun(std::vector<std::string> args) {
  args.insert(args.begin(), KILN_BINARY);
  kiln::io::PosixProcessRunner runner;
  ::setenv("KILN_PYTHON", python().c_str(), 1);
  auto r = runner.run(args);
  if (!r) return {-1, "", r.error()};
  return {r->exit_code, r->stdout_text, r->stderr_text};
}

// Why the DSL cannot run here, or empty.
std::string skipReason() {
  kiln::io::PosixProcessRunner runner;
  if (!runner.available("/usr/local/cuda/bin/nvcc") && !runner.available("nvcc"))
    return "nvcc is not installed";
  if (!runner.available(python())) return python() + " not found (run scripts/setup.sh)";
  auto r = runner.run(
      {python(), "-c", "import importlib.metadata as m; print(m.version('nvidia-cutlass-dsl'))"});
  if (!r || r->exit_code != 0 ||
      r->stdout_text != std::string(kiln::core::kCuteDslVersion) + "\n") {
    return "the venv has no nvidia-cutlass-dsl " + std::string(kiln::core::kCuteDslVersion) +
           " (run scripts/setup.sh)";
  }
  return {};
}

class CuteDslCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string why = skipReason(); !why.empty()) GTEST_SKIP() << why;
    work_ = fs::path(KILN_E2E_WORK) /
            ("dsl_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  std::vector<std::string> args(const std::string& gpu_arch, const std::string& arch) const {
    return {"build",
            "--gpu-arch",
            gpu_arch,
            "--arch",
            arch,
            "--kernels",
            "dslcopy",
            "--root",
            std::string(KILN_E2E_FIXTURES) + "/dsl",
            "--runtime-dir",
            KILN_E2E_RUNTIME,
            "--output-dir",
            work_.string(),
            "-j",
            "2"};
  }
  fs::path work_;
};

TEST_F(CuteDslCli, BuildsAnArtifactShapedLikeACudaOne) {
  CliRun run = kilnRun(args("sm_90", "x86_64"));
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  const fs::path artifact = work_ / "x86_64/sm_90";
  const auto m = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(m["groups"]["dslcopy"]["kind"], "cute_dsl");
  const auto& v = m["variants"]["dslcopy_f3_fp32"];
  EXPECT_EQ(v["kind"], "cute_dsl");
  EXPECT_EQ(v["constants"], (nlohmann::json{{"factor", 3}, {"dtype", "fp32"}}));
  const auto& image = v["sms"]["90"];
  EXPECT_EQ(image["target"], "sm_90");
  EXPECT_EQ(image["symbol"], "kiln_dslcopy_f3_fp32__arch90_image");
  EXPECT_GT(image["kernels"]["kiln_dslcopy_scale"]["registers"].get<int>(), 0);
  const fs::path cubin = artifact / image["cubin"].get<std::string>();
  EXPECT_EQ(elfMachineOf(cubin), kiln::core::kElfMachineCuda);
  EXPECT_EQ(*kiln::io::sha256File(cubin), image["sha256"]);
  // The DSL's kernel is renamed to kiln's entry; its two tensor placeholders are each a pointer
  // and the symbolic length (16 bytes, 8-aligned), so a runner packs them like any struct.
  auto abi = kiln::core::readCubinAbi(*kiln::io::readFile(cubin), cubin.string());
  ASSERT_TRUE(abi) << abi.error();
  ASSERT_EQ(abi->size(), 1u);
  const auto& entry = abi->at("kiln_dslcopy_scale");
  EXPECT_EQ(entry.param_bytes, 32);
  ASSERT_EQ(entry.params.size(), 2u);
  EXPECT_EQ(entry.params[1].offset, 16);
  EXPECT_EQ(entry.params[1].size, 16);
  EXPECT_TRUE(fs::is_regular_file(artifact / "include/kiln/variants/dslcopy_f3_fp32.h"));
  EXPECT_TRUE(fs::is_regular_file(artifact / "lib/libkiln.a"));
  // A re-run merges (same provenance), as for CUDA variants.
  CliRun again = kilnRun(args("sm_90", "x86_64"));
  EXPECT_EQ(again.code, 0) << again.out << again.err;
  CliRun verify = kilnRun({"verify", artifact.string()});
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
}

TEST_F(CuteDslCli, MultiSmCrossBuildForAarch64) {
  kiln::io::PosixProcessRunner runner;
  if (!runner.available("aarch64-linux-gnu-g++"))
    GTEST_SKIP() << "aarch64-linux-gnu-g++ is not installed";
  CliRun run = kilnRun(args("sm_90,sm_87", "aarch64"));
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  const fs::path artifact = work_ / "aarch64/sm_87_sm_90";
  const auto m = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(m["arch"], "aarch64");
  EXPECT_EQ(m["variants"]["dslcopy_f2_fp32"]["sms"].size(), 2u);
  // Device code is the same kind of cubin whatever the host; the host library is aarch64.
  EXPECT_EQ(elfMachineOf(artifact / "cubins/dslcopy_f2_fp32.sm_87.cubin"),
            kiln::core::kElfMachineCuda);
  CliRun verify = kilnRun({"verify", artifact.string()});
  EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
}

}  // namespace
