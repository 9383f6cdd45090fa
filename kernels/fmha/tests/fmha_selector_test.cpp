// The fmha selector on a fake variant table: every admission error names the value and the
// limit, what is not built is listed, the launch plan and parameters match launch.h, the three
// tensor maps describe the packed [tokens, heads, head_dim] tensors within the TMA unit's limits,
// and a device other than sm_90 is refused saying that no build serves it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "fmha/launch.h"
#include "fmha/runner/selector.h"
#include "kiln/runner_support.h"
#include "support/fake_address.h"
#include "support/fixed_variant.h"

namespace kiln::fmha {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_fmha"};
const char* const kOtherEntries[] = {"kiln_fmha_other"};
// As a real artifact: one arch-specific sm_90a image.
const kiln_image kImages[] = {{90, 1, nullptr, 0, "", 0}};

const kiln_variant kD128Bf16Causal{
    "fmha_wgmma_d128_bf16_causal", "fmha", kEntries, 1, kImages, 1, 0};
const kiln_variant kD64Bf16Causal{"fmha_wgmma_d64_bf16_causal", "fmha", kEntries, 1, kImages, 1, 0};
const kiln_variant kD128Bf16Full{"fmha_wgmma_d128_bf16_full", "fmha", kEntries, 1, kImages, 1, 0};
const kiln_variant kD64Fp16Full{"fmha_wgmma_d64_fp16_full", "fmha", kEntries, 1, kImages, 1, 0};
const kiln_variant kNoEntry{"fmha_wgmma_d64_bf16_full", "fmha", kOtherEntries, 1, kImages, 1, 0};

const VariantInfo kTable[] = {
    {"fmha_wgmma_d128_bf16_causal", Kernel::kWgmma, 128, DType::kBFloat16, Mask::kCausal,
     &fixedVariant<kD128Bf16Causal>},
    {"fmha_wgmma_d64_bf16_causal", Kernel::kWgmma, 64, DType::kBFloat16, Mask::kCausal,
     &fixedVariant<kD64Bf16Causal>},
    {"fmha_wgmma_d128_bf16_full", Kernel::kWgmma, 128, DType::kBFloat16, Mask::kFull,
     &fixedVariant<kD128Bf16Full>},
    {"fmha_wgmma_d64_fp16_full", Kernel::kWgmma, 64, DType::kFloat16, Mask::kFull,
     &fixedVariant<kD64Fp16Full>},
};

using fake::fakeAddress;

// bf16, d128, causal, GQA 32/8, 4 sequences in 5000 query and 9000 key tokens, the longest 2000.
Problem validProblem() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.mask = Mask::kCausal;
  p.head_dim = 128;
  p.batch = 4;
  p.q_heads = 32;
  p.kv_heads = 8;
  p.total_q = 5000;
  p.total_k = 9000;
  p.max_seqlen_q = 2000;
  p.scale = 0.08838834764831845f;
  p.out = fakeAddress(0x10000);
  p.lse = fakeAddress<float>(0x20000);
  p.q = fakeAddress(0x30000);
  p.k = fakeAddress(0x40000);
  p.v = fakeAddress(0x50000);
  p.cu_seqlens_q = fakeAddress<const std::int32_t>(0x60000);
  p.cu_seqlens_k = fakeAddress<const std::int32_t>(0x70000);
  return p;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(FmhaSelector, PlansTheGridSharedMemoryAndParameters) {
  Plan plan;
  const Status s = select(kTable, validProblem(), nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "fmha_wgmma_d128_bf16_causal");
  EXPECT_EQ(plan.variant, &kD128Bf16Causal);
  EXPECT_FALSE(plan.no_op);
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_fmha");
  EXPECT_EQ(plan.tiles, 16 * 32 * 4);  // ceil(2000 / 128) m blocks x q heads x sequences
  EXPECT_EQ(plan.launch.grid.x, 2048u);
  EXPECT_EQ(plan.launch.grid.y, 1u);
  EXPECT_EQ(plan.launch.grid.z, 1u);
  persistentGrid(&plan, 132);  // one block per SM
  EXPECT_EQ(plan.launch.grid.x, 132u);
  persistentGrid(&plan, 4096);  // never more blocks than tiles
  EXPECT_EQ(plan.launch.grid.x, 2048u);
  EXPECT_EQ(plan.launch.block.x, static_cast<unsigned>(kThreads));
  EXPECT_EQ(plan.launch.block.x, 384u);  // producer + 2 consumer warpgroups
  EXPECT_EQ(plan.launch.block.y, 1u);
  EXPECT_EQ(plan.launch.shared_bytes, static_cast<unsigned>(sharedBytes(128, true)));
  const FmhaParams& params = plan.params;
  EXPECT_EQ(params.out, fakeAddress(0x10000));
  EXPECT_EQ(params.lse, fakeAddress<float>(0x20000));
  EXPECT_EQ(params.cu_seqlens_q, fakeAddress<const std::int32_t>(0x60000));
  EXPECT_EQ(params.cu_seqlens_k, fakeAddress<const std::int32_t>(0x70000));
  EXPECT_EQ(params.batch, 4);
  EXPECT_EQ(params.q_heads, 32);
  EXPECT_EQ(params.kv_heads, 8);
  EXPECT_EQ(params.group_size, 4);
  EXPECT_EQ(params.total_q, 5000);
  EXPECT_EQ(params.total_k, 9000);
  EXPECT_EQ(params.m_blocks, 16);
  EXPECT_FLOAT_EQ(params.scale, 0.08838834764831845f);
  EXPECT_FLOAT_EQ(params.scale_log2, 0.08838834764831845f * 1.4426950408889634f);
  // The maps are run()'s to encode: nothing in them yet.
  for (std::uint64_t word : params.tma_q.opaque) EXPECT_EQ(word, 0u);
}

TEST(FmhaSelector, TensorMapsDescribeTokenMajorTensors) {
  Plan plan;
  ASSERT_TRUE(select(kTable, validProblem(), nullptr, &plan).ok());
  const TensorMapSpec& q = plan.tma_q;
  EXPECT_EQ(q.element, TensorMapElement::kBFloat16);
  EXPECT_EQ(q.rank, 3);
  EXPECT_EQ(q.address, fakeAddress(0x30000));
  EXPECT_EQ(q.dims[0], 128u);                // head_dim
  EXPECT_EQ(q.dims[1], 5000u);               // total_q
  EXPECT_EQ(q.dims[2], 32u);                 // q_heads
  EXPECT_EQ(q.strides[0], 32u * 128u * 2u);  // one token: every head's row
  EXPECT_EQ(q.strides[1], 128u * 2u);        // one head
  EXPECT_EQ(q.box[0], static_cast<std::uint32_t>(kTmaBoxCols));
  EXPECT_EQ(q.box[0], 64u);
  EXPECT_EQ(q.box[1], static_cast<std::uint32_t>(kBlockM));
  EXPECT_EQ(q.box[2], 1u);
  EXPECT_EQ(q.swizzle, TensorMapSwizzle::k128B);
  EXPECT_EQ(q.l2_promotion, TensorMapL2Promotion::k128B);
  EXPECT_EQ(q.oob_fill, TensorMapOobFill::kZero);
  for (const TensorMapSpec* kv : {&plan.tma_k, &plan.tma_v}) {
    EXPECT_EQ(kv->element, TensorMapElement::kBFloat16);
    EXPECT_EQ(kv->rank, 3);
    EXPECT_EQ(kv->dims[0], 128u);
    EXPECT_EQ(kv->dims[1], 9000u);  // total_k
    EXPECT_EQ(kv->dims[2], 8u);     // kv_heads
    EXPECT_EQ(kv->strides[0], 8u * 128u * 2u);
    EXPECT_EQ(kv->strides[1], 128u * 2u);
    EXPECT_EQ(kv->box[0], 64u);
    EXPECT_EQ(kv->box[1], static_cast<std::uint32_t>(blockN(128, true)));
    EXPECT_EQ(kv->box[2], 1u);
    EXPECT_EQ(kv->swizzle, TensorMapSwizzle::k128B);
    EXPECT_EQ(kv->oob_fill, TensorMapOobFill::kZero);
  }
  EXPECT_EQ(plan.tma_k.address, fakeAddress(0x40000));
  EXPECT_EQ(plan.tma_v.address, fakeAddress(0x50000));
  for (const TensorMapSpec* m : {&plan.tma_q, &plan.tma_k, &plan.tma_v}) {
    EXPECT_TRUE(checkTensorMap(*m).ok()) << checkTensorMap(*m).toString();
  }
}

TEST(FmhaSelector, Fp16HeadDim64MapsAndShape) {
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  p.mask = Mask::kFull;
  p.head_dim = 64;
  p.q_heads = 8;
  p.kv_heads = 1;  // MQA
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "fmha_wgmma_d64_fp16_full");
  EXPECT_EQ(plan.launch.shared_bytes, static_cast<unsigned>(sharedBytes(64, false)));
  EXPECT_EQ(plan.params.group_size, 8);
  EXPECT_EQ(plan.tma_q.element, TensorMapElement::kFloat16);
  EXPECT_EQ(plan.tma_k.element, TensorMapElement::kFloat16);
  EXPECT_EQ(plan.tma_q.dims[0], 64u);
  EXPECT_EQ(plan.tma_q.strides[0], 8u * 64u * 2u);
  EXPECT_EQ(plan.tma_q.strides[1], 128u);
  EXPECT_EQ(plan.tma_k.dims[2], 1u);
  EXPECT_EQ(plan.tma_k.strides[0], 128u);
  EXPECT_EQ(plan.tma_k.box[1], static_cast<std::uint32_t>(blockN(64, false)));
}

