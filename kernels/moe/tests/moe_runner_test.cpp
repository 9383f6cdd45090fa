// The moe runner (runner.cpp, compiled here against the group header kiln build's code generation
// writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: run() launches exactly the kernels of the requested
// steps, in step order, on the caller's stream, with the selector's grids and one MoeParams whose
// workspace pointers are the layout's offsets in the caller's workspace; canImplement,
// workspaceSize and workspaceLayout agree with the selector; a refused problem and tokens == 0
// make no driver call; a short, null or misaligned workspace is refused before any launch; an
// unsupported SM is named.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/driver_api.h"
#include "kiln/runners/moe.h"
#include "moe/launch.h"
#include "moe/params.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::moe {
namespace {

using fake::fakeAddress;

// The launches of the fake driver since its history was last cleared (fake::Driver::
// launchHistory), each with its parameter struct's bytes.
std::vector<fake::RecordedLaunch> launched() {
  return fake::g_driver->launchHistory();
}

// Records each launch's parameter struct and starts the history afresh.
void recordLaunches(fake::Driver& driver) {
  driver.record_first_arg_bytes = sizeof(MoeParams);
  driver.clearLaunchHistory();
}

MoeParams moeParams(const fake::RecordedLaunch& r) {
  MoeParams p;
  EXPECT_EQ(r.first_arg.size(), sizeof(MoeParams));
  std::memcpy(static_cast<void*>(&p), r.first_arg.data(), sizeof(p));
  return p;
}

const char* const kStepEntries[] = {"kiln_moe_route", "kiln_moe_align", "kiln_moe_fc1",
                                    "kiln_moe_fc2", "kiln_moe_finalize"};

// A Qwen3-30B-A3B layer at 16 tokens: bf16, 128 experts, top 8, hidden 2048, intermediate 768,
// bf16 logits, with a residual.
Problem validProblem() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.tokens = 16;
  p.experts = 128;
  p.top_k = 8;
  p.hidden = 2048;
  p.intermediate = 768;
  p.x = fakeAddress<const void>(0x7f0000010000);
  p.logits = fakeAddress<const void>(0x7f0000020000);
  p.w1 = fakeAddress<const void>(0x7f0000030000);
  p.w2 = fakeAddress<const void>(0x7f0000040000);
  p.residual = fakeAddress<const void>(0x7f0000060000);
  p.y = fakeAddress(0x7f0000050000);
  return p;
}

constexpr std::uintptr_t kWorkspaceBase = 0x7f0001000000;
void* const kWorkspace = fakeAddress(kWorkspaceBase);

// validProblem()'s workspace, hand-computed (moe_selector_test.cpp's PlanOfAQwen3Block): 128 rows,
// 129 offsets, each segment rounded up to 256 bytes.
constexpr std::size_t kBytes = 723968;
WorkspaceLayout validLayout() {
  WorkspaceLayout w;
  w.topk_ids = 0;
  w.topk_weights = 512;
  w.expert_offsets = 1024;
  w.tile_offsets = 1792;
  w.sorted_slots = 2560;
  w.act = 3072;
  w.down = 199680;
  w.bytes = kBytes;
  return w;
}

void expectLayout(const WorkspaceLayout& got, const WorkspaceLayout& want, const char* what) {
  EXPECT_EQ(got.topk_ids, want.topk_ids) << what;
  EXPECT_EQ(got.topk_weights, want.topk_weights) << what;
  EXPECT_EQ(got.expert_offsets, want.expert_offsets) << what;
  EXPECT_EQ(got.tile_offsets, want.tile_offsets) << what;
  EXPECT_EQ(got.sorted_slots, want.sorted_slots) << what;
  EXPECT_EQ(got.act, want.act) << what;
  EXPECT_EQ(got.down, want.down) << what;
  EXPECT_EQ(got.bytes, want.bytes) << what;
}

// Every non-empty contiguous run of Step bits: steps lo..hi.
std::vector<unsigned> contiguousSteps() {
  std::vector<unsigned> runs;
  for (int lo = 0; lo < 5; ++lo) {
    for (int hi = lo; hi < 5; ++hi) {
      runs.push_back(((1u << (hi + 1)) - 1u) & ~((1u << lo) - 1u));
    }
  }
  return runs;
}

