// The gdn selector on a fake variant table: admission errors name the value and the limit, the
// launch plan matches launch.h, and a no-op batch touches nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "gdn/launch.h"
#include "gdn/selector.h"

namespace kiln::gdn {
namespace {

const char* const kEntries[] = {"kiln_gdn_decode"};
const kiln_image kImages[] = {{90, 0, nullptr, 0, ""}};
const kiln_variant kBf16{"gdn_decode_dk128_dv128_bf16", "gdn", kEntries, 1, kImages, 1};
const kiln_variant* bf16() { return &kBf16; }
const VariantInfo kTable[] = {{"gdn_decode_dk128_dv128_bf16", 128, 128, 32, "bf16", &bf16}};

alignas(16) unsigned char kBuffer[256];

Problem valid() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.batch = 8;
  p.heads_qk = 16;
  p.heads_v = 32;
  p.num_slots = 64;
  p.scale = 1.0f / std::sqrt(128.0f);
  p.q = p.k = p.v = kBuffer;
  p.out = kBuffer;
  p.state = reinterpret_cast<float*>(kBuffer);
  p.g = p.beta = reinterpret_cast<const float*>(kBuffer);
  p.slots = reinterpret_cast<const std::int32_t*>(kBuffer);
  return p;
}

TEST(GdnSelector, PlansTheLaunchFromTheBakedConstants) {
  Plan plan;
  ASSERT_TRUE(select(kTable, valid(), nullptr, &plan).ok());
  EXPECT_EQ(plan.info, &kTable[0]);
  EXPECT_EQ(plan.entry, 0);
  EXPECT_EQ(plan.config.grid.x, 4u);  // 128 / 32
  EXPECT_EQ(plan.config.grid.y, 32u);
  EXPECT_EQ(plan.config.grid.z, 8u);
  EXPECT_EQ(plan.config.block.x, 32u);
  EXPECT_EQ(plan.config.shared_bytes, 0u);
  EXPECT_EQ(plan.args.heads_v, 32);
}

TEST(GdnSelector, ErrorsNameTheValueAndTheLimit) {
  Plan plan;
  Problem p = valid();
  p.dtype = DType::kFloat16;
  Status s = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("head dims 128x128 are not built for fp16; built (d_k x d_v dtype): 128x128 bf16"),
            std::string::npos) << s.message();
  p = valid();
  p.head_dim_k = 64;
  EXPECT_NE(select(kTable, p, nullptr, &plan).message().find("head dims 64x128"), std::string::npos);
  p = valid();
  p.heads_v = 24;
  p.heads_qk = 16;
  EXPECT_NE(select(kTable, p, nullptr, &plan).message().find("heads_v 24 must be a multiple of heads_qk 16"),
            std::string::npos);
  p = valid();
  p.q = kBuffer + 4;
  {
    const std::string message = select(kTable, p, nullptr, &plan).message();
    EXPECT_EQ(message.rfind("gdn: pointer q (0x", 0), 0u) << message;  // names the address
    EXPECT_NE(message.find(") is not 16-byte aligned"), std::string::npos) << message;
  }
  p = valid();
  p.scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(select(kTable, p, nullptr, &plan).message().find("scale is not finite"), std::string::npos);
  p = valid();
  p.batch = 70000;
  EXPECT_NE(select(kTable, p, nullptr, &plan).message().find("must each be <= 65535"), std::string::npos);
}

TEST(GdnSelector, EmptyBatchIsANoOpWithoutPointers) {
  Problem p;
  p.batch = 0;
  p.heads_qk = 1;
  p.heads_v = 1;
  Plan plan;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_TRUE(plan.no_op);
}

TEST(GdnSelector, DeviceCheckIsTheLastStep) {
  const DeviceQuery device{87, [](const kiln_variant&, int sm) {
                             return Status(StatusCode::kNoKernelImage,
                                           "artifact has sm_90 only; device is sm_" + std::to_string(sm));
                           }};
  Plan plan;
  Status s = select(kTable, valid(), &device, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_NE(s.message().find("device is sm_87"), std::string::npos);
}

}  // namespace
}  // namespace kiln::gdn