TEST(FmhaSelector, ZeroMaxSeqlenMeansTotalQ) {
  Problem p = validProblem();
  p.max_seqlen_q = 0;
  Plan plan;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.m_blocks, 40);  // ceil(5000 / 128)
  EXPECT_EQ(plan.tiles, 40 * 32 * 4);
  p.max_seqlen_q = 5000;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.m_blocks, 40);
  p.max_seqlen_q = 1;  // one query per sequence: one m block
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.m_blocks, 1);
  p.max_seqlen_q = 128;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.m_blocks, 1);
  p.max_seqlen_q = 129;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.m_blocks, 2);
}

TEST(FmhaSelector, LaunchShapeFitsTheTmaAndAnSm90Block) {
  for (int d : {64, 128}) {
    for (bool causal : {false, true}) {
      EXPECT_LE(sharedBytes(d, causal), 227 * 1024) << d;  // sm_90's opt-in limit per block
      EXPECT_LE(blockN(d, causal), 256) << d;              // TMA box dims <= 256
      EXPECT_EQ(blockN(d, causal) % 16, 0) << d;           // whole k16 steps of P V
    }
    EXPECT_EQ(d % kTmaBoxCols, 0) << d;  // whole boxes along head_dim
  }
  EXPECT_LE(kBlockM, 256);
  EXPECT_EQ(kTmaBoxCols * kElementBytes, 128);  // one box row is the 128-byte swizzle span
}