// The grid each step of validProblem() is launched with: route ceil(16 / 8); align 1; fc1
// (maxRowTiles(128, 128) = 130, 768 / 64); fc2 (130, 2048 / 128); finalize 16. Blocks 256, 1024,
// 128, 128, 256; the GEMMs with 48 KiB of shared memory.
struct Launch {
  unsigned grid[3];
  unsigned block;
  unsigned shared_bytes;
};
const Launch kValidLaunches[] = {
    {{2, 1, 1}, 256, 0},        {{1, 1, 1}, 1024, 0}, {{130, 12, 1}, 128, 49152},
    {{130, 16, 1}, 128, 49152}, {{16, 1, 1}, 256, 0},
};

void expectLaunch(const fake::LaunchRecord& got, int step, CUstream stream) {
  const Launch& want = kValidLaunches[step];
  EXPECT_EQ(got.function, kStepEntries[step]) << step;
  EXPECT_EQ(got.stream, stream) << step;
  EXPECT_EQ(got.grid[0], want.grid[0]) << got.function;
  EXPECT_EQ(got.grid[1], want.grid[1]) << got.function;
  EXPECT_EQ(got.grid[2], want.grid[2]) << got.function;
  EXPECT_EQ(got.block[0], want.block) << got.function;
  EXPECT_EQ(got.block[1], 1u) << got.function;
  EXPECT_EQ(got.block[2], 1u) << got.function;
  EXPECT_EQ(got.shared_bytes, want.shared_bytes) << got.function;
  EXPECT_FALSE(got.programmatic) << got.function;
}

// The parameters every kernel gets: the problem's tensors and shapes, and the workspace pointers at
// the layout's offsets from `base`.
void expectParams(const MoeParams& got, const Problem& p, std::uintptr_t base,
                  const WorkspaceLayout& w) {
  EXPECT_EQ(got.x, p.x);
  EXPECT_EQ(got.logits, p.logits);
  EXPECT_EQ(got.w1, p.w1);
  EXPECT_EQ(got.w2, p.w2);
  EXPECT_EQ(got.residual, p.residual);
  EXPECT_EQ(got.y, p.y);
  EXPECT_EQ(got.topk_ids, fakeAddress<std::int32_t>(base + w.topk_ids));
  EXPECT_EQ(got.topk_weights, fakeAddress<float>(base + w.topk_weights));
  EXPECT_EQ(got.expert_offsets, fakeAddress<std::int32_t>(base + w.expert_offsets));
  EXPECT_EQ(got.tile_offsets, fakeAddress<std::int32_t>(base + w.tile_offsets));
  EXPECT_EQ(got.sorted_slots, fakeAddress<std::int32_t>(base + w.sorted_slots));
  EXPECT_EQ(got.act, fakeAddress(base + w.act));
  EXPECT_EQ(got.down, fakeAddress(base + w.down));
  EXPECT_EQ(got.tokens, p.tokens);
  EXPECT_EQ(got.experts, p.experts);
  EXPECT_EQ(got.top_k, p.top_k);
  EXPECT_EQ(got.hidden, p.hidden);
  EXPECT_EQ(got.intermediate, p.intermediate);
  EXPECT_EQ(got.logits_fp32, p.logits_fp32 ? 1 : 0);
  EXPECT_EQ(got.renormalize, p.renormalize ? 1 : 0);
}

const char* const kFakeCubin =
    "FAKECUBIN kiln_moe_route kiln_moe_align kiln_moe_fc1 kiln_moe_fc2 kiln_moe_finalize";

TEST(MoeRunner, AllStepsLaunchTheFiveKernelsInOrder) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok()) << canImplement(p, 90).toString();
  EXPECT_EQ(workspaceSize(p), kBytes);
  expectLayout(workspaceLayout(p), validLayout(), "workspaceLayout");
  const Status s = run(p, kWorkspace, kBytes, stream);
  ASSERT_TRUE(s.ok()) << s.toString();

  ASSERT_EQ(driver.launches.load(), 5);
  ASSERT_EQ(launched().size(), 5u);
  for (int step = 0; step < 5; ++step) {
    const fake::RecordedLaunch r = launched()[static_cast<std::size_t>(step)];
    expectLaunch(r.launch, step, stream);
    // The bf16 variant's image: its fake cubin names its five entries.
    EXPECT_EQ(r.launch.image, kFakeCubin);
    // Every kernel gets the same parameters, the intermediates in the caller's workspace.
    expectParams(moeParams(r), p, kWorkspaceBase, validLayout());
  }
  // 48 KiB of shared memory needs no opt-in: the GEMMs keep the default limit.
  EXPECT_EQ(driver.functionSharedOptIn("kiln_moe_fc1"), 48 * 1024);
  EXPECT_EQ(driver.functionSharedOptIn("kiln_moe_fc2"), 48 * 1024);
}

