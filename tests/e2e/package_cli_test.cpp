// The real `kiln` binary packaging the fixture group (docs/packaging.md): `kiln package` of an
// sm_90 artifact, `kiln verify` of the tarball and the directory, `kiln extract`, a flipped byte
// rejected by its checksum; then `kiln package --matrix` over a two-entry fixture matrix (one
// aarch64 entry when the cross compiler is installed) with the coverage gate passing, and the
// gate failing (exit 1, naming entry, variant and SM, no tarball written) when the registry
// promises a variant the artifact lacks. The fixture group only, so CI's two cores stay quick.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "core/elf.h"
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

bool haveNvcc() {
  kiln::io::PosixProcessRunner runner;
  return runner.available("/usr/local/cuda/bin/nvcc") || runner.available("nvcc");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class PackageCli : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ =
        fs::path(KILN_E2E_WORK) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  fs::path work_;
};

TEST_F(PackageCli, PackageVerifyExtractAndTamper) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path artifact = work_ / "artifacts/x86_64/sm_90";
  CliRun build = kiln({"build", "--gpu-arch", "sm_90", "--arch", "x86_64", "--root",
                       KILN_E2E_FIXTURES, "--runtime-dir", KILN_E2E_RUNTIME, "--output-dir",
                       (work_ / "artifacts").string(), "-j", "2"});
  ASSERT_EQ(build.code, 0) << build.out << build.err;

  CliRun package = kiln({"package", artifact.string(), "--dist", (work_ / "dist").string()});
  ASSERT_EQ(package.code, 0) << package.out << package.err;
  const fs::path tarball = work_ / "dist" / "kiln_x86_64_sm_90_cuda13.tar.gz";
  ASSERT_TRUE(fs::is_regular_file(tarball)) << package.out;
  const std::string sha = *kiln::io::sha256File(tarball);
  EXPECT_TRUE(contains(package.out, "tarball: " + tarball.string())) << package.out;
  EXPECT_TRUE(contains(package.out, "sha256: " + sha)) << package.out;
  EXPECT_TRUE(contains(package.out, fmt::format("({} bytes)", fs::file_size(tarball))))
      << package.out;
  EXPECT_EQ(*kiln::io::readFile(work_ / "dist/kiln_x86_64_sm_90_cuda13.tar.gz.sha256"),
            sha + "  kiln_x86_64_sm_90_cuda13.tar.gz\n");

  CliRun verify = kiln({"verify", tarball.string()});
  ASSERT_EQ(verify.code, 0) << verify.err;
  EXPECT_TRUE(contains(verify.out, "ok: " + tarball.string() + ": x86_64 sm_90 (CUDA 13."))
      << verify.out;
  EXPECT_TRUE(contains(verify.out, "2 variants, 2 cubins")) << verify.out;
  CliRun verify_dir = kiln({"verify", artifact.string()});
  EXPECT_EQ(verify_dir.code, 0) << verify_dir.err;

  CliRun extract = kiln({"extract", tarball.string(), "--into", (work_ / "elsewhere").string()});
  ASSERT_EQ(extract.code, 0) << extract.err;
  EXPECT_EQ(*kiln::io::sha256File(work_ / "elsewhere/x86_64/sm_90/lib/libkiln.a"),
            *kiln::io::sha256File(artifact / "lib/libkiln.a"));

  // One flipped byte: rejected by the checksum before the tarball is even decompressed.
  std::string bytes = *kiln::io::readFile(tarball);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x01);
  ASSERT_TRUE(kiln::io::writeFile(tarball, bytes));
  CliRun tampered = kiln({"verify", tarball.string()});
  EXPECT_EQ(tampered.code, 1) << tampered.out << tampered.err;
  EXPECT_TRUE(contains(tampered.err, "kiln: error: " + tarball.string() + ": sha256 "))
      << tampered.err;
  EXPECT_TRUE(contains(tampered.err, "but kiln_x86_64_sm_90_cuda13.tar.gz.sha256 records " + sha))
      << tampered.err;
  CliRun refused = kiln({"extract", tarball.string(), "--into", (work_ / "again").string()});
  EXPECT_EQ(refused.code, 1) << refused.err;
  EXPECT_FALSE(fs::exists(work_ / "again/x86_64/sm_90"));

  // Usage errors: exit 2.
  EXPECT_EQ(kiln({"package"}).code, 2);
  EXPECT_EQ(kiln({"package", artifact.string(), "--matrix"}).code, 2);
  CliRun nothing = kiln({"verify", (work_ / "nothing").string()});
  EXPECT_EQ(nothing.code, 2);
  EXPECT_TRUE(contains(nothing.err, "is neither a .tar.gz file nor an artifact directory"))
      << nothing.err;
}

