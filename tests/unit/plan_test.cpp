// Build selection: --gpu-arch parsing (sm_NN and compute_NN entries, and the two of one SM
// refused together), --kernels with unknown groups, supported_sms skips and the "nothing left"
// error, and compute_NN (PTX) jobs refused for arch_specific and cute_dsl groups, on registries
// built by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/plan.h"

namespace kiln::core {
namespace {

Registry makeRegistry() {
  Registry registry;
  registry.root = "/repo";
  Group rmsnorm;
  rmsnorm.name = "rmsnorm";
  rmsnorm.supported_sms = {80, 90};
  for (const char* name : {"rmsnorm_h4096_bf16", "rmsnorm_h1024_bf16"}) {
    Variant v;
    v.name = name;
    v.group = "rmsnorm";
    v.supported_sms = {80, 90};
    rmsnorm.variants.push_back(v);
  }
  Group fmha;
  fmha.name = "fmha";
  fmha.supported_sms = {90};
  Variant v;
  v.name = "fmha_wgmma_d128_bf16";
  v.group = "fmha";
  v.supported_sms = {90};
  v.arch_specific = true;
  fmha.variants.push_back(v);
  registry.groups = {fmha, rmsnorm};
  return registry;
}

// makeRegistry() plus a cute_dsl group, gdn, for sm_80 and sm_90.
Registry withCuteDslGroup() {
  Registry registry = makeRegistry();
  Group gdn;
  gdn.name = "gdn";
  gdn.kind = SourceKind::kCuteDsl;
  gdn.supported_sms = {80, 90};
  Variant v;
  v.name = "gdn_decode_dk128_dv128_bf16";
  v.group = "gdn";
  v.kind = SourceKind::kCuteDsl;
  v.supported_sms = {80, 90};
  gdn.variants.push_back(v);
  registry.groups.push_back(gdn);
  return registry;
}

// "name@sm" per job, with "/ptx" for a PTX job.
std::vector<std::string> jobNames(const BuildPlan& plan) {
  std::vector<std::string> jobs;
  for (const auto& job : plan.jobs)
    jobs.push_back(job.variant->name + "@" + std::to_string(job.sm) + (job.ptx ? "/ptx" : ""));
  return jobs;
}

TEST(Plan, ParsesGpuArchs) {
  EXPECT_EQ(*parseGpuArchs("sm_90"), (std::vector<GpuArch>{90}));
  EXPECT_EQ(*parseGpuArchs("sm_90,sm_87"), (std::vector<GpuArch>{87, 90}));
  auto bad = parseGpuArchs("hopper");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(bad.error().find("'hopper'"), std::string::npos);
  EXPECT_FALSE(parseGpuArchs("sm_90a"));
  EXPECT_FALSE(parseGpuArchs(""));
}

TEST(Plan, MultiSmListIsSortedAndStrict) {
  // Ascending by number whatever the input order (sm_110 after sm_90, not lexically before it).
  EXPECT_EQ(*parseGpuArchs("sm_110,sm_87, sm_90"), (std::vector<GpuArch>{87, 90, 110}));
  auto duplicate = parseGpuArchs("sm_90,sm_87,sm_90");
  ASSERT_FALSE(duplicate);
  EXPECT_EQ(duplicate.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(duplicate.error(), "--gpu-arch sm_90,sm_87,sm_90: 'sm_90' is listed twice");
  auto empty = parseGpuArchs("sm_87,,sm_90");
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("empty entry"), std::string::npos) << empty.error();
  EXPECT_FALSE(parseGpuArchs("sm_87,"));
  auto malformed = parseGpuArchs("sm_87,sm_9x");
  ASSERT_FALSE(malformed);
  EXPECT_NE(malformed.error().find("'sm_9x' is not an SM"), std::string::npos) << malformed.error();
  auto bare = parseGpuArchs("sm_87,90");
  ASSERT_FALSE(bare);
  EXPECT_NE(bare.error().find("'90' is not an SM"), std::string::npos) << bare.error();
}

TEST(Plan, ParsesComputeEntriesAsPtx) {
  EXPECT_EQ(*parseGpuArchs("compute_80"), (std::vector<GpuArch>{GpuArch(80, true)}));
  // Ascending by SM whatever the input order and whichever kind each entry is.
  EXPECT_EQ(*parseGpuArchs("sm_90,compute_80"),
            (std::vector<GpuArch>{GpuArch(80, true), GpuArch(90)}));
  EXPECT_EQ(*parseGpuArchs("compute_120,sm_87"),
            (std::vector<GpuArch>{GpuArch(87), GpuArch(120, true)}));
  auto twice = parseGpuArchs("compute_80,compute_80");
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error(), "--gpu-arch compute_80,compute_80: 'compute_80' is listed twice");
  for (const char* malformed : {"compute_80a", "compute_", "compute_8x", "compute80"}) {
    auto bad = parseGpuArchs(malformed);
    ASSERT_FALSE(bad) << malformed;
    EXPECT_EQ(bad.errorKind(), ErrorKind::kUsage);
    EXPECT_NE(bad.error().find(std::string("'") + malformed + "' is not an SM"), std::string::npos)
        << bad.error();
    EXPECT_NE(bad.error().find("compute_NN (compute_80) for PTX"), std::string::npos)
        << bad.error();
  }
}

// One image per (variant, SM): a cubin and PTX of the same SM cannot both be asked for.
TEST(Plan, CubinAndPtxOfOneSmAreRefusedTogether) {
  auto both = parseGpuArchs("sm_80,compute_80");
  ASSERT_FALSE(both);
  EXPECT_EQ(both.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(both.error(),
            "--gpu-arch sm_80,compute_80: 'sm_80' and 'compute_80' are both for SM 80; an artifact "
            "holds one "
            "image per variant and SM, a cubin or PTX; list one of them");
  auto reversed = parseGpuArchs("compute_90,sm_87,sm_90");
  ASSERT_FALSE(reversed);
  EXPECT_NE(reversed.error().find("'compute_90' and 'sm_90' are both for SM 90"), std::string::npos)
      << reversed.error();
}

TEST(Plan, ComputeEntryPlansPtxJobs) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {"rmsnorm"}, {GpuArch(80, true), GpuArch(90)});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(jobNames(*plan),
            (std::vector<std::string>{"rmsnorm_h1024_bf16@80/ptx", "rmsnorm_h1024_bf16@90",
                                      "rmsnorm_h4096_bf16@80/ptx", "rmsnorm_h4096_bf16@90"}));
  EXPECT_TRUE(plan->notes.empty());
  // A skip note names the entry as it was asked for.
  auto skipped = planBuild(registry, {"rmsnorm"}, {GpuArch(87, true), GpuArch(90)});
  ASSERT_TRUE(skipped) << skipped.error();
  ASSERT_EQ(skipped->notes.size(), 2u);
  EXPECT_EQ(skipped->notes[0],
            "skipped rmsnorm_h1024_bf16 for compute_87: its supported_sms are [80, 90]");
  auto nothing = planBuild(registry, {"rmsnorm"}, {GpuArch(87, true)});
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error(),
            "nothing to build: no variant of [rmsnorm] lists compute_87 in its supported_sms");
}

