// The gemv selector on a fake variant table: the launch plan (the one entry for every m, grid
// over n, params with ldx / ldy resolved, the programmatic flag from overlap_launch), every
// admission error with its full message (the value and the limit), a no-op that checks nothing
// but the dtypes and the variant, and canImplement and run sharing the answer.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gemv/params.h"
#include "gemv/runner/selector.h"
#include "support/fake_address.h"
#include "support/fixed_variant.h"

namespace kiln::gemv {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_gemv"};
// An artifact of another version of the group, with other entry names.
const char* const kOtherEntries[] = {"kiln_gemv_m1", "kiln_gemv_m8"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

const kiln_variant kFp16{"gemv_fp16", "gemv", kEntries, 1, kImages, 2, 0};
const kiln_variant kBf16{"gemv_bf16", "gemv", kEntries, 1, kImages, 2, 0};
const kiln_variant kBf16Other{"gemv_bf16", "gemv", kOtherEntries, 2, kImages, 2, 0};

const VariantInfo kTable[] = {
    {"gemv_fp16", DType::kFloat16, &fixedVariant<kFp16>},
    {"gemv_bf16", DType::kBFloat16, &fixedVariant<kBf16>},
};
// An artifact built with bf16 only.
const VariantInfo kBf16Only[] = {{"gemv_bf16", DType::kBFloat16, &fixedVariant<kBf16>}};

using fake::fakeAddress;

// Qwen3-8B's qkv projection at one token: n 6144, k 4096 in bf16, with a bias. x is 8 KiB at
// 0x10000000, w 48 MiB at 0x100000000, bias 12 KiB at 0x20000000, y 12 KiB at 0x30000000.
GemvProblem validProblem() {
  GemvProblem p;
  p.dtype = DType::kBFloat16;
  p.out_dtype = DType::kBFloat16;
  p.m = 1;
  p.n = 6144;
  p.k = 4096;
  p.x = fakeAddress<const void>(0x10000000);
  p.w = fakeAddress<const void>(0x100000000);
  p.bias = fakeAddress<const void>(0x20000000);
  p.y = fakeAddress(0x30000000);
  return p;
}

Status selectHost(const GemvProblem& p) {
  Plan plan;
  return select(kTable, p, nullptr, &plan);
}

void expectMessage(const GemvProblem& p, const std::string& message) {
  const Status s = selectHost(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << message;
  EXPECT_EQ(s.message(), message);
}

TEST(GemvSelector, PlansOneBlockPerSixteenRowsOfW) {
  const GemvProblem p = validProblem();
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "gemv_bf16");
  EXPECT_FALSE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_gemv");
  EXPECT_EQ(plan.config.grid.x, 384u);  // 6144 rows of w, 16 a block (the mma tile)
  EXPECT_EQ(plan.config.grid.y, 1u);
  EXPECT_EQ(plan.config.grid.z, 1u);
  EXPECT_EQ(plan.config.block.x, 256u);
  EXPECT_EQ(plan.config.block.y, 1u);
  EXPECT_EQ(plan.config.block.z, 1u);
  EXPECT_EQ(plan.config.shared_bytes, 0u);
  EXPECT_FALSE(plan.config.programmatic_dependency);
  const GemvParams& params = plan.params;
  EXPECT_EQ(params.y, p.y);
  EXPECT_EQ(params.x, p.x);
  EXPECT_EQ(params.w, p.w);
  EXPECT_EQ(params.bias, p.bias);
  EXPECT_EQ(params.ldx, 4096);  // 0: k
  EXPECT_EQ(params.ldy, 6144);  // 0: n
  EXPECT_EQ(params.m, 1);
  EXPECT_EQ(params.n, 6144);
  EXPECT_EQ(params.k_vectors, 512);
  EXPECT_EQ(params.y_fp32, 0);

  GemvProblem f = p;  // fp16
  f.dtype = DType::kFloat16;
  f.out_dtype = DType::kFloat16;
  ASSERT_TRUE(select(kTable, f, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "gemv_fp16");
}

TEST(GemvSelector, EveryMRunsTheOneEntryOnTheSameGrid) {
  for (std::int64_t m = 1; m <= 8; ++m) {
    GemvProblem p = validProblem();
    p.m = m;
    Plan plan;
    const Status s = select(kTable, p, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << m << ": " << s.toString();
    EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_gemv") << m;
    EXPECT_EQ(plan.params.m, m) << m;
    EXPECT_EQ(plan.config.grid.x, 384u) << m;  // the grid does not depend on m
  }
  EXPECT_EQ(kMaxM, 8);
}

TEST(GemvSelector, GridCoversNInBlocksOfSixteenRows) {
  struct Row {
    std::int64_t n;
    unsigned blocks;
  };
  const Row rows[] = {{1, 1},        {15, 1},        {16, 1},
                      {17, 2},       {2053, 129},    {4096, 256},
                      {32000, 2000}, {151936, 9496}, {2147483647, 134217728}};
  for (const Row& r : rows) {
    GemvProblem p = validProblem();
    p.n = r.n;
    p.k = 8;
    p.bias = nullptr;
    p.y = fakeAddress(0x1000000000000);  // past w's up to 32 GiB
    Plan plan;
    const Status s = select(kTable, p, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << r.n << ": " << s.toString();
    EXPECT_EQ(plan.config.grid.x, r.blocks) << r.n;
    EXPECT_EQ(plan.params.n, r.n);
    EXPECT_EQ(plan.params.k_vectors, 1);
  }
}

TEST(GemvSelector, StridesAndTheOutputDtypeReachTheParams) {
  GemvProblem p = validProblem();
  p.m = 3;
  p.ldx = 4104;  // a padded row of x
  p.ldy = 6200;
  p.out_dtype = DType::kFloat32;
  p.y = fakeAddress(0x40000000);  // 4-byte aligned is enough for float32
  Plan plan;
  Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.params.ldx, 4104);
  EXPECT_EQ(plan.params.ldy, 6200);
  EXPECT_EQ(plan.params.m, 3);
  EXPECT_EQ(plan.params.y_fp32, 1);
  p.y = fakeAddress(0x40000004);
  s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  // ldx = k and ldy = n stated, as 0 says them.
  p.ldx = 4096;
  p.ldy = 6144;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.ldx, 4096);
  EXPECT_EQ(plan.params.ldy, 6144);
  // No bias: null in the params.
  p.bias = nullptr;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.bias, nullptr);
  // The largest k: k / 8 is the largest int32.
  p.k = kMaxK;
  p.ldx = 0;
  p.n = 8;
  p.m = 1;
  p.y = fakeAddress(0x4000000000000);  // past w's 256 GiB and x's 32 GiB
  s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.params.k_vectors, 2147483647);
  EXPECT_EQ(plan.params.ldx, kMaxK);
}

TEST(GemvSelector, OverlapLaunchIsAProgrammaticDependentLaunch) {
  GemvProblem p = validProblem();
  p.overlap_launch = true;
  Plan plan;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_TRUE(plan.config.programmatic_dependency);
  p.overlap_launch = false;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_FALSE(plan.config.programmatic_dependency);
}

TEST(GemvSelector, ZeroRowsAreANoOpWithNothingElseChecked) {
  GemvProblem p;  // defaults: bf16 in and out, every size 0, null pointers
  Plan plan;
  Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  EXPECT_STREQ(plan.info->name, "gemv_bf16");
  p.n = -5;  // not checked either
  p.k = 3;
  p.ldx = 1;
  p.y = fakeAddress(0x3);
  p.overlap_launch = true;
  s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  // The dtypes are checked: they name the variant that canImplement(problem, sm) answers for.
  p.out_dtype = DType::kFloat16;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).code(), StatusCode::kInvalidArgument);
  p.out_dtype = DType::kFloat32;
  p.dtype = DType::kFloat16;
  EXPECT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "gemv_fp16");
  EXPECT_EQ(select(kBf16Only, p, nullptr, &plan).code(), StatusCode::kNotSupported);
}

