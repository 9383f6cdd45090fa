// The plan from inputs built by hand, with no filesystem, process or tool: a record per image of
// the selection (cubin and PTX), the fingerprints (a variant's covers this build's provenance, the
// artifact's the merged one and the runtime), a merge (the variants kept, the union of compile
// targets, the CUTLASS version and groups kept), a merge refused, and duplicate symbols.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/artifact_plan.h"
#include "core/cute_dsl_frontend.h"
#include "core/fingerprint.h"

namespace kiln::core {
namespace {

Group makeGroup(const std::string& name, SourceKind kind,
                const std::vector<std::string>& variants) {
  Group group;
  group.name = name;
  group.kind = kind;
  group.supported_sms = {80, 90};
  for (const auto& variant : variants) {
    Variant v;
    v.name = variant;
    v.group = name;
    v.kind = kind;
    v.entries = {"kiln_" + variant};
    v.supported_sms = {80, 90};
    v.constants = {{"hidden", ConstantType::kInt, std::int64_t{1024}}};
    group.variants.push_back(v);
  }
  return group;
}

// rms (two CUDA variants) and dsl (one CuTe DSL variant), for `sms`.
BuildInputs makeInputs(const std::vector<GpuArch>& sms, const std::string& kernels = "ALL") {
  BuildInputs in;
  in.kiln_version = "0.1.0";
  in.arch = "x86_64";
  in.artifact_dir = "/out/x86_64/" + artifactTag(sms);
  in.tools.cuda.version = "13.0.88";
  in.tools.host = {"x86_64", "g++", "g++ 12.2.0", "x86_64-linux-gnu", "ar"};
  in.tools.cute_dsl.version = "4.8.1";
  in.tools.cute_dsl.cuda_major = 13;
  in.registry.groups = {makeGroup("dsl", SourceKind::kCuteDsl, {"dsl_h1024"}),
                        makeGroup("rms", SourceKind::kCuda, {"rms_h1024", "rms_h2048"})};
  auto selection = planBuild(in.registry, parseGroupList(kernels), sms);
  EXPECT_TRUE(selection) << selection.error();
  in.selection = std::move(selection).value();
  in.group_inputs = {{"dsl", {{"kernels/dsl/k.py", "aa"}}}, {"rms", {{"kernels/rms/k.cu", "bb"}}}};
  in.runtime.inputs = {{"runtime/src/loader.cpp", "cc"}};
  return in;
}

// The provenance of an earlier build of the same tools, for `sms`.
ArtifactMetadata oldArtifact(const BuildInputs& in) {
  auto plan = planArtifact(in);
  EXPECT_TRUE(plan) << plan.error();
  return plan->metadata;
}

TEST(ArtifactPlanTest, RecordsEveryImageOfTheSelection) {
  const BuildInputs in = makeInputs({80, 90}, "rms");
  auto plan = planArtifact(in);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->artifact_dir, "/out/x86_64/sm_80_sm_90");
  EXPECT_TRUE(plan->kept.empty());
  const ArtifactMetadata& m = plan->metadata;
  EXPECT_EQ(m.provenance.tag, "sm_80_sm_90");
  EXPECT_EQ(m.provenance.compile_targets, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(m.provenance.host_compiler_version, "g++ 12.2.0");
  ASSERT_EQ(m.variants.size(), 2u);
  const VariantRecord& v = m.variants.at("rms_h2048");
  EXPECT_EQ(v.group, "rms");
  EXPECT_EQ(v.kind, "cuda");
  EXPECT_EQ(v.entries, std::vector<std::string>{"kiln_rms_h2048"});
  EXPECT_EQ(v.inputs, in.group_inputs.at("rms"));
  ASSERT_EQ(v.images.size(), 2u);
  const ImageRecord& image = v.images.at(80);
  EXPECT_EQ(image.target, "sm_80");
  EXPECT_EQ(image.format, "cubin");
  EXPECT_EQ(image.symbol, "kiln_rms_h2048__arch80_image");
  EXPECT_EQ(image.cubin, "cubins/rms_h2048.sm_80.cubin");
  EXPECT_TRUE(image.sha256.empty());  // compiling tells
  EXPECT_EQ(m.groups.size(), 1u);
  EXPECT_EQ(m.groups.at("rms").kind, "cuda");
  EXPECT_EQ(m.groups.at("rms").variants, (std::vector<std::string>{"rms_h1024", "rms_h2048"}));
  EXPECT_EQ(m.runtime_inputs, in.runtime.inputs);
  EXPECT_EQ(v.fingerprint,
            variantFingerprint(v, *in.registry.findVariant("rms_h2048"), m.provenance));
  EXPECT_EQ(m.fingerprint, artifactFingerprint(m));
}

TEST(ArtifactPlanTest, ComputeEntriesArePtxImages) {
  auto plan = planArtifact(makeInputs({GpuArch(80, /*is_ptx=*/true), 90}, "rms"));
  ASSERT_TRUE(plan) << plan.error();
  const auto& images = plan->metadata.variants.at("rms_h1024").images;
  EXPECT_EQ(images.at(80).target, "compute_80");
  EXPECT_EQ(images.at(80).format, "ptx");
  EXPECT_EQ(images.at(80).cubin, "cubins/rms_h1024.compute_80.ptx");
  EXPECT_EQ(images.at(90).format, "cubin");
  EXPECT_EQ(plan->metadata.provenance.compile_targets,
            (std::vector<std::string>{"compute_80", "sm_90"}));
}

TEST(ArtifactPlanTest, CuteDslVariantsCoverTheDslVersion) {
  const BuildInputs in = makeInputs({90});
  auto plan = planArtifact(in);
  ASSERT_TRUE(plan) << plan.error();
  const VariantRecord& v = plan->metadata.variants.at("dsl_h1024");
  EXPECT_EQ(v.kind, "cute_dsl");
  EXPECT_EQ(v.fingerprint,
            cuteDslFingerprint(variantFingerprint(v, *in.registry.findVariant("dsl_h1024"),
                                                  plan->metadata.provenance),
                               in.tools.cute_dsl));
}

// Issue 28: the artifact records the CuTe DSL (version and CUDA flavour) when it has DSL
// variants, and not otherwise (the tools' DSL is detected only for a DSL variant in a real build,
// but the rule is the selection's: rms alone records none, whatever was detected).
TEST(ArtifactPlanTest, RecordsTheCuteDslOnlyWithDslVariants) {
  auto dsl = planArtifact(makeInputs({90}));
  ASSERT_TRUE(dsl) << dsl.error();
  EXPECT_EQ(dsl->metadata.provenance.cute_dsl_version, "4.8.1");
  EXPECT_EQ(dsl->metadata.provenance.cute_dsl_cuda, "cu13");
  auto rms = planArtifact(makeInputs({90}, "rms"));
  ASSERT_TRUE(rms) << rms.error();
  EXPECT_FALSE(rms->metadata.provenance.cute_dsl_version);
  EXPECT_FALSE(rms->metadata.provenance.cute_dsl_cuda);
}

// A merge keeps the old artifact's DSL when this build has none, and refuses another DSL.
TEST(ArtifactPlanTest, MergeKeepsTheOldCuteDslAndRefusesAnother) {
  BuildInputs in = makeInputs({90}, "rms");
  in.old = oldArtifact(makeInputs({90}, "dsl"));
  auto plan = planArtifact(in);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->metadata.provenance.cute_dsl_version, "4.8.1");
  EXPECT_EQ(plan->metadata.provenance.cute_dsl_cuda, "cu13");
  EXPECT_EQ(plan->metadata.fingerprint, artifactFingerprint(plan->metadata));

