// The gdn runner (runner.cpp, compiled here against the group header kiln build's code generation
// writes for every variant of kiln.toml, with fake cubins for every supported SM:
// kiln_fake_artifact) on the fake driver: each of the four problems launches its own entries on
// the caller's stream with the selector's grid; the commit passes its six arguments in the entry's
// order (the accepted counts as a device pointer: nothing is read on the host) and, once its
// module is loaded, launches inside a stream capture; the prefill launches its chunk kernel, then
// its state kernel, with the caller's workspace split as launch.h lays it out, and refuses a
// workspace too small, misaligned or null before any launch; a refused problem and batch 0 make no
// driver call; an SM the group is not built for is named.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gdn/launch.h"
#include "kiln/driver_api.h"
#include "kiln/groups/gdn.h"
#include "kiln/runners/gdn.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::gdn {
namespace {

using fake::fakeAddress;

// The commit's arguments as the launch saw them (its args die with runner.cpp's frame, so the
// launch entry of the driver table is wrapped to copy them while the call is made).
struct CommitArgsSeen {
  const void* cache = nullptr;
  void* state = nullptr;
  const void* slots = nullptr;
  const void* accepted = nullptr;
  std::int32_t tokens = 0, heads_v = 0;
};
// A prefill kernel's arguments as the launch saw them, in its entry's order (gdn_prefill.py): its
// pointers, then its 32-bit scalars (the chunk kernel's scale as its bits).
struct PrefillArgsSeen {
  std::vector<const void*> pointers;
  std::vector<std::uint32_t> scalars;
};
DriverApi g_table;
std::vector<fake::LaunchRecord> g_launches;
std::vector<CommitArgsSeen> g_commit_args;
std::vector<PrefillArgsSeen> g_prefill_args;

// `pointers` pointer parameters, then `scalars` 32-bit ones.
PrefillArgsSeen prefillArgs(void** params, int pointers, int scalars) {
  PrefillArgsSeen a;
  for (int i = 0; i < pointers; ++i)
    a.pointers.push_back(*static_cast<const void* const*>(params[i]));
  for (int i = pointers; i < pointers + scalars; ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, params[i], sizeof(bits));
    a.scalars.push_back(bits);
  }
  return a;
}

CUresult recordLaunch(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                      unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                      void** params, void** extra) {
  const CUresult r =
      g_table.launchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
  if (r != CUDA_SUCCESS) return r;
  g_launches.push_back(fake::g_driver->lastLaunch());
  if (g_launches.back().function == "kiln_gdn_mtp_commit") {
    CommitArgsSeen a;
    a.cache = *static_cast<const void* const*>(params[0]);
    a.state = *static_cast<void* const*>(params[1]);
    a.slots = *static_cast<const void* const*>(params[2]);
    a.accepted = *static_cast<const void* const*>(params[3]);
    a.tokens = *static_cast<const std::int32_t*>(params[4]);
    a.heads_v = *static_cast<const std::int32_t*>(params[5]);
    g_commit_args.push_back(a);
  }
  // prefill_chunk: q .. ws_gc, then scale, heads_qk, heads_v; prefill_state: ws_w ..
  // has_initial, then initial_given, heads_v.
  if (g_launches.back().function == "kiln_gdn_prefill_chunk")
    g_prefill_args.push_back(prefillArgs(params, 17, 3));
  if (g_launches.back().function == "kiln_gdn_prefill_state")
    g_prefill_args.push_back(prefillArgs(params, 11, 2));
  return r;
}

void recordLaunches(fake::Driver& driver) {
  g_table = driver.api();
  g_launches.clear();
  g_commit_args.clear();
  g_prefill_args.clear();
  DriverApi table = g_table;
  table.launchKernel = &recordLaunch;
  driver.install(table);
}

// The commit of 8 sequences of 4 draft tokens, 32 value heads, into a pool of 64 slots: the cache
// ([8, 4, 32, 128, 128] floats, 64 MiB) and the pool (128 MiB) 1 TiB apart.
CommitProblem validCommit() {
  CommitProblem p;
  p.batch = 8;
  p.tokens = 4;
  p.heads_v = 32;
  p.num_slots = 64;
  p.cache = fakeAddress<const float>(std::uintptr_t{2} << 40);
  p.state = fakeAddress<float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  p.accepted = fakeAddress<const std::int32_t>(0x7f0000020000);
  return p;
}