TEST(FmhaSelector, UnbuiltHeadDimNamesWhatIsBuiltForThatDtypeAndMask) {
  Problem p = validProblem();
  p.head_dim = 96;
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(),
            "fmha: head_dim 96 is not built for bf16 causal; built for bf16 causal: 64, 128");
  p.mask = Mask::kFull;
  const Status full = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(full.message(),
            "fmha: head_dim 96 is not built for bf16 full; built for bf16 full: 128");
}

TEST(FmhaSelector, UnbuiltMaskNamesTheBuiltMasks) {
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  p.head_dim = 64;
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "fmha: mask causal is not built for fp16; built for fp16: full");
}

TEST(FmhaSelector, UnbuiltDtypeNamesBuiltDtypes) {
  const VariantInfo bf16_only[] = {{"fmha_wgmma_d128_bf16_causal", Kernel::kWgmma, 128,
                                    DType::kBFloat16, Mask::kCausal,
                                    &fixedVariant<kD128Bf16Causal>}};
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  Plan plan;
  const Status s = select(bf16_only, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "fmha: dtype fp16 is not built; built dtypes: bf16");
  const Status none = select(std::span<const VariantInfo>{}, p, nullptr, &plan);
  EXPECT_EQ(none.message(), "fmha: dtype fp16 is not built; built dtypes: none");
}

TEST(FmhaSelector, OutOfRangeEnums) {
  Problem p = validProblem();
  p.dtype = static_cast<DType>(7);
  Plan plan;
  Status s = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "fmha: dtype 7 is not a DType value (fp16, bf16 or fp32)");
  p = validProblem();
  p.mask = static_cast<Mask>(3);
  s = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "fmha: mask 3 is not a Mask value (full or causal)");
}