TEST(MoeRunner, EachRunOfStepsLaunchesExactlyItsKernelsInOrder) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  int total = 0;
  for (unsigned steps : contiguousSteps()) {
    Problem p = validProblem();
    p.steps = steps;
    // The whole block's workspace for any run of its steps: a caller passes the same one to each.
    EXPECT_EQ(workspaceSize(p), kBytes) << steps;
    fake::g_driver->clearLaunchHistory();
    const Status s = run(p, kWorkspace, kBytes, stream);
    ASSERT_TRUE(s.ok()) << steps << ": " << s.toString();
    std::vector<int> want;
    for (int step = 0; step < 5; ++step) {
      if ((steps & (1u << step)) != 0) want.push_back(step);
    }
    ASSERT_EQ(launched().size(), want.size()) << steps;
    for (std::size_t i = 0; i < want.size(); ++i) {
      expectLaunch(launched()[i].launch, want[i], stream);
      expectParams(moeParams(launched()[i]), p, kWorkspaceBase, validLayout());
    }
    total += static_cast<int>(want.size());
    EXPECT_EQ(driver.launches.load(), total) << steps;
  }
  // One step at a time is the whole block, launch for launch.
  fake::g_driver->clearLaunchHistory();
  for (unsigned step : {kRoute, kAlign, kFc1, kFc2, kFinalize}) {
    Problem p = validProblem();
    p.steps = step;
    ASSERT_TRUE(run(p, kWorkspace, kBytes, stream).ok()) << step;
  }
  ASSERT_EQ(launched().size(), 5u);
  for (int step = 0; step < 5; ++step) {
    expectLaunch(launched()[static_cast<std::size_t>(step)].launch, step, stream);
  }
}

TEST(MoeRunner, OnlyTheChosenStepsPointersAreNeeded) {
  // The align step alone touches only the workspace; fc2 alone w2; a caller bringing its own
  // routing runs from kAlign without logits.
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  p.steps = kAlign;
  p.x = nullptr;
  p.logits = nullptr;
  p.w1 = nullptr;
  p.w2 = nullptr;
  p.residual = nullptr;
  p.y = nullptr;
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(run(p, kWorkspace, kBytes, stream).ok());
  ASSERT_EQ(launched().size(), 1u);
  EXPECT_EQ(launched()[0].launch.function, "kiln_moe_align");
  const MoeParams params = moeParams(launched()[0]);
  EXPECT_EQ(params.x, nullptr);
  EXPECT_EQ(params.tile_offsets, fakeAddress<std::int32_t>(kWorkspaceBase + 1792));
  // From kAlign to the end with null logits.
  p = validProblem();
  p.steps = kAllSteps & ~static_cast<unsigned>(kRoute);
  p.logits = nullptr;
  fake::g_driver->clearLaunchHistory();
  ASSERT_TRUE(run(p, kWorkspace, kBytes, stream).ok());
  ASSERT_EQ(launched().size(), 4u);
  EXPECT_EQ(launched()[0].launch.function, "kiln_moe_align");
  EXPECT_EQ(launched()[3].launch.function, "kiln_moe_finalize");
  // But the steps that read a pointer need it.
  p.steps = kAllSteps;
  const Status s = run(p, kWorkspace, kBytes, stream);
  EXPECT_EQ(s.message(), "moe: logits is null");
  EXPECT_EQ(canImplement(p).message(), s.message());
  EXPECT_EQ(launched().size(), 4u);
}

