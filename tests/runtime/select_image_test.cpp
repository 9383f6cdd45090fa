// selectImage: the driver's binary-compatibility rule for cubins, PTX (compute_NN) only when no
// cubin runs (the newest PTX at or below the device's SM, across majors), and the message of a
// miss, which names PTX images "compute_NN PTX".
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_driver.h"
#include "kiln/runtime.h"

namespace {

using kiln::StatusCode;
using kiln::fake::image;
using kiln::fake::ptxImage;
using kiln::fake::TestVariant;

// The SM of the image selected for `device_sm` (and whether it is arch-specific or PTX), or the
// miss.
struct Pick {
  kiln::Status status;
  int sm = 0;
  bool arch_specific = false;
  bool ptx = false;
};
Pick pick(const TestVariant& v, int device_sm) {
  Pick p;
  const kiln_image* chosen = nullptr;
  p.status = kiln::selectImage(v.get(), device_sm, &chosen);
  if (p.status.ok()) {
    p.sm = chosen->sm;
    p.arch_specific = chosen->arch_specific != 0;
    p.ptx = chosen->ptx != 0;
  }
  return p;
}

TEST(SelectImageTest, ExactSmWins) {
  TestVariant v("rmsnorm_h4096_bf16", {"k"}, {image(80), image(86), image(90)});
  EXPECT_EQ(pick(v, 80).sm, 80);
  EXPECT_EQ(pick(v, 86).sm, 86);
  EXPECT_EQ(pick(v, 90).sm, 90);
}

TEST(SelectImageTest, SameMajorFallsBackToNewestLowerMinor) {
  TestVariant v("rmsnorm_h4096_bf16", {"k"}, {image(86), image(80)});
  EXPECT_EQ(pick(v, 87).sm, 86);  // Jetson Orin runs the sm_86 cubin, the newest below it
  EXPECT_EQ(pick(v, 89).sm, 86);
  TestVariant only80("rmsnorm_h4096_bf16", {"k"}, {image(80)});
  EXPECT_EQ(pick(only80, 87).sm, 80);
  EXPECT_EQ(pick(only80, 89).sm, 80);
}

TEST(SelectImageTest, ThreeDigitSmsShareTheirMajor) {
  TestVariant v("v", {"k"}, {image(100), image(120)});
  EXPECT_EQ(pick(v, 103).sm, 100);
  EXPECT_EQ(pick(v, 121).sm, 120);
  EXPECT_EQ(pick(v, 110).status.code(), StatusCode::kNoKernelImage);
}

TEST(SelectImageTest, NeverAcrossMajorsAndTheMessageListsWhatThereIs) {
  TestVariant v("rmsnorm_h4096_bf16", {"k"}, {image(80), image(86)});
  Pick p = pick(v, 90);
  EXPECT_EQ(p.status.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(p.status.message(),
            "rmsnorm_h4096_bf16: artifact has sm_80, sm_86 only; device is sm_90");
  // Nor backwards: an image for a newer minor does not run on an older one.
  TestVariant newer("rmsnorm_h4096_bf16", {"k"}, {image(86)});
  EXPECT_EQ(pick(newer, 80).status.message(),
            "rmsnorm_h4096_bf16: artifact has sm_86 only; device is sm_80");
}

TEST(SelectImageTest, ArchSpecificRunsOnItsExactSmOnly) {
  TestVariant v("fmha_wgmma_d128_bf16_causal", {"k"}, {image(90, true)});
  Pick exact = pick(v, 90);
  ASSERT_TRUE(exact.status.ok());
  EXPECT_TRUE(exact.arch_specific);
  TestVariant blackwell("fmha_tcgen05_d128_bf16", {"k"}, {image(100, true)});
  Pick miss = pick(blackwell, 103);
  EXPECT_EQ(miss.status.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(miss.status.message(),
            "fmha_tcgen05_d128_bf16: artifact has sm_100a only; device is sm_103");
  // The plain image of the same major still serves as a fallback when both exist.
  TestVariant mixed("v", {"k"}, {image(100, true), image(100)});
  Pick fallback = pick(mixed, 103);
  ASSERT_TRUE(fallback.status.ok());
  EXPECT_EQ(fallback.sm, 100);
  EXPECT_FALSE(fallback.arch_specific);
}

TEST(SelectImageTest, ArchSpecificPreferredOnExactTie) {
  TestVariant v("v", {"k"}, {image(90), image(90, true)});
  Pick p = pick(v, 90);
  ASSERT_TRUE(p.status.ok());
  EXPECT_TRUE(p.arch_specific);
}

// SASS first: PTX is used only when no cubin runs on the device.
TEST(SelectImageTest, PtxOnlyWhenNoCubinRuns) {
  TestVariant v("rmsnorm_h4096_bf16", {"k"}, {ptxImage(80), image(90)});
  Pick hopper = pick(v, 90);  // the exact cubin
  ASSERT_TRUE(hopper.status.ok());
  EXPECT_EQ(hopper.sm, 90);
  EXPECT_FALSE(hopper.ptx);
  Pick blackwell = pick(v, 100);  // no cubin runs across majors: the PTX
  ASSERT_TRUE(blackwell.status.ok()) << blackwell.status.message();
  EXPECT_EQ(blackwell.sm, 80);
  EXPECT_TRUE(blackwell.ptx);
  Pick ampere = pick(v, 80);
  EXPECT_EQ(ampere.sm, 80);
  EXPECT_TRUE(ampere.ptx);
  // A same-major cubin of a lower minor still beats newer-matching PTX.
  TestVariant orin("v", {"k"}, {image(86), ptxImage(87)});
  Pick p = pick(orin, 87);
  EXPECT_EQ(p.sm, 86);
  EXPECT_FALSE(p.ptx);
  // An arch-specific cubin of another SM does not run; the PTX does.
  TestVariant fmha("v", {"k"}, {ptxImage(90), image(100, true)});
  Pick later = pick(fmha, 103);
  EXPECT_EQ(later.sm, 90);
  EXPECT_TRUE(later.ptx);
}

TEST(SelectImageTest, NewestPtxAtOrBelowTheDeviceIsPicked) {
  TestVariant v("v", {"k"}, {ptxImage(75), ptxImage(90), ptxImage(80), ptxImage(120)});
  EXPECT_EQ(pick(v, 75).sm, 75);
  EXPECT_EQ(pick(v, 86).sm, 80);
  EXPECT_EQ(pick(v, 90).sm, 90);
  EXPECT_EQ(pick(v, 103).sm, 90);  // across majors, the newest that is not newer than the device
  EXPECT_EQ(pick(v, 110).sm, 90);
  EXPECT_EQ(pick(v, 121).sm, 120);
  EXPECT_TRUE(pick(v, 121).ptx);
}

TEST(SelectImageTest, PtxNewerThanTheDeviceMissesAndIsNamedAsPtx) {
  TestVariant v("rmsnorm_h4096_bf16", {"k"}, {ptxImage(100)});
  Pick p = pick(v, 90);
  EXPECT_EQ(p.status.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(p.status.message(),
            "rmsnorm_h4096_bf16: artifact has compute_100 PTX only; device is sm_90");
  TestVariant mixed("rmsnorm_h4096_bf16", {"k"}, {image(80), ptxImage(100), image(120, true)});
  EXPECT_EQ(
      pick(mixed, 90).status.message(),
      "rmsnorm_h4096_bf16: artifact has sm_80, compute_100 PTX, sm_120a only; device is sm_90");
}

TEST(SelectImageTest, NoImagesAndBadInputs) {
  TestVariant empty("v", {"k"}, {});
  EXPECT_EQ(pick(empty, 90).status.message(), "v: artifact has no images; device is sm_90");
  TestVariant v("v", {"k"}, {image(90)});
  EXPECT_EQ(pick(v, 0).status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(kiln::selectImage(v.get(), 90, nullptr).code(), StatusCode::kInvalidArgument);
  kiln_variant broken = v.get();
  broken.images = nullptr;
  const kiln_image* out = nullptr;
  EXPECT_EQ(kiln::selectImage(broken, 90, &out).code(), StatusCode::kInvalidArgument);
}

}  // namespace