TEST(FmhaSelector, MissingEntryOrVariantTableIsInternal) {
  const VariantInfo no_entry[] = {{"fmha_wgmma_d64_bf16_full", Kernel::kWgmma, 64, DType::kBFloat16,
                                   Mask::kFull, &fixedVariant<kNoEntry>}};
  Problem p = validProblem();
  p.mask = Mask::kFull;
  p.head_dim = 64;
  Plan plan;
  Status s = select(no_entry, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "fmha: variant fmha_wgmma_d64_bf16_full has no entry kernel kiln_fmha");
  const VariantInfo no_table[] = {
      {"fmha_wgmma_d64_bf16_full", Kernel::kWgmma, 64, DType::kBFloat16, Mask::kFull, nullptr}};
  s = select(no_table, p, nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(contains(s.message(), "has no variant table")) << s.message();
}

TEST(FmhaSelector, ZeroBatchIsANoOpWithoutShapesOrPointers) {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.mask = Mask::kCausal;
  p.head_dim = 128;
  p.batch = 0;  // nothing else set: heads, sizes, scale and pointers are not checked
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(plan.no_op);
  // Still only for a built variant.
  p.head_dim = 80;
  EXPECT_EQ(select(kTable, p, nullptr, &plan).code(), StatusCode::kNotSupported);
}

TEST(FmhaSelector, LseIsOptional) {
  Problem p = validProblem();
  p.lse = nullptr;
  Plan plan;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.lse, nullptr);
}

struct BadCase {
  const char* what;
  void (*mutate)(Problem&);
  const char* message;  // the whole message
};

TEST(FmhaSelector, InvalidProblemsNameTheValueAndTheLimit) {
  const BadCase cases[] = {
      {"negative batch", [](Problem& p) { p.batch = -1; }, "fmha: batch -1 is negative"},
      {"zero kv heads", [](Problem& p) { p.kv_heads = 0; }, "fmha: kv_heads 0 is not positive"},
      {"ratio", [](Problem& p) { p.q_heads = 30; },
       "fmha: q_heads 30 is not a positive multiple of kv_heads 8"},
      {"zero q heads", [](Problem& p) { p.q_heads = 0; },
       "fmha: q_heads 0 is not a positive multiple of kv_heads 8"},
      {"negative q heads", [](Problem& p) { p.q_heads = -8; },
       "fmha: q_heads -8 is not a positive multiple of kv_heads 8"},
      {"zero total_q", [](Problem& p) { p.total_q = 0; }, "fmha: total_q 0 is not positive"},
      {"zero total_k", [](Problem& p) { p.total_k = 0; }, "fmha: total_k 0 is not positive"},
      {"negative total_k", [](Problem& p) { p.total_k = -3; }, "fmha: total_k -3 is not positive"},
      {"negative max_seqlen_q", [](Problem& p) { p.max_seqlen_q = -1; },
       "fmha: max_seqlen_q -1 is not in 0..total_q (5000)"},
      {"max_seqlen_q past total_q", [](Problem& p) { p.max_seqlen_q = 5001; },
       "fmha: max_seqlen_q 5001 is not in 0..total_q (5000)"},
      {"scale nan", [](Problem& p) { p.scale = std::numeric_limits<float>::quiet_NaN(); },
       "fmha: scale nan is not finite"},
      {"scale inf", [](Problem& p) { p.scale = std::numeric_limits<float>::infinity(); },
       "fmha: scale inf is not finite"},
      {"scale zero", [](Problem& p) { p.scale = 0.0f; }, "fmha: scale 0.000000 is not positive"},
      {"scale negative", [](Problem& p) { p.scale = -0.5f; },
       "fmha: scale -0.500000 is not positive"},
      {"null q", [](Problem& p) { p.q = nullptr; }, "fmha: q is null"},
      {"null k", [](Problem& p) { p.k = nullptr; }, "fmha: k is null"},
      {"null v", [](Problem& p) { p.v = nullptr; }, "fmha: v is null"},
      {"null out", [](Problem& p) { p.out = nullptr; }, "fmha: out is null"},
      {"null cu_seqlens_q", [](Problem& p) { p.cu_seqlens_q = nullptr; },
       "fmha: cu_seqlens_q is null"},
      {"null cu_seqlens_k", [](Problem& p) { p.cu_seqlens_k = nullptr; },
       "fmha: cu_seqlens_k is null"},
      {"misaligned q", [](Problem& p) { p.q = fakeAddress(0x30008); },
       "fmha: pointer q (0x30008) is not 16-byte aligned"},
      {"misaligned k", [](Problem& p) { p.k = fakeAddress(0x40002); },
       "fmha: pointer k (0x40002) is not 16-byte aligned"},
      {"misaligned v", [](Problem& p) { p.v = fakeAddress(0x50004); },
       "fmha: pointer v (0x50004) is not 16-byte aligned"},
      {"misaligned out", [](Problem& p) { p.out = fakeAddress(0x10001); },
       "fmha: pointer out (0x10001) is not 16-byte aligned"},
      {"misaligned cu_seqlens_q",
       [](Problem& p) { p.cu_seqlens_q = fakeAddress<const std::int32_t>(0x60002); },
       "fmha: pointer cu_seqlens_q (0x60002) is not 4-byte aligned"},
      {"misaligned cu_seqlens_k",
       [](Problem& p) { p.cu_seqlens_k = fakeAddress<const std::int32_t>(0x70001); },
       "fmha: pointer cu_seqlens_k (0x70001) is not 4-byte aligned"},
      {"misaligned lse", [](Problem& p) { p.lse = fakeAddress<float>(0x20002); },
       "fmha: pointer lse (0x20002) is not 4-byte aligned"},
      {"q heads grid",
       [](Problem& p) {
         p.q_heads = 65536;
         p.kv_heads = 1;
       },
       "fmha: q_heads 65536 exceeds the limit 65535"},
      {"batch grid", [](Problem& p) { p.batch = 65536; },
       "fmha: batch 65536 exceeds the limit 65535"},
  };
  for (const BadCase& c : cases) {
    Problem p = validProblem();
    c.mutate(p);
    Plan plan;
    const Status s = select(kTable, p, nullptr, &plan);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what << ": " << s.toString();
    EXPECT_EQ(s.message(), c.message) << c.what;
  }
}