Problem validDecode() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.batch = 8;
  p.heads_qk = 16;
  p.heads_v = 32;
  p.num_slots = 64;
  p.scale = 0.125f;
  p.q = p.k = p.v = fakeAddress<const void>(0x7f0000100000);
  p.g = p.beta = fakeAddress<const float>(0x7f0000200000);
  p.out = fakeAddress(0x7f0000300000);
  p.state = fakeAddress<float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  return p;
}

MtpProblem validMtp() {
  MtpProblem p;
  p.dtype = DType::kFloat16;
  p.batch = 8;
  p.tokens = 4;
  p.heads_qk = 16;
  p.heads_v = 32;
  p.num_slots = 64;
  p.scale = 0.125f;
  p.q = p.k = p.v = fakeAddress<const void>(0x7f0000100000);
  p.g = p.beta = fakeAddress<const float>(0x7f0000200000);
  p.out = fakeAddress(0x7f0000300000);
  p.state = fakeAddress<const float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  p.cache = fakeAddress<float>(std::uintptr_t{2} << 40);
  return p;
}

// The generated table has the commit: one variant, dtype fp32 (kiln.toml's), the mtp limit.
TEST(GdnRunner, TheGeneratedTableHasTheCommitVariant) {
  int commits = 0;
  for (const VariantInfo& v : generated::gdn::kVariants) {
    if (std::string(v.name) != "gdn_mtp_commit_dk128_dv128") continue;
    ++commits;
    EXPECT_EQ(v.dtype, DType::kFloat32);
    EXPECT_EQ(v.max_tokens, 8);
    EXPECT_FALSE(v.fused_gating);
    EXPECT_EQ(v.head_dim_k, 128);
    EXPECT_EQ(v.head_dim_v, 128);
  }
  EXPECT_EQ(commits, 1);
}

TEST(GdnRunner, CommitLaunchesItsEntryWithTheCountsOnTheDevice) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const CommitProblem p = validCommit();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 1u);
  const fake::LaunchRecord& launch = g_launches[0];
  EXPECT_EQ(launch.function, "kiln_gdn_mtp_commit");
  EXPECT_EQ(launch.image, "FAKECUBIN kiln_gdn_mtp_commit");
  EXPECT_EQ(launch.stream, stream);
  const LaunchShape shape = launchShape(128, 128, 32, 4, 1, 32, 8);
  EXPECT_EQ(launch.grid[0], shape.grid_x);
  EXPECT_EQ(launch.grid[1], 32u);
  EXPECT_EQ(launch.grid[2], 8u);
  EXPECT_EQ(launch.block[0], 32u);
  EXPECT_EQ(launch.block[1], 4u);
  EXPECT_EQ(launch.block[2], 1u);
  EXPECT_EQ(launch.shared_bytes, 0u);
  EXPECT_FALSE(launch.programmatic);
  ASSERT_EQ(g_commit_args.size(), 1u);
  const CommitArgsSeen& a = g_commit_args[0];
  EXPECT_EQ(a.cache, p.cache);
  EXPECT_EQ(a.state, p.state);
  EXPECT_EQ(a.slots, p.slots);
  EXPECT_EQ(a.accepted, p.accepted);  // a device pointer, passed as it is: no count is read here
  EXPECT_EQ(a.tokens, 4);
  EXPECT_EQ(a.heads_v, 32);
}

// Capture-safe: once the variant is loaded (a load during capture is refused, as for every
// group), the commit launches inside a capture like any kernel: its counts stay on the device.
TEST(GdnRunner, CommitLaunchesInsideACapture) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const CommitProblem p = validCommit();
  ASSERT_TRUE(run(p, nullptr, 0, stream).ok());  // loads the module, outside the capture
  driver.setCapturing(stream, true);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[1].function, "kiln_gdn_mtp_commit");
  EXPECT_EQ(g_launches[1].stream, stream);
}

