// doctor: the pre-launch report of which variants a device can run and why the others cannot,
// found by selecting and really loading each image in the device's primary context; a PTX image
// is probed through the same JIT load as a launch (image_ptx, and a failed JIT's log).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_driver.h"
#include "kiln/loader.h"
#include "kiln/runtime.h"

namespace {

using kiln::StatusCode;
using kiln::fake::image;
using kiln::fake::ptxImage;
using kiln::fake::TestVariant;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DoctorTest, ReportsDeviceDriverAndEachVariantWithReasons) {
  kiln::fake::Driver driver({kiln::fake::orin()});
  TestVariant runs("rmsnorm_h4096_bf16", {"kernel_main"}, {image(80), image(90)}, "rmsnorm");
  TestVariant no_image("fmha_wgmma_d128_bf16_causal", {"kernel_main"}, {image(90, true)}, "fmha");
  TestVariant corrupt("rmsnorm_h1024_fp16", {"kernel_main"}, {image(87, false, "not a cubin")},
                      "rmsnorm");
  TestVariant no_entry("rmsnorm_h2048_bf16", {"kernel_main", "kernel_gone"}, {image(87)},
                       "rmsnorm");
  const kiln_variant* variants[] = {runs.ptr(), no_image.ptr(), corrupt.ptr(), no_entry.ptr()};

  kiln::DoctorReport report;
  kiln::Status status = kiln::doctor(variants, 0, &report);
  ASSERT_TRUE(status.ok()) << status.toString();
  EXPECT_EQ(report.driver_version, 13000);
  EXPECT_EQ(report.device.name, "Orin");
  EXPECT_EQ(report.device.sm, 87);
  EXPECT_EQ(report.device.multiprocessors, 16);
  ASSERT_EQ(report.variants.size(), 4u);

  EXPECT_EQ(report.variants[0].name, "rmsnorm_h4096_bf16");
  EXPECT_EQ(report.variants[0].group, "rmsnorm");
  EXPECT_TRUE(report.variants[0].runnable) << report.variants[0].reason;
  EXPECT_EQ(report.variants[0].image_sm, 80);

  EXPECT_FALSE(report.variants[1].runnable);
  EXPECT_TRUE(contains(report.variants[1].reason, "artifact has sm_90a only; device is sm_87"))
      << report.variants[1].reason;

  EXPECT_FALSE(report.variants[2].runnable);
  EXPECT_TRUE(contains(report.variants[2].reason, "sm_87 image does not load"))
      << report.variants[2].reason;
  EXPECT_TRUE(contains(report.variants[2].reason, "CUDA_ERROR_INVALID_IMAGE"))
      << report.variants[2].reason;

  EXPECT_FALSE(report.variants[3].runnable);
  EXPECT_TRUE(contains(report.variants[3].reason, "entry kernel_gone"))
      << report.variants[3].reason;
  EXPECT_TRUE(contains(report.variants[3].reason, "CUDA_ERROR_NOT_FOUND"))
      << report.variants[3].reason;

  // The probes were loaded, then unloaded; the primary context was retained and released.
  EXPECT_EQ(driver.loads.load(), 2);
  EXPECT_EQ(driver.liveModules(), 0);
  EXPECT_EQ(driver.retains.load(), 1);
  EXPECT_EQ(driver.releases.load(), 1);
  EXPECT_EQ(driver.pushes.load(), driver.pops.load());
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(DoctorTest, ChecksTheRequestedDevice) {
  kiln::fake::Driver driver({kiln::fake::h200(), kiln::fake::a100()});
  TestVariant hopper("rmsnorm_h4096_bf16", {"kernel_main"}, {image(90)});
  const kiln_variant* variants[] = {hopper.ptr()};
  kiln::DoctorReport report;
  ASSERT_TRUE(kiln::doctor(variants, 1, &report).ok());
  EXPECT_EQ(report.device.ordinal, 1);
  EXPECT_EQ(report.device.sm, 80);
  ASSERT_EQ(report.variants.size(), 1u);
  EXPECT_FALSE(report.variants[0].runnable);
  ASSERT_TRUE(kiln::doctor(variants, 0, &report).ok());
  EXPECT_EQ(report.device.sm, 90);
  ASSERT_EQ(report.variants.size(), 1u);  // the report is replaced, not appended to
  EXPECT_TRUE(report.variants[0].runnable);
  EXPECT_EQ(report.variants[0].image_sm, 90);
}

TEST(DoctorTest, PtxOnlyVariantIsRunnableThroughTheJit) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  TestVariant ptx("rmsnorm_h4096_bf16", {"kernel_main"}, {ptxImage(80, "FAKEPTX kernel_main")},
                  "rmsnorm");
  TestVariant cubin("rmsnorm_h1024_bf16", {"kernel_main"}, {image(90)}, "rmsnorm");
  TestVariant bad_jit("rmsnorm_h2048_bf16", {"kernel_main"}, {ptxImage(90, "FAKEPTX kernel_main")},
                      "rmsnorm");
  const kiln_variant* runnable[] = {ptx.ptr(), cubin.ptr()};
  kiln::DoctorReport report;
  ASSERT_TRUE(kiln::doctor(runnable, 0, &report).ok());
  ASSERT_EQ(report.variants.size(), 2u);
  EXPECT_TRUE(report.variants[0].runnable) << report.variants[0].reason;
  EXPECT_EQ(report.variants[0].image_sm, 80);
  EXPECT_TRUE(report.variants[0].image_ptx);
  EXPECT_TRUE(report.variants[1].runnable) << report.variants[1].reason;
  EXPECT_EQ(report.variants[1].image_sm, 90);
  EXPECT_FALSE(report.variants[1].image_ptx);
  EXPECT_EQ(driver.ex_loads.load(), 1);  // the PTX probe went through the JIT load
  EXPECT_EQ(driver.loads.load(), 2);
  EXPECT_EQ(driver.liveModules(), 0);

  // A PTX image the driver cannot JIT: not runnable, with the JIT's log.
  driver.fail_jit = 1;
  driver.jit_log = "ptxas fatal   : Unresolved extern function 'oops'";
  const kiln_variant* failing[] = {cubin.ptr(), bad_jit.ptr()};
  ASSERT_TRUE(kiln::doctor(failing, 0, &report).ok());
  ASSERT_EQ(report.variants.size(), 2u);
  EXPECT_TRUE(report.variants[0].runnable) << report.variants[0].reason;
  EXPECT_FALSE(report.variants[1].runnable);
  EXPECT_FALSE(report.variants[1].image_ptx);  // set only for a runnable variant
  const std::string& reason = report.variants[1].reason;
  EXPECT_TRUE(
      contains(reason, "its compute_90 PTX image does not load on this device: PTX JIT failed: "))
      << reason;
  EXPECT_TRUE(contains(reason, "CUDA_ERROR_INVALID_PTX")) << reason;
  EXPECT_TRUE(contains(reason, "; JIT log: ptxas fatal   : Unresolved extern function 'oops'"))
      << reason;
  EXPECT_EQ(driver.liveModules(), 0);
  EXPECT_EQ(driver.pushes.load(), driver.pops.load());
}

