// The decoderops selector on a fake variant table: the launch plans of the three problems match
// launch.h, every admission error names the value and the limit (the full message), a no-op
// checks nothing but the variant, and canImplement and run share the answer.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "decoderops/launch.h"
#include "decoderops/params.h"
#include "decoderops/runner/selector.h"
#include "support/fake_address.h"
#include "support/fixed_variant.h"

namespace kiln::decoderops {
namespace {

using kiln::fake::fixedVariant;

const char* const kEntries[] = {"kiln_embed", "kiln_silu_mul", "kiln_argmax"};
const char* const kNoArgmax[] = {"kiln_embed", "kiln_silu_mul"};
const kiln_image kImages[] = {{80, 0, nullptr, 0, "", 0}, {90, 0, nullptr, 0, "", 0}};

const kiln_variant kFp16{"decoderops_fp16", "decoderops", kEntries, 3, kImages, 2, 0};
const kiln_variant kBf16{"decoderops_bf16", "decoderops", kEntries, 3, kImages, 2, 0};
const kiln_variant kFp32{"decoderops_fp32", "decoderops", kEntries, 3, kImages, 2, 0};
const kiln_variant kBf16NoArgmax{"decoderops_bf16", "decoderops", kNoArgmax, 2, kImages, 2, 0};

const VariantInfo kTable[] = {
    {"decoderops_fp16", DType::kFloat16, &fixedVariant<kFp16>},
    {"decoderops_bf16", DType::kBFloat16, &fixedVariant<kBf16>},
    {"decoderops_fp32", DType::kFloat32, &fixedVariant<kFp32>},
};
// An artifact built without fp32.
const VariantInfo kNo32[] = {
    {"decoderops_fp16", DType::kFloat16, &fixedVariant<kFp16>},
    {"decoderops_bf16", DType::kBFloat16, &fixedVariant<kBf16>},
};

using fake::fakeAddress;

// Qwen3-8B's prefill of 4096 tokens: the embedding of vocab 151936 x hidden 4096 in bf16.
EmbedProblem embedProblem() {
  EmbedProblem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 4096;
  p.rows = 151936;
  p.width = 4096;
  p.ids = fakeAddress<const std::int32_t>(0x10000);
  p.table = fakeAddress(0x100000000);
  p.out = fakeAddress(0x200000000);
  return p;
}

// Qwen3-8B's MLP activation at 64 tokens: intermediate 12288.
SiluMulProblem siluProblem() {
  SiluMulProblem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 64;
  p.width = 12288;
  p.in = fakeAddress(0x100000000);
  p.out = fakeAddress(0x200000000);
  return p;
}

// Greedy sampling of 64 rows of Qwen3's vocab 151936 in fp32.
ArgmaxProblem argmaxProblem() {
  ArgmaxProblem p;
  p.dtype = DType::kFloat32;
  p.rows = 64;
  p.width = 151936;
  p.x = fakeAddress(0x100000000);
  p.out = fakeAddress<std::int32_t>(0x20000);
  return p;
}

template <typename Problem>
Status selectHost(const Problem& p) {
  if constexpr (std::is_same_v<Problem, EmbedProblem>) {
    EmbedPlan plan;
    return select(kTable, p, nullptr, &plan);
  } else if constexpr (std::is_same_v<Problem, SiluMulProblem>) {
    SiluMulPlan plan;
    return select(kTable, p, nullptr, &plan);
  } else {
    ArgmaxPlan plan;
    return select(kTable, p, nullptr, &plan);
  }
}

TEST(DecoderopsSelector, EmbedPlansOneBlockPerTokenChunk) {
  const EmbedProblem p = embedProblem();
  EmbedPlan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.info->name, "decoderops_bf16");
  EXPECT_FALSE(plan.no_op);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_embed");
  // 4096 bf16 = 512 vectors: one chunk of 128 threads x 4 vectors per token.
  EXPECT_EQ(plan.config.grid.x, 4096u);
  EXPECT_EQ(plan.config.grid.y, 1u);
  EXPECT_EQ(plan.config.grid.z, 1u);
  EXPECT_EQ(plan.config.block.x, 128u);
  EXPECT_EQ(plan.config.block.y, 1u);
  EXPECT_EQ(plan.config.shared_bytes, 0u);
  EXPECT_EQ(plan.params.out, p.out);
  EXPECT_EQ(plan.params.table, p.table);
  EXPECT_EQ(plan.params.ids, p.ids);
  EXPECT_EQ(plan.params.rows, 151936);
  EXPECT_EQ(plan.params.row_vectors, 512);
  EXPECT_EQ(plan.params.chunks, 1);