TEST(Plan, ComputeEntryRefusesArchSpecificGroups) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {}, {GpuArch(90, true)});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(plan.error(),
            "--gpu-arch compute_90: group fmha is arch_specific: variant fmha_wgmma_d128_bf16 "
            "needs sm_90a SASS, and "
            "PTX for compute_90 cannot hold its arch-specific instructions; build it for sm_90, or "
            "leave the group "
            "out with --kernels");
  // Left out, or not matching the compute_NN's SM, the group is no obstacle.
  EXPECT_TRUE(planBuild(registry, {"rmsnorm"}, {GpuArch(90, true)}));
  auto sm80 = planBuild(registry, {}, {GpuArch(80, true), GpuArch(90)});
  ASSERT_TRUE(sm80) << sm80.error();
  EXPECT_EQ(jobNames(*sm80).front(), "fmha_wgmma_d128_bf16@90");
}

TEST(Plan, ComputeEntryRefusesCuteDslGroups) {
  const Registry registry = withCuteDslGroup();
  auto plan = planBuild(registry, {"gdn", "rmsnorm"}, {GpuArch(80, true)});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(plan.error(),
            "--gpu-arch compute_80: group gdn is cute_dsl, whose front end (the DSL's AOT export) "
            "emits cubins "
            "only, no PTX; build it for sm_80, or leave the group out with --kernels");
  auto cubins = planBuild(registry, {"gdn"}, {GpuArch(80)});
  ASSERT_TRUE(cubins) << cubins.error();
  EXPECT_EQ(jobNames(*cubins), (std::vector<std::string>{"gdn_decode_dk128_dv128_bf16@80"}));
}