TEST(DoctorTest, OrdinalOutOfRangeNamesTheCount) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  kiln::DoctorReport report;
  kiln::Status status = kiln::doctor({}, 2, &report);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "device ordinal 2 is out of range; 1 CUDA device present");
}

// deviceCount: the ordinals doctor takes (bin/kiln-doctor asks it once, then each device).
TEST(DoctorTest, DeviceCountIsTheDriversCount) {
  kiln::fake::Driver driver({kiln::fake::h200(), kiln::fake::orin()});
  int count = -1;
  ASSERT_TRUE(kiln::deviceCount(&count).ok());
  EXPECT_EQ(count, 2);
  kiln::Status null = kiln::deviceCount(nullptr);
  EXPECT_EQ(null.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(null.toString(), "count is null")) << null.toString();
}

TEST(DoctorTest, PoisonedVariantsAreReportedAndFailedProbeUnloadsPoison) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  TestVariant launched("rmsnorm_h4096_bf16", {"kernel_main"}, {image(90)});
  TestVariant probed("rmsnorm_h1024_bf16", {"kernel_main"}, {image(90)});
  kiln::LaunchConfig config;
  ASSERT_TRUE(kiln::launch(launched.get(), 0, config, driver.makeStream(0), nullptr).ok());
  driver.fail_unloads = 1;
  EXPECT_EQ(kiln::unloadAll().code(), StatusCode::kDriverError);

  const kiln_variant* first[] = {launched.ptr()};
  kiln::DoctorReport report;
  ASSERT_TRUE(kiln::doctor(first, 0, &report).ok());
  ASSERT_EQ(report.variants.size(), 1u);
  EXPECT_FALSE(report.variants[0].runnable);
  EXPECT_TRUE(contains(report.variants[0].reason, "poisoned")) << report.variants[0].reason;

  driver.fail_unloads = 1;
  const kiln_variant* second[] = {probed.ptr()};
  ASSERT_TRUE(kiln::doctor(second, 0, &report).ok());
  EXPECT_FALSE(report.variants[0].runnable);
  EXPECT_TRUE(contains(report.variants[0].reason, "poisoned")) << report.variants[0].reason;
  EXPECT_TRUE(kiln::isPoisoned("rmsnorm_h1024_bf16"));
  EXPECT_EQ(kiln::launch(probed.get(), 0, config, driver.makeStream(0), nullptr).code(),
            StatusCode::kPoisoned);
}

}  // namespace
