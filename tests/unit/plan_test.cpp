// Build selection: --gpu-arch parsing, --kernels with unknown groups, supported_sms skips and
// the "nothing left" error, on registries built by hand.
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

TEST(Plan, ParsesGpuArchs) {
  EXPECT_EQ(*parseGpuArchs("sm_90"), (std::vector<int>{90}));
  EXPECT_EQ(*parseGpuArchs("sm_90,sm_87"), (std::vector<int>{87, 90}));
  auto bad = parseGpuArchs("hopper");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(bad.error().find("'hopper'"), std::string::npos);
  EXPECT_FALSE(parseGpuArchs("sm_90a"));
  EXPECT_FALSE(parseGpuArchs(""));
}

TEST(Plan, MultiSmListIsSortedAndStrict) {
  // Ascending by number whatever the input order (sm_110 after sm_90, not lexically before it).
  EXPECT_EQ(*parseGpuArchs("sm_110,sm_87, sm_90"), (std::vector<int>{87, 90, 110}));
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

TEST(Plan, MultiSmSelectsEachVariantSmPair) {
  const Registry registry = makeRegistry();
  auto plan = planBuild(registry, {}, {80, 87, 90});
  ASSERT_TRUE(plan) << plan.error();
  std::vector<std::string> jobs;
  for (const auto& job : plan->jobs) jobs.push_back(job.variant->name + "@" + std::to_string(job.sm));
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
  EXPECT_NE(std::find(plan->notes.begin(), plan->notes.end(),
                      "skipped fmha_wgmma_d128_bf16: none of the requested SMs is in its supported_sms"),
            plan->notes.end());
  auto nothing = planBuild(registry, {"fmha"}, {80, 87});
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.error(), "nothing to build: no variant of [fmha] lists sm_80 or sm_87 in its supported_sms");
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
  EXPECT_EQ(plan.error(), "nothing to build: no variant of [fmha] lists sm_87 in its supported_sms");
}

}  // namespace
}  // namespace kiln::core