  EmbedProblem f = p;  // fp32: 1024 vectors, two chunks
  f.dtype = DType::kFloat32;
  ASSERT_TRUE(select(kTable, f, nullptr, &plan).ok());
  EXPECT_STREQ(plan.info->name, "decoderops_fp32");
  EXPECT_EQ(plan.params.row_vectors, 1024);
  EXPECT_EQ(plan.params.chunks, 2);
  EXPECT_EQ(plan.config.grid.y, 2u);
  f.width = 8;  // the smallest row: one vector of fp16, two of fp32
  ASSERT_TRUE(select(kTable, f, nullptr, &plan).ok());
  EXPECT_EQ(plan.params.row_vectors, 2);
  EXPECT_EQ(plan.params.chunks, 1);
}

TEST(DecoderopsSelector, EmbedRowsZeroAndBeyondInt32AreAdmitted) {
  // No row: every id writes zeros. More rows than an int32 id can name: the kernel reads only
  // the rows the ids name.
  for (std::int64_t rows : {std::int64_t{0}, std::int64_t{1} << 40}) {
    EmbedProblem p = embedProblem();
    p.rows = rows;
    p.width = 8;
    p.out = fakeAddress(0x20000000);  // below the table, whose 2^44 bytes reach far above it
    EmbedPlan plan;
    const Status s = select(kTable, p, nullptr, &plan);
    ASSERT_TRUE(s.ok()) << rows << ": " << s.toString();
    EXPECT_EQ(plan.params.rows, rows);
  }
}

TEST(DecoderopsSelector, SiluMulPlansChunksOfTheOutputRow) {
  const SiluMulProblem p = siluProblem();
  SiluMulPlan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_silu_mul");
  EXPECT_EQ(plan.config.grid.x, 64u);
  EXPECT_EQ(plan.config.grid.y, 3u);  // 12288 bf16 = 1536 vectors = 3 chunks of 512
  EXPECT_EQ(plan.config.block.x, 128u);
  EXPECT_EQ(plan.params.in, p.in);
  EXPECT_EQ(plan.params.out, p.out);
  EXPECT_EQ(plan.params.row_vectors, 1536);
  EXPECT_EQ(plan.params.chunks, 3);
  EXPECT_FALSE(plan.no_op);
}

TEST(DecoderopsSelector, WideRowsLoopOverChunksPastGridY) {
  // 2^31 - 8 bf16 = 268435455 vectors = 524288 chunks: grid.y stops at 65535 and the blocks loop.
  SiluMulProblem p = siluProblem();
  p.tokens = 1;
  p.width = 2147483640;
  p.out = fakeAddress(0x1000000000);  // past in's 8 GiB
  SiluMulPlan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(plan.params.row_vectors, 268435455);
  EXPECT_EQ(plan.params.chunks, 524288);
  EXPECT_EQ(plan.config.grid.y, 65535u);
  EXPECT_EQ(gridChunks(512), 1);
  EXPECT_EQ(gridChunks(513), 2);
  EXPECT_EQ(chunksOf(1), 1);
  EXPECT_EQ(chunksOf(kChunkVectors * 65535LL + 1), 65536);
  EXPECT_EQ(gridChunks(kChunkVectors * 65535LL + 1), 65535);
}

TEST(DecoderopsSelector, ArgmaxPlansOneBlockPerRowSizedByTheRow) {
  const ArgmaxProblem p = argmaxProblem();
  ArgmaxPlan plan;
  const Status s = select(kTable, p, nullptr, &plan);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_STREQ(plan.variant->entries[plan.entry], "kiln_argmax");
  EXPECT_STREQ(plan.info->name, "decoderops_fp32");
  EXPECT_EQ(plan.config.grid.x, 64u);
  EXPECT_EQ(plan.config.grid.y, 1u);
  EXPECT_EQ(plan.config.block.x, 1024u);
  EXPECT_EQ(plan.params.x, p.x);
  EXPECT_EQ(plan.params.out, p.out);
  EXPECT_EQ(plan.params.width, 151936);

  struct Row {
    DType dtype;
    std::int64_t width;
    unsigned threads;
  };
  const Row rows[] = {
      {DType::kFloat16, 1, 32},         // one element: a warp
      {DType::kBFloat16, 7, 32},        // 14 bytes, one partial vector
      {DType::kFloat32, 1024, 64},      // 256 vectors: 2 warps of 4 x 32
      {DType::kBFloat16, 32000, 1024},  // 4000 vectors: 32 warps
      {DType::kFloat16, 4097, 160},     // 513 vectors (rounded up): 5 warps
      {DType::kFloat32, 2147483647, 1024},
  };
  for (const Row& r : rows) {
    ArgmaxProblem q = argmaxProblem();
    q.dtype = r.dtype;
    q.width = r.width;
    q.rows = 1;
    const Status st = select(kTable, q, nullptr, &plan);
    ASSERT_TRUE(st.ok()) << r.width << ": " << st.toString();
    EXPECT_EQ(plan.config.block.x, r.threads) << r.width;
    EXPECT_EQ(plan.config.block.x % 32, 0u);
    EXPECT_EQ(argmaxThreads(r.width, elementBytes(r.dtype)), static_cast<int>(r.threads));
  }
  // Rows past grid.y's limit are grid.x.
  ArgmaxProblem many = argmaxProblem();
  many.rows = 70000;
  ASSERT_TRUE(select(kTable, many, nullptr, &plan).ok());
  EXPECT_EQ(plan.config.grid.x, 70000u);
}

TEST(DecoderopsSelector, ArgmaxRowsOfOtherWidthsNeedOnlyElementAlignment) {
  // width * elt not a multiple of 16: rows start anywhere, so x needs the element's alignment.
  ArgmaxProblem p = argmaxProblem();
  p.dtype = DType::kFloat16;
  p.width = 7;
  p.x = fakeAddress(0x100000002);
  EXPECT_TRUE(selectHost(p).ok()) << selectHost(p).toString();
  p.x = fakeAddress(0x100000001);
  EXPECT_EQ(selectHost(p).message(), "decoderops: pointer x (0x100000001) is not 2-byte aligned");
  p.dtype = DType::kFloat32;
  p.x = fakeAddress(0x100000004);
  EXPECT_TRUE(selectHost(p).ok());
  p.x = fakeAddress(0x100000006);
  EXPECT_EQ(selectHost(p).message(), "decoderops: pointer x (0x100000006) is not 4-byte aligned");
  p.width = 8;  // 32-byte rows: 16-byte alignment
  p.x = fakeAddress(0x100000004);
  EXPECT_EQ(selectHost(p).message(), "decoderops: pointer x (0x100000004) is not 16-byte aligned");
}

// Each problem's overlap_launch is its plan's programmatic_dependency; off by default.
template <typename ProblemT, typename PlanT>
void expectOverlapLaunchIsProgrammatic(ProblemT p) {
  PlanT plan;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_FALSE(plan.config.programmatic_dependency);
  p.overlap_launch = true;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_TRUE(plan.config.programmatic_dependency);
  p.overlap_launch = false;
  ASSERT_TRUE(select(kTable, p, nullptr, &plan).ok());
  EXPECT_FALSE(plan.config.programmatic_dependency);
}

TEST(DecoderopsSelector, EmbedOverlapLaunchIsAProgrammaticDependentLaunch) {
  expectOverlapLaunchIsProgrammatic<EmbedProblem, EmbedPlan>(embedProblem());
}

TEST(DecoderopsSelector, SiluMulOverlapLaunchIsAProgrammaticDependentLaunch) {
  expectOverlapLaunchIsProgrammatic<SiluMulProblem, SiluMulPlan>(siluProblem());
}

TEST(DecoderopsSelector, ArgmaxOverlapLaunchIsAProgrammaticDependentLaunch) {
  expectOverlapLaunchIsProgrammatic<ArgmaxProblem, ArgmaxPlan>(argmaxProblem());
  ArgmaxProblem p = argmaxProblem();  // rows read element by element too
  p.width = 151935;
  expectOverlapLaunchIsProgrammatic<ArgmaxProblem, ArgmaxPlan>(p);
}

TEST(DecoderopsSelector, DtypeNotBuiltNamesTheBuiltOnes) {
  EmbedProblem e = embedProblem();
  e.dtype = DType::kFloat32;
  EmbedPlan ep;
  Status s = select(kNo32, e, nullptr, &ep);
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "decoderops: dtype fp32 is not built; built dtypes: fp16, bf16");
  ArgmaxPlan ap;
  s = select(kNo32, argmaxProblem(), nullptr, &ap);  // argmax's default dtype is fp32
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_EQ(s.message(), "decoderops: dtype fp32 is not built; built dtypes: fp16, bf16");
  SiluMulProblem m = siluProblem();
  m.dtype = DType::kFloat32;
  SiluMulPlan mp;
  EXPECT_EQ(select(std::span<const VariantInfo>(), m, nullptr, &mp).message(),
            "decoderops: dtype fp32 is not built; built dtypes: none");
  // Even a no-op needs its variant (canImplement(problem, sm) answers for it).
  e.tokens = 0;
  EXPECT_EQ(select(kNo32, e, nullptr, &ep).code(), StatusCode::kNotSupported);
}

