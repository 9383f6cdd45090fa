// `kiln doctor`'s runDoctor (cli/run_doctor.h), the one command that needs the runtime and so
// lives in the CLI (kiln_cli), not kiln_core: it rebuilds the variant tables from the artifact's
// files (a PTX image NUL-terminated, marked ptx) and asks the runtime, here on the fake driver of
// tests/runtime; a modified image is refused before the runtime sees it.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cli/run_doctor.h"
#include "io/fs.h"
#include "runtime/fake_driver.h"
#include "unit/artifact_metadata_fixture.h"
#include "unit/fake_toolchain.h"

namespace kiln::cli {
namespace {

TEST(RunDoctor, RunsAPtxImageFromTheArtifactFiles) {
  kiln::testing::TempDir tmp;
  const std::string cubin = "FAKECUBIN kernel_main";
  const std::string ptx = "FAKEPTX kernel_main";
  const core::ArtifactMetadata m = kiln::testing::twoImageMetadata(cubin, ptx);
  ASSERT_TRUE(io::writeFile(tmp.path() / core::kMetadataFile, core::toJson(m)));
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h1024_bf16.sm_90.cubin", cubin));
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h4096_bf16.compute_80.ptx", ptx));

  kiln::fake::Driver driver({kiln::fake::h200()});
  auto report = runDoctor(tmp.path(), 0);
  ASSERT_TRUE(report) << report.error();
  ASSERT_EQ(report->variants.size(), 2u);
  EXPECT_EQ(report->variants[0].name, "rmsnorm_h1024_bf16");
  EXPECT_TRUE(report->variants[0].runnable) << report->variants[0].reason;
  EXPECT_EQ(report->variants[0].image_sm, 90);
  EXPECT_FALSE(report->variants[0].image_ptx);
  EXPECT_EQ(report->variants[1].name, "rmsnorm_h4096_bf16");
  EXPECT_TRUE(report->variants[1].runnable) << report->variants[1].reason;
  EXPECT_EQ(report->variants[1].image_sm, 80);
  EXPECT_TRUE(report->variants[1].image_ptx);
  EXPECT_EQ(driver.ex_loads.load(), 1);  // the PTX went through the JIT load, NUL-terminated
  EXPECT_EQ(driver.loads.load(), 2);

  // A JIT failure is the variant's reason, not the doctor's.
  driver.fail_jit = 1;
  driver.jit_log = "ptxas fatal   : Unsupported .version 9.9";
  report = runDoctor(tmp.path(), 0);
  ASSERT_TRUE(report) << report.error();
  EXPECT_TRUE(report->variants[0].runnable);
  EXPECT_FALSE(report->variants[1].runnable);
  EXPECT_NE(report->variants[1].reason.find(
                "its compute_80 PTX image does not load on this device: PTX JIT "
                "failed: "),
            std::string::npos)
      << report->variants[1].reason;
  EXPECT_NE(report->variants[1].reason.find("; JIT log: ptxas fatal   : Unsupported .version 9.9"),
            std::string::npos)
      << report->variants[1].reason;
}

TEST(RunDoctor, RefusesAModifiedImage) {
  kiln::testing::TempDir tmp;
  const core::ArtifactMetadata m =
      kiln::testing::twoImageMetadata("FAKECUBIN kernel_main", "FAKEPTX kernel_main");
  ASSERT_TRUE(io::writeFile(tmp.path() / core::kMetadataFile, core::toJson(m)));
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h1024_bf16.sm_90.cubin",
                            "FAKECUBIN kernel_maiX"));  // same size, other bytes
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h4096_bf16.compute_80.ptx",
                            "FAKEPTX kernel_main"));
  kiln::fake::Driver driver({kiln::fake::h200()});
  auto report = runDoctor(tmp.path(), 0);
  ASSERT_FALSE(report);
  EXPECT_NE(
      report.error().find("rmsnorm_h1024_bf16.sm_90.cubin: sha256 differs from metadata.json"),
      std::string::npos)
      << report.error();
  EXPECT_EQ(driver.loads.load(), 0);
}

TEST(RunDoctor, RefusesImagesThatAreNotTheArtifactsRegularFiles) {
  // metadata.json naming /dev/zero, an image that is a link to /dev/zero or a FIFO: refused
  // before anything is read into memory or reaches the runtime (issue 32).
  kiln::testing::TempDir tmp;
  const std::string cubin = "FAKECUBIN kernel_main";
  const std::string ptx = "FAKEPTX kernel_main";
  core::ArtifactMetadata m = kiln::testing::twoImageMetadata(cubin, ptx);
  const std::filesystem::path image = tmp.path() / "cubins/rmsnorm_h1024_bf16.sm_90.cubin";
  ASSERT_TRUE(io::writeFile(image, cubin));
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h4096_bf16.compute_80.ptx", ptx));
  kiln::fake::Driver driver({kiln::fake::h200()});

  core::ArtifactMetadata outside = m;
  outside.variants["rmsnorm_h1024_bf16"].images[90].cubin = "/dev/zero";
  ASSERT_TRUE(io::writeFile(tmp.path() / core::kMetadataFile, core::toJson(outside)));
  auto report = runDoctor(tmp.path(), 0);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("records image '/dev/zero', expected "
                                "'cubins/rmsnorm_h1024_bf16.sm_90.cubin'; not loading it"),
            std::string::npos)
      << report.error();

  ASSERT_TRUE(io::writeFile(tmp.path() / core::kMetadataFile, core::toJson(m)));
  std::filesystem::remove(image);
  std::filesystem::create_symlink("/dev/zero", image);
  report = runDoctor(tmp.path(), 0);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("is a symlink; expected a regular file"), std::string::npos)
      << report.error();

  std::filesystem::remove(image);
  ASSERT_EQ(::mkfifo(image.c_str(), 0644), 0);
  report = runDoctor(tmp.path(), 0);  // must not hang
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("is a fifo; expected a regular file"), std::string::npos)
      << report.error();

  std::filesystem::remove(image);
  ASSERT_TRUE(io::writeFile(image, cubin + "and more"));
  report = runDoctor(tmp.path(), 0);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("more than the limit of " + std::to_string(cubin.size())),
            std::string::npos)
      << report.error();
  EXPECT_EQ(driver.loads.load(), 0);
}

TEST(RunDoctor, NotAnArtifactIsAUsageError) {
  kiln::testing::TempDir tmp;
  auto report = runDoctor(tmp.path() / "missing", 0);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.errorKind(), core::ErrorKind::kUsage);
  EXPECT_NE(report.error().find("not a kiln artifact"), std::string::npos) << report.error();
}

}  // namespace
}  // namespace kiln::cli