TEST(FmhaSelector, LargestAdmittedShapesStayWithinTheTmaLimits) {
  Problem p = validProblem();
  p.q_heads = 65535;
  p.kv_heads = 65535;
  p.total_q = std::numeric_limits<int>::max();
  p.total_k = std::numeric_limits<int>::max();
  p.max_seqlen_q = 32768 * 128;  // 32768 m blocks x 65535 heads: the most tiles an int indexes
  p.batch = 1;
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.params.m_blocks, 32768);
  EXPECT_EQ(plan.tiles, 32768 * 65535);
  EXPECT_EQ(plan.tma_q.strides[0], 65535u * 128u * 2u);
  EXPECT_EQ(plan.tma_k.dims[1], 2147483647u);
  p.max_seqlen_q += 1;  // one more m block
  const Status over = select(kTable, p, nullptr, &plan);
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(over.message(),
            "fmha: ceil(max_seqlen_q / 128) * q_heads * batch = 2147516415 tiles exceeds the limit "
            "2147483647");
}

// kiln.toml's supported_sms, as the generated kSupportedSms hands them to the device query.
constexpr int kFmhaSms[] = {90};

// The real image check (kiln::selectImage through runner::checkImage) against the artifact's
// sm_90a image: an sm_87 or sm_100 device is told what the artifact has and that no build serves
// it; sm_90 runs.
TEST(FmhaSelector, OnlySm90IsServedAndTheMessageSaysSo) {
  Plan plan;
  const DeviceQuery orin{87, &runner::checkImage, kFmhaSms};
  Status s = select(kTable, validProblem(), &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(),
            "fmha_wgmma_d128_bf16_causal: artifact has sm_90a only; device is sm_87; the fmha "
            "wgmma kernel (TMA, wgmma) runs on sm_90 only");
  const DeviceQuery blackwell{100, &runner::checkImage, kFmhaSms};
  s = select(kTable, validProblem(), &blackwell, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_TRUE(
      contains(s.message(), "device is sm_100; the fmha wgmma kernel (TMA, wgmma) runs on sm_90"))
      << s.message();
  const DeviceQuery h200{90, &runner::checkImage, kFmhaSms};
  s = select(kTable, validProblem(), &h200, &plan);
  EXPECT_TRUE(s.ok()) << s.toString();
  // The zero-batch no-op is still refused on a device that cannot run the group.
  Problem empty = validProblem();
  empty.batch = 0;
  EXPECT_EQ(select(kTable, empty, &orin, &plan).code(), StatusCode::kNoKernelImage);
  EXPECT_TRUE(select(kTable, empty, &h200, &plan).ok());
}

// Even an image check that passed (a table whose image claims another SM) does not make another
// SM run the wgmma kernels; on sm_90 the check's own verdict stands.
TEST(FmhaSelector, DeviceCheckRefusesOtherSmsWhateverTheImageCheckSays) {
  int calls = 0;
  const DeviceQuery lenient{89,
                            [&](const kiln_variant&, int) {
                              ++calls;
                              return Status::Ok();
                            },
                            kFmhaSms};
  Plan plan;
  Status s = select(kTable, validProblem(), &lenient, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(),
            "fmha_wgmma_d128_bf16_causal: device is sm_89; the fmha wgmma kernel (TMA, wgmma) runs "
            "on sm_90 only");
  EXPECT_EQ(calls, 1);
  const DeviceQuery missing{90,
                            [&](const kiln_variant& v, int sm) {
                              ++calls;
                              return Status(StatusCode::kNoKernelImage,
                                            std::string(v.name) +
                                                ": artifact has no images; "
                                                "device is sm_" +
                                                std::to_string(sm));
                            },
                            kFmhaSms};
  s = select(kTable, validProblem(), &missing, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(), "fmha_wgmma_d128_bf16_causal: artifact has no images; device is sm_90");
  // A bad SM number is the image check's own error, not "runs on sm_90 only".
  const DeviceQuery nonsense{0, &runner::checkImage, kFmhaSms};
  s = select(kTable, validProblem(), &nonsense, &plan);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().find("runs on sm_90"), std::string::npos) << s.message();
}

