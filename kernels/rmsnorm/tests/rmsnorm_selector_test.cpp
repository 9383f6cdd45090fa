// The rmsnorm selector on a fake variant table: every admission error names the value and the
// limit, canImplement and run share the answer, and the launch plan matches launch.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "rmsnorm/launch.h"
#include "rmsnorm/runner/selector.h"
#include "support/fixed_variant.h"

namespace kiln::rmsnorm {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_rmsnorm", "kiln_add_rmsnorm"};
const char* const kEntriesReversed[] = {"kiln_add_rmsnorm", "kiln_rmsnorm"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

const kiln_variant kFp16H1024{"rmsnorm_h1024_fp16", "rmsnorm", kEntries, 2, kImages, 2, 0};
const kiln_variant kFp16H4096{"rmsnorm_h4096_fp16", "rmsnorm", kEntries, 2, kImages, 2, 0};
const kiln_variant kBf16H4096{"rmsnorm_h4096_bf16", "rmsnorm", kEntriesReversed, 2, kImages, 2, 0};
const kiln_variant kBf16H2560{"rmsnorm_h2560_bf16", "rmsnorm", kEntries, 2, kImages, 2, 0};
const kiln_variant kNoFused{"rmsnorm_h1024_bf16", "rmsnorm", kEntries, 1, kImages, 2, 0};

const VariantInfo kTable[] = {
    {"rmsnorm_h1024_fp16", 1024, DType::kFloat16, &fixedVariant<kFp16H1024>},
    {"rmsnorm_h4096_fp16", 4096, DType::kFloat16, &fixedVariant<kFp16H4096>},
    {"rmsnorm_h2560_bf16", 2560, DType::kBFloat16, &fixedVariant<kBf16H2560>},
    {"rmsnorm_h4096_bf16", 4096, DType::kBFloat16, &fixedVariant<kBf16H4096>},
};

// Addresses are never dereferenced: the selector only inspects them.
void* fakeAddress(std::uintptr_t a) {
  return reinterpret_cast<void*>(a);
}

Problem validProblem(DType dtype = DType::kBFloat16, std::int64_t hidden = 4096) {
  Problem p;
  p.dtype = dtype;
  p.rows = 7;
  p.hidden = hidden;
  p.eps = 1e-6f;
  p.out = fakeAddress(0x10000);
  p.x = fakeAddress(0x20000);
  p.weight = fakeAddress(0x30000);
  return p;
}

Status selectHost(const Problem& p, Plan* plan) {
  return select(kTable, p, nullptr, plan);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(RmsnormSelector, PlainProblemPlansPlainEntryAndLaunchShape) {
  Plan plan;
  const Status s = selectHost(validProblem(DType::kFloat16, 4096), &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "rmsnorm_h4096_fp16");
  EXPECT_FALSE(plan.no_op);
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_rmsnorm");
  const LaunchShape shape = launchShape(4096, 2);
  EXPECT_EQ(plan.config.block.x, static_cast<unsigned>(shape.threads_per_block));
  EXPECT_EQ(plan.config.grid.x, 7u);  // one row per block at 4096
  EXPECT_EQ(plan.config.grid.y, 1u);
  EXPECT_EQ(plan.config.shared_bytes, 0u);
  EXPECT_EQ(plan.params.rows, 7);
  EXPECT_EQ(plan.params.residual, nullptr);
  EXPECT_EQ(plan.params.x, fakeAddress(0x20000));
  EXPECT_FLOAT_EQ(plan.params.eps, 1e-6f);
}

TEST(RmsnormSelector, OverlapLaunchIsAProgrammaticDependentLaunch) {
  for (bool fused : {false, true}) {
    Problem p = validProblem();
    if (fused) p.residual = fakeAddress(0x40000);
    Plan plan;
    ASSERT_TRUE(selectHost(p, &plan).ok());  // the default: an ordinary launch
    EXPECT_FALSE(plan.config.programmatic_dependency) << fused;
    p.overlap_launch = true;
    ASSERT_TRUE(selectHost(p, &plan).ok());
    EXPECT_STREQ(plan.variant->entries[plan.entry], fused ? "kiln_add_rmsnorm" : "kiln_rmsnorm");
    EXPECT_TRUE(plan.config.programmatic_dependency) << fused;
    p.overlap_launch = false;
    ASSERT_TRUE(selectHost(p, &plan).ok());
    EXPECT_FALSE(plan.config.programmatic_dependency) << fused;
  }
}

TEST(RmsnormSelector, ResidualSelectsFusedEntryByNameNotPosition) {
  Problem p = validProblem(DType::kBFloat16, 4096);
  p.residual = fakeAddress(0x40000);
  Plan plan;
  const Status s = selectHost(p, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.entry, 0);  // kBf16H4096 lists the fused entry first
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_add_rmsnorm");
  EXPECT_EQ(plan.params.residual, fakeAddress(0x40000));
}

TEST(RmsnormSelector, SeveralRowsPerBlockRoundGridUp) {
  Problem p = validProblem(DType::kFloat16, 1024);
  p.rows = 9;
  Plan plan;
  ASSERT_TRUE(selectHost(p, &plan).ok());
  const LaunchShape shape = launchShape(1024, 2);
  ASSERT_EQ(shape.rows_per_block, 4);
  EXPECT_EQ(plan.config.grid.x, 3u);
  EXPECT_EQ(plan.config.block.x, 128u);
}

TEST(RmsnormSelector, UnbuiltHiddenNamesValueAndBuiltSizes) {
  Plan plan;
  const Status s = selectHost(validProblem(DType::kBFloat16, 4000), &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "rmsnorm: hidden 4000 is not built for bf16; built for bf16: 2560, 4096");
}

TEST(RmsnormSelector, HiddenBuiltOnlyForOtherDtypeIsNotBuilt) {
  Plan plan;
  const Status s = selectHost(validProblem(DType::kBFloat16, 1024), &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_TRUE(contains(s.message(), "hidden 1024 is not built for bf16")) << s.message();
}

TEST(RmsnormSelector, UnbuiltDtypeNamesBuiltDtypes) {
  const VariantInfo bf16_only[] = {
      {"rmsnorm_h4096_bf16", 4096, DType::kBFloat16, &fixedVariant<kBf16H4096>},
      {"rmsnorm_h2560_bf16", 2560, DType::kBFloat16, &fixedVariant<kBf16H2560>}};
  Plan plan;
  const Status s = select(bf16_only, validProblem(DType::kFloat16, 4096), nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "rmsnorm: dtype fp16 is not built; built dtypes: bf16");
}

TEST(RmsnormSelector, EmptyTableSaysNoneBuilt) {
  Plan plan;
  const Status s = select(std::span<const VariantInfo>{}, validProblem(), nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_TRUE(contains(s.message(), "built dtypes: none")) << s.message();
}

TEST(RmsnormSelector, UnknownDtypeValueIsInvalid) {
  Problem p = validProblem();
  p.dtype = static_cast<DType>(7);
  Plan plan;
  const Status s = selectHost(p, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "dtype 7")) << s.message();
}

TEST(RmsnormSelector, NegativeRowsAreInvalid) {
  Problem p = validProblem();
  p.rows = -3;
  Plan plan;
  const Status s = selectHost(p, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "rmsnorm: rows -3 is negative");
}

TEST(RmsnormSelector, ZeroRowsIsANoOpEvenWithNullPointers) {
  Problem p = validProblem();
  p.rows = 0;
  p.out = nullptr;
  p.x = nullptr;
  p.weight = nullptr;
  Plan plan;
  const Status s = selectHost(p, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
}

TEST(RmsnormSelector, ZeroRowsStillNeedsABuiltVariant) {
  Problem p = validProblem(DType::kBFloat16, 4000);
  p.rows = 0;
  Plan plan;
  EXPECT_EQ(selectHost(p, &plan).code(), StatusCode::kNotSupported);
}

TEST(RmsnormSelector, EpsMustBeFinitePositive) {
  for (float eps : {0.0f, -1e-6f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()}) {
    Problem p = validProblem();
    p.eps = eps;
    Plan plan;
    const Status s = selectHost(p, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << eps;
    EXPECT_TRUE(contains(s.message(), "eps ")) << s.message();
    EXPECT_TRUE(contains(s.message(), "is not a finite positive number")) << s.message();
  }
}

TEST(RmsnormSelector, NullPointersNameThePointer) {
  struct Case {
    const char* name;
    void (*clear)(Problem&);
  };
  const Case cases[] = {
      {"out", [](Problem& p) { p.out = nullptr; }},
      {"x", [](Problem& p) { p.x = nullptr; }},
      {"weight", [](Problem& p) { p.weight = nullptr; }},
  };
  for (const Case& c : cases) {
    Problem p = validProblem();
    c.clear(p);
    Plan plan;
    const Status s = selectHost(p, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), std::string("rmsnorm: ") + c.name + " is null");
  }
}

TEST(RmsnormSelector, MisalignedPointersNameThePointerAndAddress) {
  {
    Problem p = validProblem();
    p.x = fakeAddress(0x20002);
    Plan plan;
    const Status s = selectHost(p, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "rmsnorm: pointer x (0x20002) is not 16-byte aligned");
  }
  {
    Problem p = validProblem();
    p.residual = fakeAddress(0x40008);
    Plan plan;
    const Status s = selectHost(p, &plan);
    EXPECT_EQ(s.message(), "rmsnorm: pointer residual (0x40008) is not 16-byte aligned");
  }
  {
    Problem p = validProblem();
    p.out = fakeAddress(0x10001);
    Plan plan;
    EXPECT_TRUE(contains(selectHost(p, &plan).message(), "pointer out (0x10001)"));
  }
  {
    Problem p = validProblem();
    p.weight = fakeAddress(0x30004);
    Plan plan;
    EXPECT_TRUE(contains(selectHost(p, &plan).message(), "pointer weight (0x30004)"));
  }
}

TEST(RmsnormSelector, RowsBeyondTheGridLimitAreInvalid) {
  Problem p = validProblem();
  p.rows = std::numeric_limits<std::int64_t>::max();
  Plan plan;
  const Status s = selectHost(p, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(s.message(), "exceeds the limit 2147483647 for hidden 4096")) << s.message();

  p.rows = kMaxGridX;  // exactly the limit at one row per block
  EXPECT_TRUE(selectHost(p, &plan).ok());
}

TEST(RmsnormSelector, MissingEntryIsInternal) {
  const VariantInfo table[] = {
      {"rmsnorm_h1024_bf16", 1024, DType::kBFloat16, &fixedVariant<kNoFused>}};
  Problem p = validProblem(DType::kBFloat16, 1024);
  Plan plan;
  EXPECT_TRUE(select(table, p, nullptr, &plan).ok());
  p.residual = fakeAddress(0x40000);
  const Status s = select(table, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(contains(s.message(), "has no entry kernel kiln_add_rmsnorm")) << s.message();
}

Status fakeImageCheck(const kiln_variant& variant, int device_sm) {
  for (int i = 0; i < variant.num_images; ++i) {
    if (variant.images[i].sm == device_sm) return Status::Ok();
  }
  return Status(StatusCode::kNoKernelImage, std::string(variant.name) +
                                                ": artifact has sm_80, sm_90; device is sm_" +
                                                std::to_string(device_sm));
}

TEST(RmsnormSelector, DeviceCheckUsesTheImageCheck) {
  const DeviceQuery h200{90, &fakeImageCheck};
  const DeviceQuery orin{87, &fakeImageCheck};
  Plan plan;
  EXPECT_TRUE(select(kTable, validProblem(), &h200, &plan).ok());
  const Status s = select(kTable, validProblem(), &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_TRUE(contains(s.message(), "device is sm_87")) << s.message();
}

TEST(RmsnormSelector, DeviceCheckAppliesToZeroRowsToo) {
  Problem p = validProblem();
  p.rows = 0;
  const DeviceQuery orin{87, &fakeImageCheck};
  Plan plan;
  EXPECT_EQ(select(kTable, p, &orin, &plan).code(), StatusCode::kNoKernelImage);
}

TEST(RmsnormSelector, HostThenDeviceEqualsSelectWithDevice) {
  // run() selects on the host, then checks the device; canImplement(problem, sm) does both in
  // one call. Same answers for a spread of problems.
  const DeviceQuery devices[] = {{90, &fakeImageCheck}, {87, &fakeImageCheck}};
  std::vector<Problem> problems;
  for (std::int64_t hidden : {1024, 2560, 4000, 4096}) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (std::int64_t rows : {-1, 0, 1, 9}) {
        Problem p = validProblem(dtype, hidden);
        p.rows = rows;
        problems.push_back(p);
        p.x = fakeAddress(0x20008);
        problems.push_back(p);
      }
    }
  }
  for (const DeviceQuery& device : devices) {
    for (const Problem& p : problems) {
      Plan combined, staged;
      const Status one = select(kTable, p, &device, &combined);
      Status two = select(kTable, p, nullptr, &staged);
      if (two.ok()) two = checkDevice(staged, device);
      EXPECT_EQ(one.code(), two.code()) << one.toString() << " vs " << two.toString();
    }
  }
}

TEST(RmsnormSelector, DtypeNames) {
  EXPECT_STREQ(dtypeName(DType::kFloat16), "fp16");
  EXPECT_STREQ(dtypeName(DType::kBFloat16), "bf16");
  EXPECT_EQ(dtypeName(static_cast<DType>(9)), nullptr);
}

}  // namespace
}  // namespace kiln::rmsnorm
