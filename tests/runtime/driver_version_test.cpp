// The driver check (issue 34; docs/runtime.md, "Driver version"): an artifact built with a newer
// CUDA major than the driver supports is refused before any module load, with a kDriverTooOld
// status naming both versions and the tarball to use, by launch, preload and doctor alike; a CUDA
// 12.6 artifact loads on a CUDA 13.0 driver; PTX of a newer minor is refused, a cubin of one is not
// (minor version compatibility); a variant of unknown version (0) is not checked.
#include <gtest/gtest.h>

#include <string>

#include "fake_driver.h"
#include "kiln/loader.h"
#include "kiln/runtime.h"

namespace {

using kiln::StatusCode;
using kiln::fake::image;
using kiln::fake::ptxImage;
using kiln::fake::TestVariant;

kiln::LaunchConfig config() {
  kiln::LaunchConfig c;
  c.grid = {1, 1, 1};
  c.block = {32, 1, 1};
  return c;
}

constexpr int kCuda126 = 12060;
constexpr int kCuda130 = 13000;

TEST(DriverVersionTest, Cuda13ArtifactOnACuda126DriverIsRefusedNamingBoth) {
  kiln::fake::Driver driver({kiln::fake::orin()});
  driver.driver_version = kCuda126;
  TestVariant v("rmsnorm_h4096_bf16", {"kernel_main"}, {image(87)}, "rmsnorm", kCuda130);
  kiln::Status s = kiln::launch(v.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverTooOld);
  EXPECT_EQ(s.message(),
            "rmsnorm_h4096_bf16: artifact built with CUDA 13.0; driver supports 12.6; use the "
            "cuda12 tarball or update the driver");
  EXPECT_EQ(s.toString().rfind("driver too old: ", 0), 0u) << s.toString();
  EXPECT_EQ(driver.load_attempts.load(), 0);  // refused before the driver sees the image
  EXPECT_EQ(kiln::preload(v.get(), driver.makeStream(0)).code(), StatusCode::kDriverTooOld);
  EXPECT_EQ(driver.load_attempts.load(), 0);
}

TEST(DriverVersionTest, Cuda126ArtifactLoadsOnACuda13Driver) {
  kiln::fake::Driver driver({kiln::fake::orin()});
  driver.driver_version = kCuda130;
  TestVariant v("rmsnorm_h4096_bf16", {"kernel_main"}, {image(87)}, "rmsnorm", kCuda126);
  kiln::Status s = kiln::launch(v.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.load_attempts.load(), 1);
}

TEST(DriverVersionTest, SameMajorCubinLoadsAndNewerPtxIsRefused) {
  kiln::fake::Driver driver({kiln::fake::orin()});
  driver.driver_version = kCuda126;
  // A cubin of CUDA 12.9 on a 12.6 driver: minor version compatibility.
  TestVariant cubin("rmsnorm_h1024_bf16", {"kernel_main"}, {image(87)}, "rmsnorm", 12090);
  EXPECT_TRUE(kiln::launch(cubin.get(), 0, config(), driver.makeStream(0), nullptr).ok());
  // PTX of CUDA 12.9: the 12.6 driver's JIT cannot read it.
  TestVariant ptx("rmsnorm_h2048_bf16", {"kernel_main"}, {ptxImage(80)}, "rmsnorm", 12090);
  kiln::Status s = kiln::launch(ptx.get(), 0, config(), driver.makeStream(0), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kDriverTooOld);
  EXPECT_NE(s.message().find("artifact built with CUDA 12.9; driver supports 12.6; its "
                             "compute_80 PTX image needs a driver of CUDA 12.9 or newer"),
            std::string::npos)
      << s.message();
  // Same version: loads.
  TestVariant same("rmsnorm_h3072_bf16", {"kernel_main"}, {ptxImage(80)}, "rmsnorm", kCuda126);
  EXPECT_TRUE(kiln::launch(same.get(), 0, config(), driver.makeStream(0), nullptr).ok());
}

TEST(DriverVersionTest, UnknownVersionsAreNotChecked) {
  const kiln_image sm87 = image(87);
  TestVariant unknown("rmsnorm_h4096_bf16", {"kernel_main"}, {sm87}, "rmsnorm", 0);
  EXPECT_TRUE(kiln::checkDriverVersion(unknown.get(), sm87, kCuda126).ok());
  TestVariant thirteen("rmsnorm_h4096_bf16", {"kernel_main"}, {sm87}, "rmsnorm", kCuda130);
  EXPECT_TRUE(kiln::checkDriverVersion(thirteen.get(), sm87, 0).ok());
  EXPECT_TRUE(kiln::checkDriverVersion(thirteen.get(), sm87, 13010).ok());
  kiln::Status eleven = kiln::checkDriverVersion(thirteen.get(), sm87, 11080);
  EXPECT_EQ(eleven.code(), StatusCode::kDriverTooOld);
  EXPECT_NE(eleven.message().find("driver supports 11.8; update the driver (kiln builds for CUDA "
                                  "12 and 13)"),
            std::string::npos)
      << eleven.message();
}

TEST(DriverVersionTest, DoctorReportsTheRefusalWithoutLoading) {
  kiln::fake::Driver driver({kiln::fake::orin()});
  driver.driver_version = kCuda126;
  TestVariant too_new("rmsnorm_h4096_bf16", {"kernel_main"}, {image(87)}, "rmsnorm", kCuda130);
  TestVariant fits("rmsnorm_h1024_bf16", {"kernel_main"}, {image(87)}, "rmsnorm", kCuda126);
  const kiln_variant* variants[] = {too_new.ptr(), fits.ptr()};
  kiln::DoctorReport report;
  kiln::Status status = kiln::doctor(variants, 0, &report);
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(report.driver_version, kCuda126);
  ASSERT_EQ(report.variants.size(), 2u);
  EXPECT_FALSE(report.variants[0].runnable);
  EXPECT_EQ(report.variants[0].reason,
            "driver too old: rmsnorm_h4096_bf16: artifact built with CUDA 13.0; driver supports "
            "12.6; use the cuda12 tarball or update the driver");
  EXPECT_TRUE(report.variants[1].runnable) << report.variants[1].reason;
  EXPECT_EQ(driver.load_attempts.load(), 1);  // the fitting one's probe only
}

}  // namespace