TEST_F(PackageCli, MatrixBuildsGatesPackagesAndVerifies) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  kiln::io::PosixProcessRunner runner;
  const bool cross = runner.available("aarch64-linux-gnu-g++");
  std::string text =
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_90\"]\nkernels = [\"tiny\"]\ndescription = "
      "\"host\"\n";
  if (cross) {
    text += "\n[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_89\"]\nkernels = \"ALL\"\n";
  } else {
    std::printf(
        "note: aarch64-linux-gnu-g++ not installed; the aarch64 matrix entry is left out\n");
  }
  const fs::path matrix = work_ / "matrix.toml";
  ASSERT_TRUE(kiln::io::writeFile(matrix, text));
  const std::vector<std::string> common = {"--root",        KILN_E2E_FIXTURES,
                                           "--runtime-dir", KILN_E2E_RUNTIME,
                                           "--output-dir",  (work_ / "artifacts").string()};
  auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"package", "--matrix", matrix.string()};
    a.insert(a.end(), common.begin(), common.end());
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };

  CliRun run = kiln(args({"--dist", (work_ / "dist").string(), "-j", "2"}));
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  EXPECT_TRUE(contains(
      run.out, "== [1/" + std::string(cross ? "2" : "1") + "] x86_64/sm_90 (kernels tiny): host"))
      << run.out;
  EXPECT_TRUE(contains(run.out, "per SM:")) << run.out;
  EXPECT_TRUE(contains(run.out, "tiny_f3_fp32")) << run.out;
  EXPECT_TRUE(fs::is_regular_file(work_ / "dist/kiln_x86_64_sm_90_cuda13.tar.gz"));
  EXPECT_EQ(kiln({"verify", (work_ / "dist/kiln_x86_64_sm_90_cuda13.tar.gz").string()}).code, 0);
  if (cross) {
    const fs::path arm = work_ / "dist/kiln_aarch64_sm_89_cuda13.tar.gz";
    ASSERT_TRUE(fs::is_regular_file(arm)) << run.out;
    CliRun verify = kiln({"verify", arm.string()});
    EXPECT_EQ(verify.code, 0) << verify.err;
    EXPECT_TRUE(contains(verify.out, "aarch64 sm_89")) << verify.out;
    // The aarch64 artifact's doctor is an aarch64 executable (issue 30): verify checked its ELF
    // machine above; here through kiln's ELF reader on the built file itself.
    auto doctor = kiln::io::readFile(work_ / "artifacts/aarch64/sm_89/bin/kiln-doctor");
    ASSERT_TRUE(doctor) << doctor.error();
    auto header = kiln::core::readElfHeader(*doctor, "bin/kiln-doctor");
    ASSERT_TRUE(header) << header.error();
    EXPECT_EQ(header->machine, kiln::core::kElfMachineAarch64);
  }

  // --no-build over the artifacts just built: the gate passes again.
  CliRun again =
      kiln(args({"--no-build", "--entries", "x86_64/sm_90", "--dist", (work_ / "dist2").string()}));
  EXPECT_EQ(again.code, 0) << again.out << again.err;

  // The registry now promises a third variant (factor 4) that the built artifact lacks, as when
  // a variant is added after the artifacts were built: the gate fails naming entry, variant and
  // SM, and writes no tarball.
  const fs::path root = work_ / "root";
  fs::create_directories(root / "kernels/tiny");
  fs::copy_file(fs::path(KILN_E2E_FIXTURES) / "kernels/tiny/tiny.cu",
                root / "kernels/tiny/tiny.cu");
  std::string toml = *kiln::io::readFile(fs::path(KILN_E2E_FIXTURES) / "kernels/tiny/kiln.toml");
  const size_t at = toml.find("factor = [2, 3]");
  ASSERT_NE(at, std::string::npos) << toml;
  toml.replace(at, 15, "factor = [2, 3, 4]");
  ASSERT_TRUE(kiln::io::writeFile(root / "kernels/tiny/kiln.toml", toml));
  CliRun gate = kiln({"package", "--matrix", matrix.string(), "--no-build", "--entries",
                      "x86_64/sm_90", "--root", root.string(), "--output-dir",
                      (work_ / "artifacts").string(), "--dist", (work_ / "dist3").string()});
  EXPECT_EQ(gate.code, 1) << gate.out << gate.err;
  EXPECT_TRUE(contains(gate.err, "entry x86_64/sm_90: coverage: coverage gate failed (1 problem):"))
      << gate.err;
  EXPECT_TRUE(contains(gate.err,
                       "variant tiny_f4_fp32 (group tiny) is missing for sm_90, which "
                       "kernels/tiny/kiln.toml promises (supported_sms sm_80, sm_89, sm_90)"))
      << gate.err;
  EXPECT_FALSE(fs::exists(work_ / "dist3/kiln_x86_64_sm_90_cuda13.tar.gz"));

  // Matrix errors stop before anything is built: exit 2 with file:line.
  ASSERT_TRUE(kiln::io::writeFile(
      work_ / "bad.toml",
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_90\"]\nkernels = [\"nope\"]\n"));
  CliRun bad =
      kiln({"package", "--matrix", (work_ / "bad.toml").string(), "--root", KILN_E2E_FIXTURES});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_TRUE(
      contains(bad.err, "bad.toml:1: entry x86_64/sm_90: unknown group 'nope'; known groups: tiny"))
      << bad.err;
  CliRun filter = kiln(args({"--entries", "x86_64/sm_80"}));
  EXPECT_EQ(filter.code, 2) << filter.err;
}

}  // namespace
