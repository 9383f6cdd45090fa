// The qkrope selector on a fake variant table: every admission error names the value and the
// limit, canImplement and run share the answer, and the launch plan matches launch.h and rope.h
// (programmatic when overlap_launch asks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qkrope/launch.h"
#include "qkrope/rope.h"
#include "qkrope/runner/selector.h"
#include "support/fake_address.h"
#include "support/fixed_variant.h"

namespace kiln::qkrope {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_qkrope"};
const char* const kOtherEntries[] = {"kiln_other"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

const kiln_variant kD128Bf16{"qkrope_d128_bf16", "qkrope", kEntries, 1, kImages, 2, 0};
const kiln_variant kD64Bf16{"qkrope_d64_bf16", "qkrope", kEntries, 1, kImages, 2, 0};
const kiln_variant kD256Bf16{"qkrope_d256_bf16", "qkrope", kEntries, 1, kImages, 2, 0};
const kiln_variant kD128Fp16{"qkrope_d128_fp16", "qkrope", kEntries, 1, kImages, 2, 0};
const kiln_variant kNoEntry{"qkrope_d128_bf16", "qkrope", kOtherEntries, 1, kImages, 2, 0};

const VariantInfo kTable[] = {
    {"qkrope_d64_bf16", 64, DType::kBFloat16, &fixedVariant<kD64Bf16>},
    {"qkrope_d128_bf16", 128, DType::kBFloat16, &fixedVariant<kD128Bf16>},
    {"qkrope_d256_bf16", 256, DType::kBFloat16, &fixedVariant<kD256Bf16>},
    {"qkrope_d128_fp16", 128, DType::kFloat16, &fixedVariant<kD128Fp16>},
};

using fake::fakeAddress;

// Qwen3-8B's attention input: 32 q / 8 kv heads of 128, theta 1e6, QK norm, 7 tokens, NHD pages
// of 16.
Problem validProblem(int head_dim = 128) {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 7;
  p.q_heads = 32;
  p.kv_heads = 8;
  p.head_dim = head_dim;
  p.rope_theta = 1e6f;
  p.qk_norm = true;
  p.eps = 1e-6f;
  p.page_size = 16;
  p.num_pages = 100;
  p.qkv = fakeAddress(0x10000);
  p.positions = fakeAddress<const std::int64_t>(0x20000);
  p.slot_mapping = fakeAddress<const std::int64_t>(0x30000);
  p.q_norm_weight = fakeAddress(0x40000);
  p.k_norm_weight = fakeAddress(0x50000);
  p.q_out = fakeAddress(0x60000);
  p.k_cache = fakeAddress(0x70000);
  p.v_cache = fakeAddress(0x80000);
  return p;
}

Status selectHost(const Problem& p, Plan* plan) {
  return select(kTable, p, nullptr, plan);
}

std::string messageOf(const Problem& p) {
  Plan plan;
  return selectHost(p, &plan).message();
}

TEST(QkropeSelector, Qwen3ProblemPlansOneBlockPerTokenAndTheParameters) {
  Plan plan;
  const Problem p = validProblem();
  const Status s = selectHost(p, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "qkrope_d128_bf16");
  EXPECT_FALSE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_qkrope");
  // 48 heads of 8 threads: one block of 384 threads per token.
  EXPECT_EQ(plan.config.grid.x, 7u);
  EXPECT_EQ(plan.config.grid.y, 1u);
  EXPECT_EQ(plan.config.grid.z, 1u);
  EXPECT_EQ(plan.config.block.x, 384u);
  EXPECT_EQ(plan.config.shared_bytes, 0u);
  EXPECT_FALSE(plan.config.programmatic_dependency);  // overlap_launch is off by default
  const QkRopeParams& params = plan.params;
  EXPECT_EQ(params.qkv, p.qkv);
  EXPECT_EQ(params.positions, p.positions);
  EXPECT_EQ(params.slot_mapping, p.slot_mapping);
  EXPECT_EQ(params.q_norm_weight, p.q_norm_weight);
  EXPECT_EQ(params.k_norm_weight, p.k_norm_weight);
  EXPECT_EQ(params.q_out, p.q_out);
  EXPECT_EQ(params.k_cache, p.k_cache);
  EXPECT_EQ(params.v_cache, p.v_cache);
  EXPECT_EQ(params.k_out, nullptr);
  EXPECT_EQ(params.v_out, nullptr);
  EXPECT_EQ(params.num_slots, 1600);
  EXPECT_EQ(params.page_stride, 16 * 8 * 128);
  EXPECT_EQ(params.token_stride, 8 * 128);  // NHD: a row holds every kv head
  EXPECT_EQ(params.head_stride, 128);
  EXPECT_EQ(params.page_size_log2, 4);
  EXPECT_EQ(params.q_heads, 32);
  EXPECT_EQ(params.kv_heads, 8);
  EXPECT_EQ(params.rows_per_block, 48);
  EXPECT_EQ(params.rotary_dim, 128);  // 0: the head dim
  EXPECT_EQ(params.qk_norm, 1);
  EXPECT_FLOAT_EQ(params.eps, 1e-6f);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(params.inv_freq[i], invFreq(1e6f, 128, i)) << i;
  for (int i = 64; i < kMaxRotaryPairs; ++i) EXPECT_EQ(params.inv_freq[i], 0.0f) << i;
  EXPECT_EQ(params.inv_freq[0], 1.0f);
}

TEST(QkropeSelector, OverlapLaunchIsAProgrammaticDependentLaunch) {
  Problem p = validProblem();
  p.overlap_launch = true;
  Plan plan;
  ASSERT_TRUE(selectHost(p, &plan).ok());
  EXPECT_TRUE(plan.config.programmatic_dependency);
  EXPECT_EQ(plan.config.grid.x, 7u);  // nothing else of the plan changes
  EXPECT_EQ(plan.config.block.x, 384u);
  p.overlap_launch = false;
  ASSERT_TRUE(selectHost(p, &plan).ok());
  EXPECT_FALSE(plan.config.programmatic_dependency);
}

TEST(QkropeSelector, HndStridesPartialRotaryAndContiguousCopies) {
  Problem p = validProblem();
  p.kv_layout = KvLayout::kHND;
  p.page_size = 256;
  p.rotary_dim = 64;
  p.rope_theta = 10000.0f;
  p.k_out = fakeAddress(0x90000);
  p.v_out = fakeAddress(0xa0000);
  Plan plan;
  ASSERT_TRUE(selectHost(p, &plan).ok());
  EXPECT_EQ(plan.params.page_size_log2, 8);
  EXPECT_EQ(plan.params.page_stride, 256 * 8 * 128);
  EXPECT_EQ(plan.params.token_stride, 128);       // HND: a head's rows are adjacent
  EXPECT_EQ(plan.params.head_stride, 256 * 128);  // a head's page_size rows
  EXPECT_EQ(plan.params.num_slots, 100 * 256);
  EXPECT_EQ(plan.params.rotary_dim, 64);
  EXPECT_EQ(plan.params.k_out, p.k_out);
  EXPECT_EQ(plan.params.v_out, p.v_out);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(plan.params.inv_freq[i], invFreq(1e4f, 64, i)) << i;
  EXPECT_EQ(plan.params.inv_freq[32], 0.0f);
}

TEST(QkropeSelector, WithoutQkNormTheWeightsAndEpsAreNotRead) {
  Problem p = validProblem();
  p.qk_norm = false;
  p.q_norm_weight = fakeAddress(0x40002);  // misaligned, and ignored
  p.k_norm_weight = nullptr;
  p.eps = -1.0f;
  Plan plan;
  const Status s = selectHost(p, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.params.qk_norm, 0);
  EXPECT_EQ(plan.params.q_norm_weight, nullptr);
  EXPECT_EQ(plan.params.k_norm_weight, nullptr);
}

TEST(QkropeSelector, LaunchShapesOfEveryHeadDim) {
  // head dim 64: 4 threads a head; 256: 16, at most 32 heads a block (two blocks per token).
  struct Row {
    int head_dim, q_heads, kv_heads;
    unsigned block, chunks;
    int rows_per_block;
  };
  const Row rows[] = {
      {64, 32, 8, 192, 1, 48},   // 48 heads x 4
      {128, 16, 8, 256, 1, 32},  // Qwen3-0.6B..4B: 32 heads x 8
      {128, 64, 4, 288, 2, 36},  // 72 heads: two blocks of 36
      {256, 32, 8, 384, 2, 24},  // 48 heads x 16 = 768 > 512: two blocks of 24
      {128, 1, 1, 32, 1, 3},     // 3 heads x 8 = 24 threads: one warp, 8 idle
  };
  for (const Row& r : rows) {
    Problem p = validProblem(r.head_dim);
    p.q_heads = r.q_heads;
    p.kv_heads = r.kv_heads;
    Plan plan;
    ASSERT_TRUE(selectHost(p, &plan).ok()) << r.head_dim;
    EXPECT_EQ(plan.config.block.x, r.block) << r.head_dim << " " << r.q_heads;
    EXPECT_EQ(plan.config.grid.y, r.chunks) << r.head_dim << " " << r.q_heads;
    EXPECT_EQ(plan.params.rows_per_block, r.rows_per_block) << r.head_dim << " " << r.q_heads;
    const LaunchShape shape = launchShape(r.head_dim, r.q_heads + 2 * r.kv_heads);
    EXPECT_EQ(shape.threads_per_head, r.head_dim / 16);
    EXPECT_LE(shape.threads_per_block, kMaxBlockThreads);
    EXPECT_GE(shape.rows_per_block * shape.chunks, r.q_heads + 2 * r.kv_heads);
  }
  EXPECT_FALSE(launchShape(96, 10).valid);  // 6 threads a head: not a power of two
  EXPECT_FALSE(launchShape(128, 0).valid);
}

TEST(QkropeSelector, UnbuiltHeadDimNamesValueAndBuiltSizes) {
  EXPECT_EQ(messageOf(validProblem(96)),
            "qkrope: head_dim 96 is not built for bf16; built for bf16: 64, 128, 256");
  Problem p = validProblem(64);
  p.dtype = DType::kFloat16;
  Plan plan;
  const Status s = selectHost(p, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "qkrope: head_dim 64 is not built for fp16; built for fp16: 128");
}

TEST(QkropeSelector, UnknownDtypeValueIsInvalid) {
  Problem p = validProblem();
  p.dtype = static_cast<DType>(7);
  Plan plan;
  const Status s = selectHost(p, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("dtype 7"), std::string::npos) << s.message();
}

TEST(QkropeSelector, ZeroTokensIsANoOpEvenWithNullPointersAndNoShape) {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.head_dim = 128;
  Plan plan;
  const Status s = selectHost(p, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  p.overlap_launch = true;  // a no-op launches nothing, programmatic or not
  ASSERT_TRUE(selectHost(p, &plan).ok());
  EXPECT_TRUE(plan.no_op);
  p.head_dim = 80;
  EXPECT_EQ(selectHost(p, &plan).code(), StatusCode::kNotSupported);  // still needs a variant
}

TEST(QkropeSelector, ShapeErrorsNameTheValueAndTheLimit) {
  struct Case {
    void (*change)(Problem&);
    const char* message;
  };
  const Case cases[] = {
      {[](Problem& p) { p.tokens = -1; }, "qkrope: tokens -1 is negative"},
      {[](Problem& p) { p.kv_heads = 0; }, "qkrope: kv_heads 0 is not positive"},
      {[](Problem& p) { p.q_heads = 12; },
       "qkrope: q_heads 12 is not a positive multiple of kv_heads 8"},
      {[](Problem& p) {
         p.q_heads = 1000;
         p.kv_heads = 100;
       },
       "qkrope: q_heads + 2 * kv_heads = 1200 exceeds the limit 1024"},
      {[](Problem& p) { p.rotary_dim = 40; },
       "qkrope: rotary_dim 40 is not a multiple of 16 in 16..128 (0: head_dim)"},
      {[](Problem& p) { p.rotary_dim = 144; },
       "qkrope: rotary_dim 144 is not a multiple of 16 in 16..128 (0: head_dim)"},
      {[](Problem& p) { p.rotary_dim = -16; },
       "qkrope: rotary_dim -16 is not a multiple of 16 in 16..128 (0: head_dim)"},
      {[](Problem& p) { p.rope_theta = 0.0f; },
       "qkrope: rope_theta 0 is not a finite positive number"},
      {[](Problem& p) { p.rope_theta = std::numeric_limits<float>::infinity(); },
       "qkrope: rope_theta inf is not a finite positive number"},
      {[](Problem& p) { p.eps = 0.0f; }, "qkrope: eps 0 is not a finite positive number"},
      {[](Problem& p) { p.eps = std::numeric_limits<float>::quiet_NaN(); },
       "qkrope: eps nan is not a finite positive number"},
      {[](Problem& p) { p.page_size = 8; }, "qkrope: page_size 8 is not a power of two in 16..256"},
      {[](Problem& p) { p.page_size = 48; },
       "qkrope: page_size 48 is not a power of two in 16..256"},
      {[](Problem& p) { p.page_size = 512; },
       "qkrope: page_size 512 is not a power of two in 16..256"},
      {[](Problem& p) { p.kv_layout = static_cast<KvLayout>(2); },
       "qkrope: kv_layout 2 is not a KvLayout value (kNHD or kHND)"},
      {[](Problem& p) { p.num_pages = 0; }, "qkrope: num_pages 0 is not positive"},
      {[](Problem& p) { p.tokens = 1LL << 31; },
       "qkrope: tokens 2147483648 exceeds the limit 2147483647"},
  };
  for (const Case& c : cases) {
    Problem p = validProblem();
    c.change(p);
    Plan plan;
    const Status s = selectHost(p, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
  }
}

TEST(QkropeSelector, PointerErrorsNameThePointer) {
  struct Case {
    void (*change)(Problem&);
    const char* message;
  };
  const Case cases[] = {
      {[](Problem& p) { p.qkv = nullptr; }, "qkrope: qkv is null"},
      {[](Problem& p) { p.qkv = fakeAddress(0x10008); },
       "qkrope: pointer qkv (0x10008) is not 16-byte aligned"},
      {[](Problem& p) { p.positions = nullptr; }, "qkrope: positions is null"},
      {[](Problem& p) { p.positions = fakeAddress<const std::int64_t>(0x20004); },
       "qkrope: pointer positions (0x20004) is not 8-byte aligned"},
      {[](Problem& p) { p.slot_mapping = fakeAddress<const std::int64_t>(0x30004); },
       "qkrope: pointer slot_mapping (0x30004) is not 8-byte aligned"},
      {[](Problem& p) { p.q_norm_weight = nullptr; }, "qkrope: q_norm_weight is null"},
      {[](Problem& p) { p.k_norm_weight = fakeAddress(0x50002); },
       "qkrope: pointer k_norm_weight (0x50002) is not 16-byte aligned"},
      {[](Problem& p) { p.q_out = nullptr; }, "qkrope: q_out is null"},
      {[](Problem& p) { p.k_cache = nullptr; }, "qkrope: k_cache is null"},
      {[](Problem& p) { p.v_cache = fakeAddress(0x80010 + 8); },
       "qkrope: pointer v_cache (0x80018) is not 16-byte aligned"},
      {[](Problem& p) { p.k_out = fakeAddress(0x90001); },
       "qkrope: pointer k_out (0x90001) is not 16-byte aligned"},
      {[](Problem& p) { p.v_out = fakeAddress(0xa0002); },
       "qkrope: pointer v_out (0xa0002) is not 16-byte aligned"},
  };
  for (const Case& c : cases) {
    Problem p = validProblem();
    c.change(p);
    Plan plan;
    const Status s = selectHost(p, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_EQ(s.message(), c.message);
    // The shapes alone (workspaceSize) skip the pointers.
    EXPECT_TRUE(select(kTable, p, nullptr, &plan, PointerChecks::kSkip).ok()) << c.message;
  }
}

TEST(QkropeSelector, MissingEntryIsInternal) {
  const VariantInfo table[] = {
      {"qkrope_d128_bf16", 128, DType::kBFloat16, &fixedVariant<kNoEntry>}};
  Plan plan;
  const Status s = select(table, validProblem(), nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("has no entry kernel kiln_qkrope"), std::string::npos) << s.message();
}

Status fakeImageCheck(const kiln_variant& variant, int device_sm) {
  for (int i = 0; i < variant.num_images; ++i) {
    if (variant.images[i].sm == device_sm) return Status::Ok();
  }
  return Status(StatusCode::kNoKernelImage, std::string(variant.name) +
                                                ": artifact has sm_80, sm_90; device is sm_" +
                                                std::to_string(device_sm));
}

TEST(QkropeSelector, HostThenDeviceEqualsSelectWithDevice) {
  const DeviceQuery devices[] = {{90, &fakeImageCheck}, {87, &fakeImageCheck}};
  std::vector<Problem> problems;
  for (int head_dim : {64, 96, 128, 256}) {
    for (std::int64_t tokens : {-1, 0, 1, 4096}) {
      Problem p = validProblem(head_dim);
      p.tokens = tokens;
      problems.push_back(p);
      p.qkv = fakeAddress(0x10004);
      problems.push_back(p);
      p = validProblem(head_dim);
      p.tokens = tokens;
      p.page_size = 24;
      problems.push_back(p);
    }
  }
  for (const DeviceQuery& device : devices) {
    for (const Problem& p : problems) {
      Plan combined, staged;
      const Status one = select(kTable, p, &device, &combined);
      Status two = select(kTable, p, nullptr, &staged);
      if (two.ok()) two = checkDevice(staged, device);
      EXPECT_EQ(one.code(), two.code()) << one.toString() << " vs " << two.toString();
      EXPECT_EQ(one.message(), two.message());
    }
  }
  Plan plan;
  const Status s = select(kTable, validProblem(), &devices[1], &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_NE(s.message().find("device is sm_87"), std::string::npos) << s.message();
}

TEST(QkropeSelector, InvFreqIsHfsFp32Table) {
  // theta^0 = 1; theta 10000, rotary 128: pair 32 is 10000^-0.5 = 0.01 (rounded to fp32), pair 48
  // 10000^-0.75 = 0.001; each the fp32 reciprocal of the correctly rounded fp32 power.
  EXPECT_EQ(invFreq(10000.0f, 128, 0), 1.0f);
  EXPECT_EQ(invFreq(10000.0f, 128, 32), 1.0f / 100.0f);
  EXPECT_EQ(invFreq(10000.0f, 128, 48), 1.0f / 1000.0f);
  EXPECT_EQ(invFreq(1e6f, 64, 16), 1.0f / 1000.0f);
  // Decreasing, and within an ulp of the float64 value.
  for (int i = 1; i < 64; ++i) {
    const float f = invFreq(1e6f, 128, i);
    EXPECT_LT(f, invFreq(1e6f, 128, i - 1));
    const double exact = std::pow(1e6, -2.0 * i / 128.0);
    EXPECT_LE(std::fabs(f - exact) / exact, 2.0 * std::ldexp(1.0, -24)) << i;
  }
}

}  // namespace
}  // namespace kiln::qkrope