TEST(GemvSelector, DtypeNotBuiltNamesTheBuiltOnes) {
  GemvProblem p = validProblem();
  p.dtype = DType::kFloat16;
  p.out_dtype = DType::kFloat16;
  Plan plan;
  Status s = select(kBf16Only, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "gemv: dtype fp16 is not built; built dtypes: bf16");
  // fp32 x and w: never built (a float32 y is out_dtype's).
  p.dtype = DType::kFloat32;
  p.out_dtype = DType::kFloat32;
  s = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "gemv: dtype fp32 is not built; built dtypes: fp16, bf16");
  EXPECT_EQ(select(std::span<const VariantInfo>(), validProblem(), nullptr, &plan).message(),
            "gemv: dtype bf16 is not built; built dtypes: none");
}

TEST(GemvSelector, UnknownDtypeValuesAreInvalid) {
  GemvProblem p = validProblem();
  p.dtype = static_cast<DType>(7);
  EXPECT_EQ(selectHost(p).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(selectHost(p).message(), "gemv: dtype 7 is not a DType value (fp16, bf16 or fp32)");
  p = validProblem();
  p.out_dtype = static_cast<DType>(-1);
  expectMessage(p, "gemv: out_dtype -1 is neither the dtype (bf16) nor fp32");
}

TEST(GemvSelector, OutDtypeIsTheDtypeOrFloat32) {
  GemvProblem p = validProblem();
  p.out_dtype = DType::kFloat16;  // bf16 in, fp16 out
  expectMessage(p, "gemv: out_dtype fp16 is neither the dtype (bf16) nor fp32");
  p.dtype = DType::kFloat16;
  p.out_dtype = DType::kBFloat16;
  expectMessage(p, "gemv: out_dtype bf16 is neither the dtype (fp16) nor fp32");
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (DType out : {dtype, DType::kFloat32}) {
      p = validProblem();
      p.dtype = dtype;
      p.out_dtype = out;
      Plan plan;
      const Status s = select(kTable, p, nullptr, &plan);
      EXPECT_TRUE(s.ok()) << dtypeName(dtype) << " -> " << dtypeName(out) << ": " << s.toString();
      EXPECT_EQ(plan.params.y_fp32, out == DType::kFloat32 ? 1 : 0);
    }
  }
}