TEST(GdnRunner, DecodeAndMtpLaunchTheirOwnEntries) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const Status d = run(validDecode(), nullptr, 0, stream);
  ASSERT_TRUE(d.ok()) << d.toString();
  const Status m = run(validMtp(), nullptr, 0, stream);
  ASSERT_TRUE(m.ok()) << m.toString();
  ASSERT_EQ(g_launches.size(), 2u);
  EXPECT_EQ(g_launches[0].function, "kiln_gdn_decode");
  EXPECT_EQ(g_launches[1].function, "kiln_gdn_decode_mtp");
  for (const fake::LaunchRecord& launch : g_launches) {
    EXPECT_EQ(launch.grid[1], 32u);
    EXPECT_EQ(launch.grid[2], 8u);
    EXPECT_EQ(launch.stream, stream);
  }
  EXPECT_TRUE(g_commit_args.empty());
}

TEST(GdnRunner, RefusedCommitsAndBatchZeroMakeNoDriverCall) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const int calls = driver.calls.load();
  CommitProblem bad = validCommit();
  bad.tokens = 9;
  const Status s = run(bad, nullptr, 0, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gdn: tokens 9 exceeds max_tokens 8 of gdn_mtp_commit_dk128_dv128");
  EXPECT_EQ(canImplement(bad).message(), s.message());
  bad = validCommit();
  bad.accepted = nullptr;
  EXPECT_EQ(run(bad, nullptr, 0, stream).message(), "gdn: accepted is null");
  CommitProblem empty = validCommit();
  empty.batch = 0;
  empty.cache = nullptr;
  EXPECT_TRUE(run(empty, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.calls.load(), calls);
  EXPECT_TRUE(g_launches.empty());
}

// ---- prefill ----------------------------------------------------------------------------------

// 4 sequences, 1000 tokens in all, none longer than 300; 32 value heads over 16 query/key heads.
PrefillProblem validPrefill() {
  PrefillProblem p;
  p.dtype = DType::kBFloat16;
  p.batch = 4;
  p.tokens = 1000;
  p.max_seqlen = 300;
  p.heads_qk = 16;
  p.heads_v = 32;
  p.num_slots = 64;
  p.scale = 0.125f;
  p.q = fakeAddress<const void>(0x7f0000100000);
  p.k = fakeAddress<const void>(0x7f0000110000);
  p.v = fakeAddress<const void>(0x7f0000120000);
  p.g = fakeAddress<const float>(0x7f0000200000);
  p.beta = fakeAddress<const float>(0x7f0000210000);
  p.out = fakeAddress(0x7f0000300000);
  p.state = fakeAddress<float>(std::uintptr_t{1} << 40);
  p.slots = fakeAddress<const std::int32_t>(0x7f0000010000);
  p.cu_seqlens = fakeAddress<const std::int32_t>(0x7f0000020000);
  p.has_initial_state = fakeAddress<const std::int32_t>(0x7f0000030000);
  return p;
}

constexpr std::uintptr_t kWorkspaceBase = std::uintptr_t{3} << 40;

std::uint32_t bitsOf(float f) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// kiln.toml's prefill families, in the generated table: chunk 64, no token limit; chunk 0 for the
// rest.
TEST(GdnRunner, TheGeneratedTableHasThePrefillVariants) {
  int prefills = 0;
  for (const VariantInfo& v : generated::gdn::kVariants) {
    if (std::string(v.name).rfind("gdn_prefill_", 0) != 0) {
      EXPECT_EQ(v.chunk, 0) << v.name;
      continue;
    }
    ++prefills;
    EXPECT_EQ(v.chunk, 64) << v.name;
    EXPECT_EQ(v.max_tokens, 0) << v.name;
    EXPECT_EQ(v.tiles_per_block, 1) << v.name;
  }
  EXPECT_EQ(prefills, 4);  // fp16, bf16; g and beta, fused gating
}

TEST(GdnRunner, PrefillLaunchesTheChunkKernelThenTheStateKernel) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const PrefillProblem p = validPrefill();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  const PrefillWorkspace w = prefillWorkspace(128, 128, 64, 2, 1000, 32);
  ASSERT_EQ(workspaceSize(p), w.bytes);
  const Status s = run(p, fakeAddress(kWorkspaceBase), w.bytes, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 2u);

  const fake::LaunchRecord& chunk = g_launches[0];
  EXPECT_EQ(chunk.function, "kiln_gdn_prefill_chunk");
  // One cubin with both entries (gdn_prefill.py traces them together).
  EXPECT_EQ(chunk.image, "FAKECUBIN kiln_gdn_prefill_chunk kiln_gdn_prefill_state");
  EXPECT_EQ(chunk.stream, stream);
  EXPECT_EQ(chunk.grid[0], 5u);  // ceil(300 / 64) chunks of the longest sequence
  EXPECT_EQ(chunk.grid[1], 32u);
  EXPECT_EQ(chunk.grid[2], 4u);
  EXPECT_EQ(chunk.block[0], prefillChunkThreads(128, 128));
  EXPECT_EQ(chunk.block[1], 1u);
  EXPECT_EQ(chunk.block[2], 1u);
  EXPECT_EQ(chunk.shared_bytes, prefillChunkSmem(64, 128));
  EXPECT_FALSE(chunk.programmatic);
  // Past the 48 KB default: the runtime opted the function in.
  EXPECT_GE(driver.functionSharedOptIn("kiln_gdn_prefill_chunk"),
            static_cast<int>(prefillChunkSmem(64, 128)));

  const fake::LaunchRecord& state = g_launches[1];
  EXPECT_EQ(state.function, "kiln_gdn_prefill_state");
  EXPECT_EQ(state.image, chunk.image);
  EXPECT_EQ(state.stream, stream);
  const LaunchShape shape = launchShape(128, 128, 32, 4, 1, 32, 4);
  EXPECT_EQ(state.grid[0], shape.grid_x);
  EXPECT_EQ(state.grid[1], 32u);
  EXPECT_EQ(state.grid[2], 4u);
  EXPECT_EQ(state.block[0], 32u);
  EXPECT_EQ(state.block[1], 4u);
  EXPECT_EQ(state.block[2], 1u);
  EXPECT_EQ(state.shared_bytes, prefillStateSmem(64, 128, 32, 4, 2));
  EXPECT_FALSE(state.programmatic);
  EXPECT_GE(driver.functionSharedOptIn("kiln_gdn_prefill_state"),
            static_cast<int>(prefillStateSmem(64, 128, 32, 4, 2)));

  const auto ws = [&](std::uint64_t offset) {
    return fakeAddress<const void>(kWorkspaceBase + offset);
  };
  ASSERT_EQ(g_prefill_args.size(), 2u);
  const std::vector<const void*> chunk_pointers = {
      p.q,     p.k,          p.v,     p.g,     p.beta,   nullptr,  nullptr,    nullptr, nullptr,
      p.slots, p.cu_seqlens, ws(w.w), ws(w.u), ws(w.qd), ws(w.kd), ws(w.attn), ws(w.gc)};
  EXPECT_EQ(g_prefill_args[0].pointers, chunk_pointers);
  EXPECT_EQ(g_prefill_args[0].scalars, (std::vector<std::uint32_t>{bitsOf(0.125f), 16, 32}));
  const std::vector<const void*> state_pointers = {
      ws(w.w), ws(w.u), ws(w.qd), ws(w.kd),     ws(w.attn),         ws(w.gc),
      p.out,   p.state, p.slots,  p.cu_seqlens, p.has_initial_state};
  EXPECT_EQ(g_prefill_args[1].pointers, state_pointers);
  EXPECT_EQ(g_prefill_args[1].scalars, (std::vector<std::uint32_t>{1, 32}));  // initial_given
}