TEST(DecoderopsSelector, UnknownDtypeValueIsInvalid) {
  EmbedProblem e = embedProblem();
  e.dtype = static_cast<DType>(7);
  EXPECT_EQ(selectHost(e).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(selectHost(e).message(),
            "decoderops: dtype 7 is not a DType value (fp16, bf16 or fp32)");
  SiluMulProblem m = siluProblem();
  m.dtype = static_cast<DType>(-1);
  EXPECT_EQ(selectHost(m).message(),
            "decoderops: dtype -1 is not a DType value (fp16, bf16 or fp32)");
  ArgmaxProblem a = argmaxProblem();
  a.dtype = static_cast<DType>(3);
  EXPECT_EQ(selectHost(a).message(),
            "decoderops: dtype 3 is not a DType value (fp16, bf16 or fp32)");
}

TEST(DecoderopsSelector, ZeroTokensOrRowsAreNoOpsWithNothingElseChecked) {
  EmbedProblem e;  // defaults: bf16, null pointers, width 0
  EmbedPlan ep;
  ASSERT_TRUE(select(kTable, e, nullptr, &ep).ok());
  EXPECT_TRUE(ep.no_op);
  e.rows = -5;  // not checked either
  e.width = 3;
  EXPECT_TRUE(select(kTable, e, nullptr, &ep).ok());
  SiluMulProblem m;
  SiluMulPlan mp;
  m.width = 12;
  ASSERT_TRUE(select(kTable, m, nullptr, &mp).ok());
  EXPECT_TRUE(mp.no_op);
  ArgmaxProblem a;
  ArgmaxPlan ap;
  ASSERT_TRUE(select(kTable, a, nullptr, &ap).ok());
  EXPECT_TRUE(ap.no_op);
  EXPECT_STREQ(ap.info->name, "decoderops_fp32");
}

template <typename Problem>
void expectMessage(const Problem& p, const std::string& message) {
  const Status s = selectHost(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << message;
  EXPECT_EQ(s.message(), message);
}

TEST(DecoderopsSelector, EmbedErrorsNameTheValueAndTheLimit) {
  struct Change {
    void (*change)(EmbedProblem&);
    const char* message;
  };
  const Change cases[] = {
      {[](EmbedProblem& p) { p.tokens = -1; }, "decoderops: tokens -1 is negative"},
      {[](EmbedProblem& p) { p.tokens = 1LL << 31; },
       "decoderops: tokens 2147483648 exceeds the limit 2147483647"},
      {[](EmbedProblem& p) { p.rows = -3; }, "decoderops: rows -3 is negative"},
      {[](EmbedProblem& p) { p.width = 0; }, "decoderops: width 0 is not positive"},
      {[](EmbedProblem& p) { p.width = -8; }, "decoderops: width -8 is not positive"},
      {[](EmbedProblem& p) { p.width = 4100; }, "decoderops: width 4100 is not a multiple of 8"},
      {[](EmbedProblem& p) { p.width = 1LL << 31; },
       "decoderops: width 2147483648 exceeds the limit 2147483647"},
      {[](EmbedProblem& p) { p.rows = 1LL << 60; },
       "decoderops: table of 1152921504606846976 x 4096 bf16 elements exceeds 2^63 - 1 bytes"},
      {[](EmbedProblem& p) {
         p.dtype = DType::kFloat32;
         p.tokens = 2147483647;
         p.width = 2147483640;
         p.rows = 1;
       },
       "decoderops: out of 2147483647 x 2147483640 fp32 elements exceeds 2^63 - 1 bytes"},
      {[](EmbedProblem& p) { p.ids = nullptr; }, "decoderops: ids is null"},
      {[](EmbedProblem& p) { p.ids = fakeAddress<const std::int32_t>(0x10002); },
       "decoderops: pointer ids (0x10002) is not 4-byte aligned"},
      {[](EmbedProblem& p) { p.table = nullptr; }, "decoderops: table is null"},
      {[](EmbedProblem& p) { p.table = fakeAddress(0x100000008); },
       "decoderops: pointer table (0x100000008) is not 16-byte aligned"},
      {[](EmbedProblem& p) { p.out = nullptr; }, "decoderops: out is null"},
      {[](EmbedProblem& p) { p.out = fakeAddress(0x200000004); },
       "decoderops: pointer out (0x200000004) is not 16-byte aligned"},
      // 4096 tokens x 8 KiB = 0x2000000 bytes of out; the table's 151936 rows = 0x4a300000 bytes.
      {[](EmbedProblem& p) { p.out = fakeAddress(0x100010000); },
       "decoderops: out [0x100010000, 0x102010000) overlaps table [0x100000000, 0x14a300000)"},
      {[](EmbedProblem& p) { p.out = fakeAddress(0x0ff000000); },
       "decoderops: out [0xff000000, 0x101000000) overlaps table [0x100000000, 0x14a300000)"},
  };
  for (const Change& c : cases) {
    EmbedProblem p = embedProblem();
    c.change(p);
    expectMessage(p, c.message);
  }
  // Adjacent ranges do not overlap.
  EmbedProblem p = embedProblem();
  p.out = fakeAddress(0x14a300000);  // right after the table
  EXPECT_TRUE(selectHost(p).ok());
  p.out = fakeAddress(0x100000000 - 0x2000000);  // right before it
  EXPECT_TRUE(selectHost(p).ok());
}

TEST(DecoderopsSelector, SiluMulErrorsNameTheValueAndTheLimit) {
  struct Change {
    void (*change)(SiluMulProblem&);
    const char* message;
  };
  const Change cases[] = {
      {[](SiluMulProblem& p) { p.tokens = -7; }, "decoderops: tokens -7 is negative"},
      {[](SiluMulProblem& p) { p.tokens = 1LL << 32; },
       "decoderops: tokens 4294967296 exceeds the limit 2147483647"},
      {[](SiluMulProblem& p) { p.width = 0; }, "decoderops: width 0 is not positive"},
      {[](SiluMulProblem& p) { p.width = 12290; },
       "decoderops: width 12290 is not a multiple of 8"},
      {[](SiluMulProblem& p) { p.width = 4294967296; },
       "decoderops: width 4294967296 exceeds the limit 2147483647"},
      {[](SiluMulProblem& p) {
         p.tokens = 2147483647;
         p.width = 2147483640;
       },
       "decoderops: in of 2147483647 x 4294967280 bf16 elements exceeds 2^63 - 1 bytes"},
      {[](SiluMulProblem& p) { p.in = nullptr; }, "decoderops: in is null"},
      {[](SiluMulProblem& p) { p.in = fakeAddress(0x100000001); },
       "decoderops: pointer in (0x100000001) is not 16-byte aligned"},
      {[](SiluMulProblem& p) { p.out = nullptr; }, "decoderops: out is null"},
      {[](SiluMulProblem& p) { p.out = fakeAddress(0x200000010 + 2); },
       "decoderops: pointer out (0x200000012) is not 16-byte aligned"},
      // 64 x 12288 bf16 = 0x180000 bytes of out, 0x300000 of in; in place (out == in) overlaps.
      {[](SiluMulProblem& p) { p.out = fakeAddress(0x100000000); },
       "decoderops: out [0x100000000, 0x100180000) overlaps in [0x100000000, 0x100300000)"},
      {[](SiluMulProblem& p) { p.out = fakeAddress(0x1002ffff0); },
       "decoderops: out [0x1002ffff0, 0x10047fff0) overlaps in [0x100000000, 0x100300000)"},
      {[](SiluMulProblem& p) { p.out = fakeAddress(0x0ffe80010); },
       "decoderops: out [0xffe80010, 0x100000010) overlaps in [0x100000000, 0x100300000)"},
  };
  for (const Change& c : cases) {
    SiluMulProblem p = siluProblem();
    c.change(p);
    expectMessage(p, c.message);
  }
  SiluMulProblem p = siluProblem();
  p.out = fakeAddress(0x100300000);  // right after in
  EXPECT_TRUE(selectHost(p).ok());
  p.out = fakeAddress(0x0ffe80000);  // right before in
  EXPECT_TRUE(selectHost(p).ok());
}

TEST(DecoderopsSelector, ArgmaxErrorsNameTheValueAndTheLimit) {
  struct Change {
    void (*change)(ArgmaxProblem&);
    const char* message;
  };
  const Change cases[] = {
      {[](ArgmaxProblem& p) { p.rows = -1; }, "decoderops: rows -1 is negative"},
      {[](ArgmaxProblem& p) { p.rows = 2147483648LL; },
       "decoderops: rows 2147483648 exceeds the limit 2147483647"},
      {[](ArgmaxProblem& p) { p.width = 0; }, "decoderops: width 0 is not positive"},
      {[](ArgmaxProblem& p) { p.width = -151936; }, "decoderops: width -151936 is not positive"},
      {[](ArgmaxProblem& p) { p.width = 2147483648LL; },
       "decoderops: width 2147483648 exceeds the limit 2147483647"},
      {[](ArgmaxProblem& p) {
         p.rows = 2147483647;
         p.width = 2147483647;
       },
       "decoderops: x of 2147483647 x 2147483647 fp32 elements exceeds 2^63 - 1 bytes"},
      {[](ArgmaxProblem& p) { p.x = nullptr; }, "decoderops: x is null"},
      {[](ArgmaxProblem& p) { p.x = fakeAddress(0x100000008); },
       "decoderops: pointer x (0x100000008) is not 16-byte aligned"},
      {[](ArgmaxProblem& p) { p.out = nullptr; }, "decoderops: out is null"},
      {[](ArgmaxProblem& p) { p.out = fakeAddress<std::int32_t>(0x20002); },
       "decoderops: pointer out (0x20002) is not 4-byte aligned"},
  };
  for (const Change& c : cases) {
    ArgmaxProblem p = argmaxProblem();
    c.change(p);
    expectMessage(p, c.message);
  }
  // Odd widths: any width 1 .. 2^31 - 1 is admitted.
  for (std::int64_t width : {1LL, 7LL, 151937LL, 2147483647LL}) {
    ArgmaxProblem p = argmaxProblem();
    p.rows = 1;
    p.width = width;
    p.x = fakeAddress(0x100000004);
    const Status s = selectHost(p);
    EXPECT_TRUE(s.ok()) << width << ": " << s.toString();
  }
}

TEST(DecoderopsSelector, TheShapesAloneSkipThePointers) {
  // workspaceSize asks with PointerChecks::kSkip: null or misaligned pointers and overlaps pass.
  EmbedProblem e = embedProblem();
  e.ids = nullptr;
  e.out = const_cast<void*>(e.table);
  EmbedPlan ep;
  EXPECT_TRUE(select(kTable, e, nullptr, &ep, PointerChecks::kSkip).ok());
  SiluMulProblem m = siluProblem();
  m.out = const_cast<void*>(m.in);
  SiluMulPlan mp;
  EXPECT_TRUE(select(kTable, m, nullptr, &mp, PointerChecks::kSkip).ok());
  ArgmaxProblem a = argmaxProblem();
  a.x = fakeAddress(0x3);
  ArgmaxPlan ap;
  EXPECT_TRUE(select(kTable, a, nullptr, &ap, PointerChecks::kSkip).ok());
  EXPECT_FALSE(select(kTable, a, nullptr, &ap).ok());
}

TEST(DecoderopsSelector, MissingEntryIsInternal) {
  const VariantInfo table[] = {{"decoderops_bf16", DType::kBFloat16, &fixedVariant<kBf16NoArgmax>}};
  ArgmaxProblem a = argmaxProblem();
  a.dtype = DType::kBFloat16;
  ArgmaxPlan ap;
  const Status s = select(table, a, nullptr, &ap);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("decoderops_bf16 has no entry kernel kiln_argmax"), std::string::npos)
      << s.message();
  EmbedPlan ep;
  EXPECT_TRUE(select(table, embedProblem(), nullptr, &ep).ok());  // the other entries are there
}

Status fakeImageCheck(const kiln_variant& variant, int device_sm) {
  for (int i = 0; i < variant.num_images; ++i) {
    if (variant.images[i].sm == device_sm) return Status::Ok();
  }
  return Status(StatusCode::kNoKernelImage, std::string(variant.name) +
                                                ": artifact has sm_80, sm_90; device is sm_" +
                                                std::to_string(device_sm));
}

template <typename Problem, typename PlanT>
void expectStagedEqualsCombined(const std::vector<Problem>& problems) {
  const DeviceQuery devices[] = {{90, &fakeImageCheck}, {87, &fakeImageCheck}};
  for (const DeviceQuery& device : devices) {
    for (const Problem& p : problems) {
      PlanT combined, staged;
      const Status one = select(kTable, p, &device, &combined);
      Status two = select(kTable, p, nullptr, &staged);
      if (two.ok()) two = checkDevice(staged, device);
      EXPECT_EQ(one.code(), two.code()) << one.toString() << " vs " << two.toString();
      EXPECT_EQ(one.message(), two.message());
    }
  }
}

TEST(DecoderopsSelector, HostThenDeviceEqualsSelectWithDevice) {
  std::vector<EmbedProblem> embeds;
  std::vector<SiluMulProblem> silus;
  std::vector<ArgmaxProblem> argmaxes;
  for (std::int64_t n : {-1LL, 0LL, 1LL, 4096LL}) {
    EmbedProblem e = embedProblem();
    e.tokens = n;
    embeds.push_back(e);
    e.width = 12;
    embeds.push_back(e);
    SiluMulProblem m = siluProblem();
    m.tokens = n;
    silus.push_back(m);
    m.out = const_cast<void*>(m.in);
    silus.push_back(m);
    ArgmaxProblem a = argmaxProblem();
    a.rows = n;
    argmaxes.push_back(a);
    a.x = fakeAddress(0x100000002);
    argmaxes.push_back(a);
  }
  expectStagedEqualsCombined<EmbedProblem, EmbedPlan>(embeds);
  expectStagedEqualsCombined<SiluMulProblem, SiluMulPlan>(silus);
  expectStagedEqualsCombined<ArgmaxProblem, ArgmaxPlan>(argmaxes);
  const DeviceQuery orin{87, &fakeImageCheck};
  ArgmaxPlan plan;
  const Status s = select(kTable, argmaxProblem(), &orin, &plan);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_NE(s.message().find("device is sm_87"), std::string::npos) << s.message();
}

TEST(DecoderopsSelector, ParamsLayoutIsPinned) {
  EXPECT_EQ(sizeof(EmbedParams), 40u);
  EXPECT_EQ(sizeof(SiluMulParams), 24u);
  EXPECT_EQ(sizeof(ArgmaxParams), 24u);
  EXPECT_EQ(elementBytes(DType::kFloat16), 2);
  EXPECT_EQ(elementBytes(DType::kBFloat16), 2);
  EXPECT_EQ(elementBytes(DType::kFloat32), 4);
}

}  // namespace
}  // namespace kiln::decoderops