TEST(GemvSelector, ShapeErrorsNameTheValueAndTheLimit) {
  struct Change {
    void (*change)(GemvProblem&);
    const char* message;
  };
  const Change cases[] = {
      {[](GemvProblem& p) { p.m = -1; }, "gemv: m -1 is negative"},
      {[](GemvProblem& p) { p.m = 9; },
       "gemv: m 9 exceeds the limit 8 (the token columns of one mma tile)"},
      {[](GemvProblem& p) { p.m = 1LL << 40; },
       "gemv: m 1099511627776 exceeds the limit 8 (the token columns of one mma tile)"},
      {[](GemvProblem& p) { p.n = 0; }, "gemv: n 0 is not positive"},
      {[](GemvProblem& p) { p.n = -6144; }, "gemv: n -6144 is not positive"},
      {[](GemvProblem& p) { p.n = 1LL << 31; }, "gemv: n 2147483648 exceeds the limit 2147483647"},
      {[](GemvProblem& p) { p.k = 0; }, "gemv: k 0 is below the minimum 8"},
      {[](GemvProblem& p) { p.k = 4; }, "gemv: k 4 is below the minimum 8"},
      {[](GemvProblem& p) { p.k = -4096; }, "gemv: k -4096 is below the minimum 8"},
      {[](GemvProblem& p) { p.k = 4100; }, "gemv: k 4100 is not a multiple of 8"},
      {[](GemvProblem& p) { p.k = 17179869184; },  // 2^34: k / 8 = 2^31
       "gemv: k 17179869184 exceeds the limit 17179869176"},
      // ldx: 0 is k, anything else is checked as it is.
      {[](GemvProblem& p) { p.ldx = 4088; }, "gemv: ldx 4088 is less than k 4096"},
      {[](GemvProblem& p) { p.ldx = -8; }, "gemv: ldx -8 is less than k 4096"},
      {[](GemvProblem& p) { p.ldx = 4100; },
       "gemv: ldx 4100 is not a multiple of 8 (rows of x are read as 16-byte vectors)"},
      {[](GemvProblem& p) { p.ldx = (1LL << 58) + 8; },
       "gemv: ldx 288230376151711752 exceeds the limit 288230376151711744"},
      {[](GemvProblem& p) { p.ldy = 6143; }, "gemv: ldy 6143 is less than n 6144"},
      {[](GemvProblem& p) { p.ldy = -1; }, "gemv: ldy -1 is less than n 6144"},
      {[](GemvProblem& p) { p.ldy = (1LL << 58) + 1; },
       "gemv: ldy 288230376151711745 exceeds the limit 288230376151711744"},
      // n and k each within their limits, their product not: 2^31 - 1 rows of 2^34 - 8 bytes.
      {[](GemvProblem& p) {
         p.n = 2147483647;
         p.k = 17179869176;
       },
       "gemv: w of 2147483647 x 17179869176 bf16 elements exceeds 2^63 - 1 bytes"},
  };
  for (const Change& c : cases) {
    GemvProblem p = validProblem();
    c.change(p);
    expectMessage(p, c.message);
  }
  // Any ldy >= n (odd ones included: y is addressed element by element).
  for (std::int64_t ldy : {6144LL, 6145LL, 8191LL, 1LL << 20}) {
    GemvProblem p = validProblem();
    p.m = 2;
    p.ldy = ldy;
    p.y = fakeAddress(0x1000000000);
    EXPECT_TRUE(selectHost(p).ok()) << ldy << ": " << selectHost(p).toString();
  }
}

