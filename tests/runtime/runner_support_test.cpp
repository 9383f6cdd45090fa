// kiln/runner_support.h and kiln/dtype.h: what every group's selector shares, so that the four
// selectors' device checks, entry lookups and "not built" messages read the same.
#include "kiln/runner_support.h"

#include <gtest/gtest.h>

#include <span>
#include <string>

#include "fake_driver.h"
#include "kiln/dtype.h"

namespace {

using kiln::DType;
using kiln::Status;
using kiln::StatusCode;
using kiln::fake::image;
using kiln::fake::TestVariant;
namespace runner = kiln::runner;

TEST(DType, NamesRoundTripAndOthersAreRefused) {
  for (const DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    ASSERT_NE(kiln::dtypeName(d), nullptr);
    EXPECT_EQ(kiln::dtypeFromName(kiln::dtypeName(d)), d);
  }
  EXPECT_STREQ(kiln::dtypeName(DType::kFloat16), "fp16");
  EXPECT_STREQ(kiln::dtypeName(DType::kBFloat16), "bf16");
  EXPECT_STREQ(kiln::dtypeName(DType::kFloat32), "fp32");  // kiln.toml's fp32 (gdn's commit)
  EXPECT_EQ(kiln::dtypeName(static_cast<DType>(7)), nullptr);
  EXPECT_FALSE(kiln::dtypeFromName("fp64").has_value());
  EXPECT_FALSE(kiln::dtypeFromName("").has_value());
  EXPECT_FALSE(kiln::dtypeFromName("BF16").has_value());
}

TEST(RunnerSupport, CheckDeviceAsksTheImageCheckWithTheDevicesSm) {
  const TestVariant v("grp_x", {"kernel_main"}, {image(90)});
  int asked_sm = 0;
  const runner::DeviceQuery device{87, [&](const kiln_variant& variant, int sm) {
                                     asked_sm = sm;
                                     EXPECT_EQ(&variant, v.ptr());
                                     return Status(StatusCode::kNoKernelImage, "no sm_87");
                                   }};
  const Status s = runner::checkDevice("grp", v.ptr(), device);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(), "no sm_87");
  EXPECT_EQ(asked_sm, 87);
}

TEST(RunnerSupport, CheckDeviceWithoutVariantOrImageCheckIsInternal) {
  const TestVariant v("grp_x", {"kernel_main"}, {image(90)});
  const Status no_variant = runner::checkDevice("grp", nullptr, runner::deviceQuery(90));
  EXPECT_EQ(no_variant.code(), StatusCode::kInternal);
  EXPECT_EQ(no_variant.message(), "grp: checkDevice called without a selected variant");
  const Status no_check = runner::checkDevice("grp", v.ptr(), runner::DeviceQuery{90, nullptr});
  EXPECT_EQ(no_check.code(), StatusCode::kInternal);
  EXPECT_EQ(no_check.message(), "grp: no image check for device sm_90");
}

TEST(RunnerSupport, DeviceQueryUsesTheRuntimesImageSelection) {
  const TestVariant v("grp_x", {"kernel_main"}, {image(90), image(80)});
  EXPECT_TRUE(runner::checkDevice("grp", v.ptr(), runner::deviceQuery(90)).ok());
  EXPECT_TRUE(runner::checkDevice("grp", v.ptr(), runner::deviceQuery(86)).ok());  // sm_80 cubin
  const Status miss = runner::checkDevice("grp", v.ptr(), runner::deviceQuery(75));
  EXPECT_EQ(miss.code(), StatusCode::kNoKernelImage);
  EXPECT_NE(miss.message().find("sm_75"), std::string::npos) << miss.message();
}

const TestVariant& twoEntries() {
  static const TestVariant v("grp_a", {"kernel_main", "kernel_aux"}, {image(90)});
  return v;
}
const kiln_variant* twoEntriesVariant() {
  return twoEntries().ptr();
}
const kiln_variant* noTable() {
  return nullptr;
}

TEST(RunnerSupport, ResolveEntryFindsEachEntryOrNamesTheMissingOne) {
  const kiln_variant* resolved = nullptr;
  int index = -1;
  ASSERT_TRUE(
      runner::resolveEntry("grp", "grp_a", &twoEntriesVariant, "kernel_aux", &resolved, &index)
          .ok());
  EXPECT_EQ(resolved, twoEntries().ptr());
  EXPECT_EQ(index, 1);

  const Status missing =
      runner::resolveEntry("grp", "grp_a", &twoEntriesVariant, "kernel_gone", &resolved, &index);
  EXPECT_EQ(missing.code(), StatusCode::kInternal);
  EXPECT_EQ(missing.message(), "grp: variant grp_a has no entry kernel kernel_gone");

  const Status none =
      runner::resolveEntry("grp", "grp_b", &noTable, "kernel_main", &resolved, &index);
  EXPECT_EQ(none.code(), StatusCode::kInternal);
  EXPECT_EQ(none.message(), "grp: variant grp_b has no variant table");
  EXPECT_EQ(runner::resolveEntry("grp", "grp_c", nullptr, "kernel_main", &resolved, &index).code(),
            StatusCode::kInternal);
}