TEST(FmhaSelector, DeviceCheckComesLast) {
  int calls = 0;
  const DeviceQuery device{90, [&](const kiln_variant&, int) {
                             ++calls;
                             return Status::Ok();
                           }};
  Plan plan;
  Problem bad = validProblem();
  bad.k = nullptr;
  EXPECT_EQ(select(kTable, bad, &device, &plan).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(select(kTable, validProblem(), &device, &plan).ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(checkDevice(Plan{}, device).code(), StatusCode::kInternal);
  EXPECT_EQ(checkDevice(plan, DeviceQuery{90, nullptr}).code(), StatusCode::kInternal);
}

// With pointer checks skipped (sizing before the tensors exist), null pointers pass and the maps
// are still described; admission proper refuses them.
TEST(FmhaSelector, SkippedPointerChecksAdmitNullTensors) {
  Problem p = validProblem();
  p.q = nullptr;
  p.out = nullptr;
  p.cu_seqlens_k = nullptr;
  Plan plan;
  const Status s = select(kTable, p, nullptr, &plan, PointerChecks::kSkip);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.tma_q.address, nullptr);
  EXPECT_EQ(plan.tma_q.dims[1], 5000u);
  EXPECT_EQ(select(kTable, p, nullptr, &plan).message(), "fmha: q is null");
}

// ---- both kernels ----------------------------------------------------------------------------

const char* const kMmaEntries[] = {"kiln_fmha_mma", "kiln_fmha_mma_rows64"};
// As the release artifact for Ampere to Hopper: mma images for sm_80 and sm_90.
const kiln_image kMmaImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};
const kiln_variant kMmaD128Bf16Causal{
    "fmha_mma_d128_bf16_causal", "fmha", kMmaEntries, 2, kMmaImages, 2, 0};
const kiln_variant kMmaD256Bf16Causal{
    "fmha_mma_d256_bf16_causal", "fmha", kMmaEntries, 2, kMmaImages, 2, 0};
const VariantInfo kBothTable[] = {
    {"fmha_mma_d128_bf16_causal", Kernel::kMma, 128, DType::kBFloat16, Mask::kCausal,
     &fixedVariant<kMmaD128Bf16Causal>},
    {"fmha_mma_d256_bf16_causal", Kernel::kMma, 256, DType::kBFloat16, Mask::kCausal,
     &fixedVariant<kMmaD256Bf16Causal>},
    {"fmha_wgmma_d128_bf16_causal", Kernel::kWgmma, 128, DType::kBFloat16, Mask::kCausal,
     &fixedVariant<kD128Bf16Causal>},
    {"fmha_wgmma_d128_bf16_full", Kernel::kWgmma, 128, DType::kBFloat16, Mask::kFull,
     &fixedVariant<kD128Bf16Full>},
};
constexpr int kAllSms[] = {80, 86, 87, 89, 90, 100, 110, 120};

Problem pagedProblem() {
  Problem p = validProblem();
  p.total_k = 0;
  p.cu_seqlens_k = nullptr;
  p.page_table = fakeAddress<const std::int32_t>(0x80000);
  p.seq_lens_k = fakeAddress<const std::int32_t>(0x90000);
  p.page_size = 16;
  p.max_pages_per_seq = 300;
  p.num_pages = 5000;
  return p;
}