TEST(GemvSelector, PointerErrorsNameThePointerAndTheAlignment) {
  struct Change {
    void (*change)(GemvProblem&);
    const char* message;
  };
  const Change cases[] = {
      {[](GemvProblem& p) { p.x = nullptr; }, "gemv: x is null"},
      {[](GemvProblem& p) { p.x = fakeAddress<const void>(0x10000008); },
       "gemv: pointer x (0x10000008) is not 16-byte aligned"},
      {[](GemvProblem& p) { p.w = nullptr; }, "gemv: w is null"},
      {[](GemvProblem& p) { p.w = fakeAddress<const void>(0x100000002); },
       "gemv: pointer w (0x100000002) is not 16-byte aligned"},
      {[](GemvProblem& p) { p.y = nullptr; }, "gemv: y is null"},
      {[](GemvProblem& p) { p.y = fakeAddress(0x30000001); },
       "gemv: pointer y (0x30000001) is not 2-byte aligned"},
      {[](GemvProblem& p) {
         p.out_dtype = DType::kFloat32;
         p.y = fakeAddress(0x30000002);
       },
       "gemv: pointer y (0x30000002) is not 4-byte aligned"},
      {[](GemvProblem& p) { p.bias = fakeAddress<const void>(0x20000001); },
       "gemv: pointer bias (0x20000001) is not 2-byte aligned"},
      // The order: x, w, y, then bias.
      {[](GemvProblem& p) {
         p.x = nullptr;
         p.w = nullptr;
       },
       "gemv: x is null"},
      {[](GemvProblem& p) {
         p.y = nullptr;
         p.bias = fakeAddress<const void>(0x20000001);
       },
       "gemv: y is null"},
  };
  for (const Change& c : cases) {
    GemvProblem p = validProblem();
    c.change(p);
    expectMessage(p, c.message);
  }
  // y and bias need only their element's alignment; bias may be null.
  GemvProblem p = validProblem();
  p.y = fakeAddress(0x30000002);
  p.bias = fakeAddress<const void>(0x20000006);
  EXPECT_TRUE(selectHost(p).ok()) << selectHost(p).toString();
  p.bias = nullptr;
  EXPECT_TRUE(selectHost(p).ok());
}