TEST(RunnerSupport, CheckHeadsNamesTheValueAndTheLimit) {
  EXPECT_TRUE(runner::checkHeads("grp", 32, 8).ok());
  EXPECT_TRUE(runner::checkHeads("grp", 8, 8).ok());
  const Status no_kv = runner::checkHeads("grp", 32, 0);
  EXPECT_EQ(no_kv.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_kv.message(), "grp: kv_heads 0 is not positive");
  EXPECT_EQ(runner::checkHeads("grp", 12, 8).message(),
            "grp: q_heads 12 is not a positive multiple of kv_heads 8");
  EXPECT_EQ(runner::checkHeads("grp", 0, 8).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(runner::checkHeads("grp", -8, 8).code(), StatusCode::kInvalidArgument);
}

struct Row {
  DType dtype;
  int size;
};

TEST(RunnerSupport, NotBuiltMessagesListWhatTheTableHolds) {
  const Row rows[] = {{DType::kBFloat16, 4096}, {DType::kFloat16, 1024}, {DType::kBFloat16, 8192}};
  const std::span<const Row> table(rows);
  const Row bf16_rows[] = {{DType::kBFloat16, 4096}};
  const Status s = runner::dtypeNotBuilt("grp", DType::kFloat16, std::span<const Row>(bf16_rows));
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "grp: dtype fp16 is not built; built dtypes: bf16");
  EXPECT_EQ(runner::dtypeNotBuilt("grp", DType::kBFloat16, std::span<const Row>()).message(),
            "grp: dtype bf16 is not built; built dtypes: none");
  EXPECT_EQ(runner::builtDtypes(table), "bf16, fp16");
  EXPECT_EQ(runner::builtFor(table, DType::kBFloat16, [](const Row& r) { return r.size; }),
            "4096, 8192");
}

TEST(RunnerSupport, FindBuiltReturnsTheRowOrNamesWhatIsBuilt) {
  const Row rows[] = {{DType::kBFloat16, 4096}, {DType::kFloat16, 1024}, {DType::kBFloat16, 8192}};
  const std::span<const Row> table(rows);
  const auto size = [](const Row& r) { return r.size; };
  const Row* found = nullptr;
  ASSERT_TRUE(runner::findBuilt("grp", table, DType::kBFloat16, "hidden", 8192, size, &found).ok());
  EXPECT_EQ(found, &rows[2]);
  ASSERT_TRUE(runner::findBuilt("grp", table, DType::kFloat16, "hidden", 1024, size, &found).ok());
  EXPECT_EQ(found, &rows[1]);

  Status s = runner::findBuilt("grp", table, DType::kFloat16, "hidden", 4096, size, &found);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "grp: hidden 4096 is not built for fp16; built for fp16: 1024");
  EXPECT_EQ(found, nullptr);
  s = runner::findBuilt("grp", table.first(1), DType::kFloat16, "hidden", 4096, size, &found);
  EXPECT_EQ(s.message(), "grp: dtype fp16 is not built; built dtypes: bf16");
}

TEST(RunnerSupport, CheckDtypeRefusesValuesOutsideTheEnum) {
  EXPECT_TRUE(runner::checkDtype("grp", DType::kBFloat16).ok());
  EXPECT_TRUE(runner::checkDtype("grp", DType::kFloat16).ok());
  const Status s = runner::checkDtype("grp", static_cast<DType>(7));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "grp: dtype 7 is not a DType value (fp16, bf16 or fp32)");
}

// The generated variant tables check a runner's row type with fieldCount (codegen.cpp).
struct ThreeFields {
  const char* name;
  DType dtype;
  const kiln_variant* (*variant)();
};
struct OneField {
  int value;
};
static_assert(runner::fieldCount<ThreeFields>() == 3);
static_assert(runner::fieldCount<Row>() == 2);
static_assert(runner::fieldCount<OneField>() == 1);

TEST(RunnerSupport, CheckNoOverlapNamesBothRangesWhenTheyShareAByte) {
  const auto at = [](std::uintptr_t a) { return reinterpret_cast<const void*>(a); };
  // Adjacent ranges, either order, and an empty one touch no common byte.
  EXPECT_TRUE(runner::checkNoOverlap("g", "out", at(0x1000), 0x1000, "in", at(0x2000), 0x10).ok());
  EXPECT_TRUE(runner::checkNoOverlap("g", "out", at(0x2000), 0x10, "in", at(0x1000), 0x1000).ok());
  EXPECT_TRUE(runner::checkNoOverlap("g", "out", at(0x1800), 0, "in", at(0x1000), 0x1000).ok());
  // One shared byte at either end, and containment.
  const Status s = runner::checkNoOverlap("g", "out", at(0x1000), 0x1001, "in", at(0x2000), 0x4000);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "g: out [0x1000, 0x2001) overlaps in [0x2000, 0x6000)");
  EXPECT_FALSE(runner::checkNoOverlap("g", "y", at(0x5fff), 1, "x", at(0x2000), 0x4000).ok());
  EXPECT_FALSE(runner::checkNoOverlap("g", "y", at(0x1000), 0x8000, "x", at(0x2000), 0x10).ok());
}

}  // namespace