// The gating inputs go to the `_gating` variant's chunk kernel, g and beta null; without
// has_initial_state every sequence starts from its slot (initial_given 0).
TEST(GdnRunner, PrefillPassesTheGatingInputsAndNoInitialFlags) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  PrefillProblem p = validPrefill();
  p.g = p.beta = nullptr;
  p.gating.a = fakeAddress<const void>(0x7f0000400000);
  p.gating.b = fakeAddress<const void>(0x7f0000410000);
  p.gating.a_log = fakeAddress<const float>(0x7f0000420000);
  p.gating.dt_bias = fakeAddress<const float>(0x7f0000430000);
  p.has_initial_state = nullptr;
  const Status s = run(p, fakeAddress(kWorkspaceBase), workspaceSize(p), stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_prefill_args.size(), 2u);
  const std::vector<const void*> gates(g_prefill_args[0].pointers.begin() + 3,
                                       g_prefill_args[0].pointers.begin() + 9);
  EXPECT_EQ(gates, (std::vector<const void*>{nullptr, nullptr, p.gating.a, p.gating.b,
                                             p.gating.a_log, p.gating.dt_bias}));
  EXPECT_EQ(g_prefill_args[1].pointers[10], nullptr);  // has_initial_state
  EXPECT_EQ(g_prefill_args[1].scalars, (std::vector<std::uint32_t>{0, 32}));
}