TEST(Plan, MultiSmSelectsEachVariantSmPair) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {}, {80, 87, 90});
  ASSERT_TRUE(plan) << plan.error();
  std::vector<std::string> jobs;
  for (const auto& job : plan->jobs)
    jobs.push_back(job.variant->name + "@" + std::to_string(job.sm));
  EXPECT_EQ(jobs, (std::vector<std::string>{"fmha_wgmma_d128_bf16@90", "rmsnorm_h1024_bf16@80",
                                            "rmsnorm_h1024_bf16@90", "rmsnorm_h4096_bf16@80",
                                            "rmsnorm_h4096_bf16@90"}));
  EXPECT_EQ(plan->variants.size(), 3u);
  EXPECT_EQ(plan->notes, (std::vector<std::string>{
                             "skipped fmha_wgmma_d128_bf16 for sm_80: its supported_sms are [90]",
                             "skipped fmha_wgmma_d128_bf16 for sm_87: its supported_sms are [90]",
                             "skipped rmsnorm_h1024_bf16 for sm_87: its supported_sms are [80, 90]",
                             "skipped rmsnorm_h4096_bf16 for sm_87: its supported_sms are [80, 90]",
                         }));
}

TEST(Plan, MultiSmVariantWithNoSmLeftIsSkippedWithANote) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {}, {80, 87});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0]->name, "rmsnorm");
  EXPECT_NE(
      std::find(plan->notes.begin(), plan->notes.end(),
                "skipped fmha_wgmma_d128_bf16: none of the requested SMs is in its supported_sms"),
      plan->notes.end());
  auto nothing = planBuild(registry, {"fmha"}, {80, 87});
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error(),
            "nothing to build: no variant of [fmha] lists sm_80 or sm_87 in its supported_sms");
}

TEST(Plan, AllSelectsEveryGroupSortedByName) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, parseGroupList("ALL"), {90});
  ASSERT_TRUE(plan) << plan.error();
  ASSERT_EQ(plan->jobs.size(), 3u);
  EXPECT_EQ(plan->jobs[0].variant->name, "fmha_wgmma_d128_bf16");
  EXPECT_EQ(plan->jobs[1].variant->name, "rmsnorm_h1024_bf16");
  EXPECT_EQ(plan->jobs[2].variant->name, "rmsnorm_h4096_bf16");
  EXPECT_TRUE(plan->notes.empty());
}

TEST(Plan, UnknownGroupListsKnownGroups) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, parseGroupList("rmsnorm,softmax"), {90});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(plan.error(), "--kernels: unknown group 'softmax'; known groups: fmha, rmsnorm");
}

TEST(Plan, UnsupportedSmIsSkippedWithANote) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {}, {80});
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->jobs.size(), 2u);
  ASSERT_EQ(plan->notes.size(), 1u);
  EXPECT_EQ(plan->notes[0], "skipped fmha_wgmma_d128_bf16 for sm_80: its supported_sms are [90]");
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0]->name, "rmsnorm");
}

TEST(Plan, NothingLeftIsAnError) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {"fmha"}, {87});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(plan.error(),
            "nothing to build: no variant of [fmha] lists sm_87 in its supported_sms");
}

}  // namespace
}  // namespace kiln::core