TEST(GemvSelector, YMustNotOverlapAnInput) {
  struct Change {
    void (*change)(GemvProblem&);
    const char* message;
  };
  // validProblem: x [0x10000000, 0x10002000), w [0x100000000, 0x103000000), bias [0x20000000,
  // 0x20003000); y of 6144 bf16 = 0x3000 bytes.
  const Change cases[] = {
      {[](GemvProblem& p) { p.y = const_cast<void*>(p.x); },
       "gemv: y [0x10000000, 0x10003000) overlaps x [0x10000000, 0x10002000)"},
      {[](GemvProblem& p) { p.y = fakeAddress(0x10001ffe); },
       "gemv: y [0x10001ffe, 0x10004ffe) overlaps x [0x10000000, 0x10002000)"},
      {[](GemvProblem& p) { p.y = fakeAddress(0x0fffd002); },
       "gemv: y [0xfffd002, 0x10000002) overlaps x [0x10000000, 0x10002000)"},
      {[](GemvProblem& p) { p.y = fakeAddress(0x102fffffe); },
       "gemv: y [0x102fffffe, 0x103002ffe) overlaps w [0x100000000, 0x103000000)"},
      {[](GemvProblem& p) { p.y = fakeAddress(0x20002000); },
       "gemv: y [0x20002000, 0x20005000) overlaps bias [0x20000000, 0x20003000)"},
      // m rows: x's last row up to k, y's up to n. m 3, ldx 8192: x is 2 x 16 KiB + 8 KiB.
      {[](GemvProblem& p) {
         p.m = 3;
         p.ldx = 8192;
         p.y = fakeAddress(0x10009ffe);
       },
       "gemv: y [0x10009ffe, 0x10012ffe) overlaps x [0x10000000, 0x1000a000)"},
      // float32 y of 2 rows, ldy 8192: 8192 x 4 + 6144 x 4 bytes.
      {[](GemvProblem& p) {
         p.m = 2;
         p.ldy = 8192;
         p.out_dtype = DType::kFloat32;
         p.y = fakeAddress(0x1fff2004);
       },
       "gemv: y [0x1fff2004, 0x20000004) overlaps bias [0x20000000, 0x20003000)"},
  };
  for (const Change& c : cases) {
    GemvProblem p = validProblem();
    c.change(p);
    expectMessage(p, c.message);
  }
  // Adjacent ranges do not overlap; the padding past n of y's last row is not y's.
  GemvProblem p = validProblem();
  p.y = fakeAddress(0x10002000);  // right after x
  EXPECT_TRUE(selectHost(p).ok()) << selectHost(p).toString();
  p.y = fakeAddress(0x0fffd000);  // right before x
  EXPECT_TRUE(selectHost(p).ok());
  p.y = fakeAddress(0x103000000);  // right after w
  EXPECT_TRUE(selectHost(p).ok());
  p.m = 2;
  p.ldy = 8192;
  p.y = fakeAddress(0x20000000 - 0x4000 - 0x3000);  // 2 rows end where bias starts
  EXPECT_TRUE(selectHost(p).ok()) << selectHost(p).toString();
  // x may overlap w and bias (all three are only read).
  p = validProblem();
  p.bias = p.x;
  p.w = p.x;
  EXPECT_TRUE(selectHost(p).ok());
}