// Sequences of length 0: no chunk kernel and no workspace; the state kernel writes each live
// slot's starting state back.
TEST(GdnRunner, PrefillWithoutTokensLaunchesOnlyTheStateKernel) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  PrefillProblem p = validPrefill();
  p.tokens = p.max_seqlen = 0;
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(g_launches.size(), 1u);
  EXPECT_EQ(g_launches[0].function, "kiln_gdn_prefill_state");
  EXPECT_EQ(g_launches[0].grid[2], 4u);
  ASSERT_EQ(g_prefill_args.size(), 1u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g_prefill_args[0].pointers[i], nullptr) << i;
  EXPECT_EQ(g_prefill_args[0].pointers[6], p.out);
}

TEST(GdnRunner, PrefillWorkspaceErrorsSurfaceFromRunBeforeAnyLaunch) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const PrefillProblem p = validPrefill();
  const std::size_t bytes = workspaceSize(p);
  ASSERT_EQ(bytes, 41088000u);  // 1000 x 32 x (4 x 128 x 2 + 64 x 4 + 4)
  Status s = run(p, nullptr, bytes, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "gdn: prefill: needs a workspace of 41088000 bytes (workspaceSize()); workspace is "
            "null");
  s = run(p, fakeAddress(kWorkspaceBase), bytes - 1, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "gdn: prefill: workspace of 41087999 bytes is smaller than the 41088000 bytes the "
            "prefill needs");
  s = run(p, fakeAddress(kWorkspaceBase + 16), bytes, stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gdn: prefill: pointer workspace (0x30000000010) is not 256-byte aligned");
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_TRUE(g_launches.empty());
}

TEST(GdnRunner, RefusedPrefillsAndBatchZeroMakeNoDriverCall) {
  fake::Driver driver({fake::h200()});
  recordLaunches(driver);
  CUstream stream = driver.makeStream(0);
  const int calls = driver.calls.load();
  PrefillProblem bad = validPrefill();
  bad.max_seqlen = 1001;
  const Status s = run(bad, fakeAddress(kWorkspaceBase), workspaceSize(validPrefill()), stream);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gdn: prefill: max_seqlen 1001 exceeds tokens 1000");
  EXPECT_EQ(canImplement(bad).message(), s.message());
  EXPECT_EQ(workspaceSize(bad), 0u);
  bad = validPrefill();
  bad.cu_seqlens = nullptr;
  EXPECT_EQ(run(bad, fakeAddress(kWorkspaceBase), workspaceSize(bad), stream).message(),
            "gdn: prefill: cu_seqlens is null");
  PrefillProblem empty;
  empty.heads_qk = empty.heads_v = 1;
  EXPECT_EQ(workspaceSize(empty), 0u);
  EXPECT_TRUE(run(empty, nullptr, 0, stream).ok());
  EXPECT_EQ(driver.calls.load(), calls);
  EXPECT_TRUE(g_launches.empty());
}

// workspaceSize is from the shapes: a caller sizes the workspace before it has its tensors.
TEST(GdnRunner, PrefillWorkspaceSizeNeedsNoPointers) {
  PrefillProblem p;
  p.dtype = DType::kFloat16;
  p.batch = 2;
  p.tokens = 1000;
  p.max_seqlen = 700;
  p.heads_qk = 16;
  p.heads_v = 32;
  EXPECT_EQ(workspaceSize(p), prefillWorkspace(128, 128, 64, 2, 1000, 32).bytes);
  EXPECT_EQ(canImplement(p).message(), "gdn: num_slots 0 must be >= 1");
}

TEST(GdnRunner, AnSmTheGroupIsNotBuiltForIsNamed) {
  const Status s = canImplement(validCommit(), 75);
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(),
            "gdn_mtp_commit_dk128_dv128: artifact has sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, "
            "sm_110, sm_120 only; device is sm_75");
}

}  // namespace
}  // namespace kiln::gdn