// wgmma where it implements the problem and runs on the device (windows included); mma for paged
// K / V, head dim 256, other SMs, or when asked for.
TEST(FmhaSelector, PicksWgmmaWhereItServesAndMmaOtherwise) {
  Plan plan;
  const DeviceQuery h100{90, &runner::checkImage, kAllSms};
  const DeviceQuery orin{87, &runner::checkImage, kAllSms};
  ASSERT_TRUE(select(kBothTable, validProblem(), &h100, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kWgmma);
  ASSERT_TRUE(select(kBothTable, validProblem(), nullptr, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kWgmma);  // no device: the kernel sm_90 would run
  ASSERT_TRUE(select(kBothTable, validProblem(), &orin, &plan).ok());
  EXPECT_STREQ(plan.info->name, "fmha_mma_d128_bf16_causal");
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_fmha_mma");
  // run()'s path: planned without a device (wgmma), then for the sm_87 device.
  ASSERT_TRUE(select(kBothTable, validProblem(), nullptr, &plan).ok());
  ASSERT_TRUE(planForDevice(kBothTable, validProblem(), orin, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kMma);
  EXPECT_EQ(plan.launch.grid.x, (2000u * 4 + 127) / 128);  // max_seqlen_q x group 4, 128 a block
  EXPECT_EQ(plan.launch.block.x, 128u);                    // 4 warps of 32 rows
  EXPECT_EQ(plan.launch.grid.y, 8u);
  EXPECT_EQ(plan.launch.grid.z, 4u);
  Problem window = validProblem();
  window.window_left = 4096;
  ASSERT_TRUE(select(kBothTable, window, &h100, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kWgmma);  // both kernels skip the tiles left of the window
  EXPECT_EQ(plan.params.window_left, 4096);
  ASSERT_TRUE(select(kBothTable, window, &orin, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kMma);
  EXPECT_EQ(plan.mma_params.window_left, 4096);
  ASSERT_TRUE(select(kBothTable, pagedProblem(), &h100, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kMma);
  Problem d256 = validProblem();
  d256.head_dim = 256;
  ASSERT_TRUE(select(kBothTable, d256, &h100, &plan).ok());
  EXPECT_STREQ(plan.info->name, "fmha_mma_d256_bf16_causal");
  EXPECT_EQ(plan.launch.shared_bytes, static_cast<unsigned>(mma::sharedBytes(256, mma::kSmall)));
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_fmha_mma_rows64");  // d256: 4 warps
  Problem pinned = validProblem();
  pinned.kernel = Kernel::kMma;
  ASSERT_TRUE(select(kBothTable, pinned, &h100, &plan).ok());
  EXPECT_EQ(plan.info->kernel, Kernel::kMma);
  // The zero-batch no-op follows the same choice.
  Problem empty = validProblem();
  empty.batch = 0;
  ASSERT_TRUE(select(kBothTable, empty, &orin, &plan).ok());
  EXPECT_TRUE(plan.no_op);
  EXPECT_EQ(plan.info->kernel, Kernel::kMma);
}

// At most 64 rows per (sequence, KV head), verification-sized, take the 4-warp entry.
TEST(FmhaSelector, SmallProblemsTakeTheRows64Entry) {
  Plan plan;
  Problem p = pagedProblem();
  p.max_seqlen_q = 16;  // x group 4 = 64 rows
  ASSERT_TRUE(select(kBothTable, p, nullptr, &plan).ok());
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_fmha_mma_rows64");
  EXPECT_EQ(plan.launch.grid.x, 1u);
  EXPECT_EQ(plan.launch.block.x, 128u);
  EXPECT_EQ(plan.launch.shared_bytes, static_cast<unsigned>(mma::sharedBytes(128, mma::kSmall)));
  EXPECT_EQ(plan.mma_params.m_blocks, 1);
  p.max_seqlen_q = 17;  // 68 rows: the 128-row prefill blocks (4 warps of 32 rows)
  ASSERT_TRUE(select(kBothTable, p, nullptr, &plan).ok());
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_fmha_mma");
  EXPECT_EQ(plan.launch.block.x, 128u);
  EXPECT_EQ(plan.launch.shared_bytes,
            static_cast<unsigned>(mma::sharedBytes(128, mma::prefillShape(128))));
  EXPECT_EQ(plan.mma_params.m_blocks, 1);
}

TEST(FmhaSelector, PagedStridesFollowTheLayout) {
  Plan plan;
  Problem p = pagedProblem();
  ASSERT_TRUE(select(kBothTable, p, nullptr, &plan).ok());
  const FmhaMmaParams& nhd = plan.mma_params;
  EXPECT_EQ(nhd.page_size_log2, 4);
  EXPECT_EQ(nhd.page_stride, 16 * 8 * 128);
  EXPECT_EQ(nhd.token_stride, 8 * 128);  // NHD: a key row holds every KV head
  EXPECT_EQ(nhd.head_stride, 128);
  EXPECT_EQ(nhd.seq_lens_k, p.seq_lens_k);
  EXPECT_EQ(nhd.cu_seqlens_k, nullptr);
  EXPECT_EQ(nhd.max_pages_per_seq, 300);
  EXPECT_EQ(nhd.num_pages, 5000);
  p.kv_layout = KvLayout::kHnd;
  ASSERT_TRUE(select(kBothTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.mma_params.token_stride, 128);  // HND: a head's keys are adjacent
  EXPECT_EQ(plan.mma_params.head_stride, 16 * 128);
  EXPECT_EQ(plan.mma_params.page_stride, 16 * 8 * 128);
}

TEST(FmhaSelector, WindowAndPagedErrorsNameTheValueAndTheLimit) {
  Plan plan;
  auto expectRefused = [&](const Problem& p, StatusCode code, const std::string& message) {
    const Status s = select(kBothTable, p, nullptr, &plan);
    EXPECT_EQ(s.code(), code) << s.toString();
    EXPECT_EQ(s.message(), message);
  };
  Problem p = validProblem();
  p.window_left = -2;
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: window_left -2 is negative (-1: no window)");
  p.mask = Mask::kFull;
  p.window_left = 64;
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: window_left 64 needs the causal mask (the window is the causal mask's left "
                "edge)");
  for (const int size : {0, 8, 48, 512}) {
    p = pagedProblem();
    p.page_size = size;
    expectRefused(p, StatusCode::kInvalidArgument,
                  "fmha: page_size " + std::to_string(size) + " is not a power of two in 16..256");
  }
  p = pagedProblem();
  p.total_k = 9000;
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: total_k 9000 and cu_seqlens_k must be 0 and null with paged K / V "
                "(page_table set): sequence b has seq_lens_k[b] keys");
  p = pagedProblem();
  p.max_pages_per_seq = 0;
  expectRefused(p, StatusCode::kInvalidArgument, "fmha: max_pages_per_seq 0 is not positive");
  p = pagedProblem();
  p.num_pages = 0;
  expectRefused(p, StatusCode::kInvalidArgument, "fmha: num_pages 0 is not positive");
  p = pagedProblem();
  p.page_size = 256;
  p.max_pages_per_seq = 8388608;
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: max_pages_per_seq * page_size = 2147483648 keys exceeds the limit "
                "2147483647");
  p = pagedProblem();
  p.seq_lens_k = nullptr;
  expectRefused(p, StatusCode::kInvalidArgument, "fmha: seq_lens_k is null");
  p = pagedProblem();
  p.kv_layout = static_cast<KvLayout>(7);
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: kv_layout 7 is not a KvLayout value (NHD or HND)");
  p = validProblem();
  p.kernel = static_cast<Kernel>(5);
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: kernel 5 is not a Kernel value (wgmma or mma)");
  p = validProblem();
  p.head_dim = 256;
  p.kernel = Kernel::kWgmma;
  expectRefused(p, StatusCode::kNotSupported,
                "fmha: kernel wgmma is not built for head_dim 256 bf16 causal; built: "
                "fmha_mma_d256_bf16_causal");
  p = pagedProblem();
  p.kernel = Kernel::kWgmma;
  expectRefused(p, StatusCode::kNotSupported,
                "fmha: page_table: paged K / V needs the mma kernel (kernel wgmma was asked for)");
  p = validProblem();  // GQA 4: 600M tokens x 4 rows overflow the packed row index
  p.total_q = 600000000;
  p.max_seqlen_q = 2000;
  p.kernel = Kernel::kMma;
  expectRefused(p, StatusCode::kInvalidArgument,
                "fmha: total_q * (q_heads / kv_heads) = 2400000000 packed rows exceeds the limit "
                "2147483647");
}

// A table with wgmma only (the sm_90 artifact before the mma kernel, or a trimmed one): what only
// mma implements is refused naming the missing variant; a window wgmma serves itself.
TEST(FmhaSelector, WithoutMmaPagesAreNotSupported) {
  Plan plan;
  Problem p = validProblem();
  p.window_left = 10;
  EXPECT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.window_left, 10);
  Status s = select(kTable, pagedProblem(), nullptr, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(),
            "fmha: page_table: paged K / V needs the mma kernel; fmha_mma_d128_bf16_causal is not "
            "built (the wgmma kernel has no such mode)");
}

}  // namespace
}  // namespace kiln::fmha