TEST(GemvSelector, TheShapesAloneSkipThePointers) {
  // workspaceSize asks with PointerChecks::kSkip: null or misaligned pointers and overlaps pass.
  GemvProblem p = validProblem();
  p.x = nullptr;
  p.w = fakeAddress<const void>(0x3);
  p.y = const_cast<void*>(p.bias);
  Plan plan;
  EXPECT_TRUE(select(kTable, p, nullptr, &plan, PointerChecks::kSkip).ok());
  EXPECT_FALSE(select(kTable, p, nullptr, &plan).ok());
  p.k = 12;  // the shape still is checked
  EXPECT_EQ(select(kTable, p, nullptr, &plan, PointerChecks::kSkip).message(),
            "gemv: k 12 is not a multiple of 8");
}

TEST(GemvSelector, MissingEntryIsInternal) {
  const VariantInfo table[] = {{"gemv_bf16", DType::kBFloat16, &fixedVariant<kBf16Other>}};
  GemvProblem p = validProblem();
  Plan plan;
  for (std::int64_t m : {1, 8}) {
    p.m = m;
    const Status s = select(table, p, nullptr, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << m;
    EXPECT_NE(s.message().find("gemv_bf16 has no entry kernel kiln_gemv"), std::string::npos)
        << s.message();
  }
}

TEST(GemvSelector, NullPlanIsInternal) {
  EXPECT_EQ(select(kTable, validProblem(), nullptr, nullptr).code(), StatusCode::kInternal);
}

Status fakeImageCheck(const kiln_variant& variant, int device_sm) {
  for (int i = 0; i < variant.num_images; ++i) {
    if (variant.images[i].sm == device_sm) return Status::Ok();
  }
  return Status(StatusCode::kNoKernelImage, std::string(variant.name) +
                                                ": artifact has sm_80, sm_90; device is sm_" +
                                                std::to_string(device_sm));
}

TEST(GemvSelector, HostThenDeviceEqualsSelectWithDevice) {
  std::vector<GemvProblem> problems;
  for (std::int64_t m : {-1LL, 0LL, 1LL, 3LL, 8LL, 9LL}) {
    GemvProblem p = validProblem();
    p.m = m;
    problems.push_back(p);
    p.k = 12;
    problems.push_back(p);
    p = validProblem();
    p.m = m;
    p.y = const_cast<void*>(p.x);
    problems.push_back(p);
    p.dtype = DType::kFloat32;
    problems.push_back(p);
  }
  const DeviceQuery devices[] = {{90, &fakeImageCheck}, {87, &fakeImageCheck}};
  for (const DeviceQuery& device : devices) {
    for (const GemvProblem& p : problems) {
      Plan combined, staged;
      const Status one = select(kTable, p, &device, &combined);
      Status two = select(kTable, p, nullptr, &staged);
      if (two.ok()) two = checkDevice(staged, device);
      EXPECT_EQ(one.code(), two.code()) << one.toString() << " vs " << two.toString();
      EXPECT_EQ(one.message(), two.message());
    }
  }
  const DeviceQuery orin{87, &fakeImageCheck};
  Plan plan;
  const Status s = select(kTable, validProblem(), &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_NE(s.message().find("device is sm_87"), std::string::npos) << s.message();
  GemvProblem none;  // a no-op still answers for its variant's images
  EXPECT_EQ(select(kTable, none, &orin, &plan).code(), StatusCode::kNoKernelImage);
}

TEST(GemvSelector, ParamsLayoutIsPinned) {
  EXPECT_EQ(sizeof(GemvParams), 64u);
  EXPECT_EQ(elementBytes(DType::kFloat16), 2);
  EXPECT_EQ(elementBytes(DType::kBFloat16), 2);
  EXPECT_EQ(elementBytes(DType::kFloat32), 4);
  EXPECT_EQ(kMaxN, 2147483647);
  EXPECT_EQ(kMaxK, 17179869176);
}

}  // namespace
}  // namespace kiln::gemv