TEST(MoeRunner, Fp16AndFp32LogitsAndTinyShapes) {
  // fp16, 3 tokens, 8 experts, top 2, hidden 96, intermediate 64, fp32 logits, no residual, not
  // renormalised: 6 rows make at most 6 tiles; 96 hidden columns one partial fc2 block.
  fake::Driver driver({fake::a100()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  p.tokens = 3;
  p.experts = 8;
  p.top_k = 2;
  p.hidden = 96;
  p.intermediate = 64;
  p.logits_fp32 = true;
  p.renormalize = false;
  p.residual = nullptr;
  p.logits = fakeAddress<const void>(0x7f0000020004);  // 4-byte aligned is enough for fp32
  ASSERT_TRUE(canImplement(p, 80).ok()) << canImplement(p, 80).toString();
  // The layout of moe_selector_test.cpp's PlanOfASmallFp16BlockWithResidualAndFp32Logits.
  WorkspaceLayout w;
  w.topk_ids = 0;
  w.topk_weights = 256;
  w.expert_offsets = 512;
  w.tile_offsets = 768;
  w.sorted_slots = 1024;
  w.act = 1280;
  w.down = 2048;
  w.bytes = 3328;
  expectLayout(workspaceLayout(p), w, "small");
  ASSERT_EQ(workspaceSize(p), 3328u);
  const Status s = run(p, kWorkspace, 3328, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(launched().size(), 5u);
  const unsigned grids[5][2] = {{1, 1}, {1, 1}, {6, 1}, {6, 1}, {3, 1}};
  for (int step = 0; step < 5; ++step) {
    const fake::LaunchRecord l = launched()[static_cast<std::size_t>(step)].launch;
    EXPECT_EQ(l.function, kStepEntries[step]);
    EXPECT_EQ(l.grid[0], grids[step][0]) << l.function;
    EXPECT_EQ(l.grid[1], grids[step][1]) << l.function;
    EXPECT_EQ(l.device, 0);
    EXPECT_FALSE(l.programmatic);  // an sm_80 image
    expectParams(moeParams(launched()[static_cast<std::size_t>(step)]), p, kWorkspaceBase, w);
  }
  // The fp16 variant is the one checked against the device.
  EXPECT_EQ(canImplement(p, 75).message().rfind("moe_fp16: ", 0), 0u)
      << canImplement(p, 75).message();
}

TEST(MoeRunner, WorkspaceErrorsSurfaceFromRunBeforeAnyLaunch) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  Status s = run(p, nullptr, 0, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      s.message(),
      "moe: the block needs a workspace of 723968 bytes (workspaceSize()); workspace is null");
  s = run(p, kWorkspace, kBytes - 1, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "moe: workspace of 723967 bytes is smaller than the 723968 bytes the block needs");
  s = run(p, fakeAddress(kWorkspaceBase + 8), kBytes, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "moe: pointer workspace (0x7f0001000008) is not 16-byte aligned");
  // A single step needs the whole workspace too.
  Problem one = validProblem();
  one.steps = kFinalize;
  EXPECT_EQ(run(one, kWorkspace, kBytes - 1, stream).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_TRUE(launched().empty());
  // Exactly the size is enough.
  EXPECT_TRUE(run(p, kWorkspace, kBytes, stream).ok());
  EXPECT_EQ(driver.launches.load(), 5);
}

TEST(MoeRunner, InvalidProblemIsRefusedAsCanImplementSaysWithNoDriverCall) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  const int calls_before = driver.calls.load();
  Problem p = validProblem();
  p.experts = 8;
  p.top_k = 9;
  Status s = run(p, kWorkspace, kBytes, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "moe: top_k 9 exceeds experts 8");
  EXPECT_EQ(canImplement(p).message(), s.message());
  EXPECT_EQ(canImplement(p, 90).message(), s.message());
  EXPECT_EQ(workspaceSize(p), 0u);
  expectLayout(workspaceLayout(p), WorkspaceLayout{}, "refused");
  p = validProblem();
  p.intermediate = 700;
  s = run(p, kWorkspace, kBytes, stream);
  EXPECT_EQ(s.message(), "moe: intermediate 700 is not a multiple of the tile 64");
  EXPECT_EQ(canImplement(p).message(), s.message());
  p = validProblem();
  p.steps = kRoute | kFc1;
  EXPECT_EQ(run(p, kWorkspace, kBytes, stream).message(),
            "moe: steps 5 are not a contiguous run of Step bits (each step reads what the one "
            "before it wrote)");
  p = validProblem();
  p.y = fakeAddress(0x7f0000050008);
  s = run(p, kWorkspace, kBytes, stream);
  EXPECT_EQ(s.message(), "moe: pointer y (0x7f0000050008) is not 16-byte aligned");
  EXPECT_EQ(canImplement(p).message(), s.message());
  p = validProblem();
  p.dtype = static_cast<DType>(7);
  EXPECT_EQ(run(p, kWorkspace, kBytes, stream).message(),
            "moe: dtype 7 is not a DType value (fp16, bf16 or fp32)");
  // None of these touched the driver: no stream query, no load, no launch.
  EXPECT_EQ(driver.calls.load(), calls_before);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.load_attempts.load(), 0);
}

TEST(MoeRunner, WorkspaceSizeAndLayoutNeedTheShapesOnly) {
  // A caller sizes the workspace before it has its tensors: no pointer is checked.
  Problem p = validProblem();
  p.x = nullptr;
  p.logits = nullptr;
  p.w1 = nullptr;
  p.w2 = nullptr;
  p.y = fakeAddress(0x7f0000050001);
  EXPECT_EQ(workspaceSize(p), kBytes);
  expectLayout(workspaceLayout(p), validLayout(), "no tensors");
  EXPECT_EQ(canImplement(p).message(), "moe: logits is null");
  // It does not depend on the dtype, the logits' type or the residual.
  p.dtype = DType::kFloat16;
  p.logits_fp32 = true;
  p.residual = nullptr;
  EXPECT_EQ(workspaceSize(p), kBytes);
  expectLayout(workspaceLayout(p), validLayout(), "fp16");
}

TEST(MoeRunner, UnsupportedSmsAreNamed) {
  const Problem p = validProblem();
  const Status s = canImplement(p, 75);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(
      s.message(),
      "moe_bf16: artifact has sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_110, sm_120 only; "
      "device is sm_75");
  for (int sm : {80, 86, 87, 89, 90, 100, 110, 120}) {
    EXPECT_TRUE(canImplement(p, sm).ok()) << sm;
  }
  // Any run of steps is checked against the device.
  Problem align = validProblem();
  align.steps = kAlign;
  EXPECT_EQ(canImplement(align, 75).message(), s.message());
  // run() on such a device is refused before any load or launch.
  fake::Driver driver({fake::Device{"Tesla T4", 7, 5, 40, 65536}});
  const Status r = run(p, kWorkspace, kBytes, driver.makeStream(0));
  EXPECT_EQ(r.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(r.message(), s.message());
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.load_attempts.load(), 0);
}

TEST(MoeRunner, ZeroTokensTouchNothing) {
  fake::Driver driver({fake::h200()});
  CUstream stream = driver.makeStream(0);
  Problem p;
  p.dtype = DType::kBFloat16;
  p.experts = 128;
  p.top_k = 8;
  p.hidden = 2048;
  p.intermediate = 768;
  EXPECT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  EXPECT_EQ(workspaceSize(p), 0u);
  expectLayout(workspaceLayout(p), WorkspaceLayout{}, "no tokens");
  const Status s = run(p, nullptr, 0, stream);
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.calls.load(), 0);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.stream_context_queries.load(), 0);
  // The shapes are still checked.
  p.hidden = 100;
  EXPECT_EQ(run(p, nullptr, 0, stream).message(),
            "moe: hidden 100 is not a multiple of 32 (the GEMM's K step)");
  EXPECT_EQ(driver.calls.load(), 0);
}

TEST(MoeRunner, ZeroTokensAreCheckedAgainstTheDeviceToo) {
  // canImplement(problem, device_sm) promises that the artifact runs on the device: an empty batch
  // on a device the artifact has no image for is refused as in every other group (w4a16, rmsnorm,
  // decodeattn, fmha), not admitted.
  Problem p;
  p.dtype = DType::kBFloat16;
  p.experts = 128;
  p.top_k = 8;
  p.hidden = 2048;
  p.intermediate = 768;
  const Status s = canImplement(p, 75);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage) << s.toString();
  EXPECT_EQ(
      s.message(),
      "moe_bf16: artifact has sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_110, sm_120 only; "
      "device is sm_75");
  EXPECT_TRUE(canImplement(p, 90).ok());
}

}  // namespace
}  // namespace kiln::moe
