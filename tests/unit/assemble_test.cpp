// Assemble from a plan built by hand, with no filesystem: the compiled images' results enter the
// metadata, a kept image's record and bytes are used as they are, and the files and library
// members come in their fixed order (generated, then the runtime's, then each runner's), the
// group header in the runner's types when the runner declares them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/assemble.h"
#include "core/codegen.h"
#include "io/fs.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;

ImageRecord image(const std::string& variant, int sm) {
  ImageRecord image;
  image.sm = sm;
  image.target = smName(sm);
  image.symbol = imageSymbol(variant, sm);
  image.cubin = imagePath(variant, sm, /*ptx=*/false);
  return image;
}

// rms_h1024 for sm_80 (kept from the old artifact) and sm_90 (compiled now).
ArtifactPlan makePlan() {
  ArtifactPlan plan;
  plan.artifact_dir = "/out/x86_64/sm_80_sm_90";
  ArtifactMetadata& m = plan.metadata;
  m.provenance.tag = "sm_80_sm_90";
  VariantRecord& v = m.variants["rms_h1024"];
  v.name = "rms_h1024";
  v.group = "rms";
  v.kind = "cuda";
  v.entries = {"kiln_rms"};
  v.constants = {{"hidden", ConstantType::kInt, std::int64_t{1024}}};
  v.images[80] = image("rms_h1024", 80);
  v.images[80].sha256 = io::sha256Hex("old sm_80");
  v.images[90] = image("rms_h1024", 90);
  m.groups["rms"] = {"cuda", {80, 90}, {"rms_h1024"}};
  return plan;
}

CompiledImage compiledSm90() {
  CompiledImage c;
  c.variant = "rms_h1024";
  c.sm = 90;
  c.bytes = "new sm_90";
  c.seconds = 1.5;
  c.kernels["kiln_rms"].registers = 40;
  c.command = {"nvcc", "-o", "/out/x86_64/sm_80_sm_90/cubins/rms_h1024.sm_90.cubin"};
  return c;
}

RuntimeSources makeRuntime() {
  RuntimeSources runtime;
  runtime.headers = {{"include/kiln/variant.h", "variant"}};
  runtime.sources = {"/repo/runtime/src/loader.cpp", "/repo/runtime/src/status.cpp"};
  RunnerSources& runner = runtime.runners["rms"];
  runner.dir = "/repo/kernels/rms/runner";
  runner.headers = {{"include/kiln/runners/rms.h", "runner"}};
  runner.sources = {"/repo/kernels/rms/runner/runner.cpp"};
  return runtime;
}

TEST(AssembleTest, RecordsTheCompiledImagesAndKeepsTheOthers) {
  const ArtifactPlan plan = makePlan();
  const auto out = assembleArtifact(plan, {compiledSm90()},
                                    {{"cubins/rms_h1024.sm_80.cubin", "old sm_80"}}, makeRuntime());
  const VariantRecord& v = out.metadata.variants.at("rms_h1024");
  const ImageRecord& compiled = v.images.at(90);
  EXPECT_EQ(compiled.sha256, io::sha256Hex("new sm_90"));
  EXPECT_EQ(compiled.size, 9u);
  EXPECT_EQ(compiled.compile_seconds, 1.5);
  EXPECT_EQ(compiled.command, compiledSm90().command);
  EXPECT_EQ(compiled.kernels.at("kiln_rms").registers, 40);
  EXPECT_EQ(v.images.at(80).sha256, plan.metadata.variants.at("rms_h1024").images.at(80).sha256);

  std::vector<std::string> paths;
  for (const auto& file : out.files) paths.push_back(file.path);
  EXPECT_EQ(paths,
            (std::vector<std::string>{"include/kiln/variants/rms_h1024.h",
                                      ".src/rms_h1024.sm_80.cpp", ".src/rms_h1024.sm_90.cpp",
                                      ".src/rms_h1024.cpp", "include/kiln/groups/rms.h",
                                      "include/kiln/kiln_all.h", ".src/kiln_artifact.cpp",
                                      "include/kiln/variant.h", "include/kiln/runners/rms.h"}));
  EXPECT_EQ(out.files[1].bytes, imageShimSource(v, v.images.at(80), "old sm_80"));
  EXPECT_EQ(out.files[2].bytes, imageShimSource(v, compiled, "new sm_90"));
  EXPECT_EQ(out.files[4].bytes, groupHeader("rms", out.metadata.groups.at("rms"), {&v},
                                            /*runner_types=*/true));
  EXPECT_EQ(out.files[6].bytes, artifactTableSource(out.metadata));
}

TEST(AssembleTest, MembersComeInArchiveOrder) {
  const auto out = assembleArtifact(makePlan(), {compiledSm90()},
                                    {{"cubins/rms_h1024.sm_80.cubin", "old sm_80"}}, makeRuntime());
  std::vector<std::string> members;
  for (const auto& m : out.members)
    members.push_back(m.source.string() + " -> " + m.object.string());
  EXPECT_EQ(members, (std::vector<std::string>{
                         ".src/rms_h1024.sm_80.cpp -> .obj/rms_h1024.sm_80.o",
                         ".src/rms_h1024.sm_90.cpp -> .obj/rms_h1024.sm_90.o",
                         ".src/rms_h1024.cpp -> .obj/rms_h1024.o",
                         ".src/kiln_artifact.cpp -> .obj/kiln_artifact.o",
                         "/repo/runtime/src/loader.cpp -> .obj/runtime_loader.o",
                         "/repo/runtime/src/status.cpp -> .obj/runtime_status.o",
                         "/repo/kernels/rms/runner/runner.cpp -> .obj/runner_rms_runner.o"}));
  EXPECT_TRUE(out.members[0].includes.empty());
  EXPECT_EQ(out.members.back().includes, std::vector<fs::path>{"/repo/kernels/rms/runner/include"});
}

// Without kiln/runners/<group>.h (or without a runner), the table is of plain values.
TEST(AssembleTest, GroupHeaderWithoutRunnerTypes) {
  RuntimeSources runtime = makeRuntime();
  runtime.runners.at("rms").headers.clear();
  const auto out = assembleArtifact(makePlan(), {compiledSm90()},
                                    {{"cubins/rms_h1024.sm_80.cubin", "old sm_80"}}, runtime);
  const VariantRecord& v = out.metadata.variants.at("rms_h1024");
  EXPECT_EQ(out.files[4].path, "include/kiln/groups/rms.h");
  EXPECT_EQ(out.files[4].bytes, groupHeader("rms", out.metadata.groups.at("rms"), {&v},
                                            /*runner_types=*/false));
}

}  // namespace
}  // namespace kiln::core