  BuildInputs again = makeInputs({90}, "dsl");
  again.tools.cute_dsl.version = "4.9.0";
  again.old = oldArtifact(makeInputs({90}, "dsl"));
  auto refused = planArtifact(again);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(refused.error().find("CuTe DSL version differs (old: 4.8.1 (cu13), new: 4.9.0 (cu13)); "
                                 "re-run with --clean"),
            std::string::npos)
      << refused.error();
}

// The runtime enters the artifact's fingerprint, and no variant's.
TEST(ArtifactPlanTest, RuntimeInputsChangeTheArtifactFingerprintOnly) {
  BuildInputs in = makeInputs({90});
  auto before = planArtifact(in);
  in.runtime.inputs["runtime/src/loader.cpp"] = "dd";
  auto after = planArtifact(in);
  ASSERT_TRUE(before && after);
  EXPECT_NE(before->metadata.fingerprint, after->metadata.fingerprint);
  for (const auto& [name, v] : before->metadata.variants)
    EXPECT_EQ(v.fingerprint, after->metadata.variants.at(name).fingerprint) << name;
}

// The old artifact's variants not rebuilt are kept as they were, with their compile targets, its
// CUTLASS version and its groups; the variants' fingerprints cover this build's provenance.
TEST(ArtifactPlanTest, MergeKeepsTheOldVariantsNotRebuilt) {
  BuildInputs in = makeInputs({90}, "rms");
  ArtifactMetadata old = oldArtifact(makeInputs({90}, "dsl"));
  old.provenance.cutlass_version = "4.2.0";
  old.variants.at("dsl_h1024").images.at(90).target = "sm_90a";
  old.variants.at("dsl_h1024").images.at(90).sha256 = "ee";
  VariantRecord renamed = old.variants.at("dsl_h1024");  // rebuilt now: the new record wins
  renamed.name = "rms_h1024";
  renamed.group = "rms";
  old.variants["rms_h1024"] = renamed;
  old.groups["rms"].variants = {"rms_h1024"};
  in.old = old;

  auto plan = planArtifact(in);
  ASSERT_TRUE(plan) << plan.error();
  EXPECT_EQ(plan->kept, std::vector<std::string>{"dsl_h1024"});
  const ArtifactMetadata& m = plan->metadata;
  ASSERT_EQ(m.variants.size(), 3u);
  EXPECT_EQ(m.variants.at("dsl_h1024").images.at(90).sha256, "ee");
  EXPECT_EQ(m.variants.at("rms_h1024").kind, "cuda");
  EXPECT_TRUE(m.variants.at("rms_h1024").images.at(90).sha256.empty());
  EXPECT_EQ(m.provenance.compile_targets, (std::vector<std::string>{"sm_90", "sm_90a"}));
  EXPECT_EQ(m.provenance.cutlass_version, "4.2.0");
  EXPECT_EQ(m.groups.at("dsl").variants, std::vector<std::string>{"dsl_h1024"});
  EXPECT_EQ(m.groups.at("rms").variants, (std::vector<std::string>{"rms_h1024", "rms_h2048"}));
  Provenance before_merge = m.provenance;
  before_merge.compile_targets = {"sm_90"};
  before_merge.cutlass_version.reset();
  EXPECT_EQ(m.variants.at("rms_h1024").fingerprint,
            variantFingerprint(m.variants.at("rms_h1024"), *in.registry.findVariant("rms_h1024"),
                               before_merge));
  EXPECT_EQ(m.fingerprint, artifactFingerprint(m));
}

// metadata.json keeps a dtype or enum constant as a bare string, which reads back as an enum; a
// kept variant takes its constants' types from its group's kiln.toml, so the group header it gets
// has the runner's types (a dtype as kiln::DType, not as an enum named Dtype).
TEST(ArtifactPlanTest, MergeTakesTheKeptConstantsTypesFromTheRegistry) {
  BuildInputs in = makeInputs({90}, "dsl");
  Group& rms = in.registry.groups[1];
  rms.constants = {{"hidden", ConstantType::kInt},
                   {"dtype", ConstantType::kDtype},
                   {"mode", ConstantType::kEnum}};
  ArtifactMetadata old = oldArtifact(makeInputs({90}, "rms"));
  old.variants.at("rms_h1024").constants = {{"hidden", ConstantType::kInt, std::int64_t{1024}},
                                            {"dtype", ConstantType::kEnum, std::string("bf16")},
                                            {"mode", ConstantType::kEnum, std::string("plain")}};
  in.old = old;

  auto plan = planArtifact(in);
  ASSERT_TRUE(plan) << plan.error();
  const auto& constants = plan->metadata.variants.at("rms_h1024").constants;
  ASSERT_EQ(constants.size(), 3u);
  EXPECT_EQ(constants[0].type, ConstantType::kInt);
  EXPECT_EQ(constants[1].type, ConstantType::kDtype);
  EXPECT_EQ(std::get<std::string>(constants[1].value), "bf16");
  EXPECT_EQ(constants[2].type, ConstantType::kEnum);
}

TEST(ArtifactPlanTest, MergeRefusedWhenTheProvenanceDiffers) {
  BuildInputs in = makeInputs({90}, "rms");
  in.old = oldArtifact(makeInputs({90}, "dsl"));
  in.old->provenance.host_compiler_version = "g++ 11.4.0";
  auto plan = planArtifact(in);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(plan.error(),
            "cannot merge into /out/x86_64/sm_90: the existing artifact's host compiler version "
            "differs (old: g++ 11.4.0, new: g++ 12.2.0); re-run with --clean");
}

// Names are unique by the registry, but a kept variant's recorded symbols may collide.
TEST(ArtifactPlanTest, DuplicateSymbolsFailThePlan) {
  BuildInputs in = makeInputs({90}, "rms");
  in.old = oldArtifact(makeInputs({90}, "dsl"));
  in.old->variants.at("dsl_h1024").images.at(90).symbol = "kiln_rms_h1024_variant";
  auto plan = planArtifact(in);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.errorKind(), ErrorKind::kFailure);
  EXPECT_EQ(plan.error(),
            "duplicate global symbol kiln_rms_h1024_variant (variants dsl_h1024 and rms_h1024)");
}

}  // namespace
}  // namespace kiln::core
