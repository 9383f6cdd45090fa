// The artifact fingerprint covers every input of lib/libkiln.a (library_recipe.h, metadata.h):
// the builder compiles and archives with exactly the recipe's flags (so the recipe the
// fingerprint folds in is the one used), the recipe and the code generator are in the
// fingerprint, and, through a build with fake tools, a runner source is an input while a group's
// tests/ and bench/ are not (editing them leaves the fingerprint as it was). The runtime's and the
// runners' sources changing the fingerprint is builder_test's RuntimeSourcesAreInputsOf...; the
// consumer side (kiln_import_artifacts) is tests/e2e/consumer's library_inputs case.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "core/builder.h"
#include "core/fingerprint.h"
#include "core/library_recipe.h"
#include "core/metadata.h"
#include "io/fs.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;

class LibraryRecipe : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln::testing::writeGroup(tmp_.path(), "alpha");
    write("kernels/alpha/runner/runner.cpp", "int alpha_runner;\n");
    write("kernels/alpha/runner/include/kiln/runners/alpha.h", "#pragma once\n");
    write("kernels/alpha/tests/alpha_selector_test.cpp", "// a CPU test\n");
    write("kernels/alpha/tests/gpu/alpha_numerics_test.cpp", "// a GPU test\n");
    write("kernels/alpha/bench/alpha_bridge.cpp", "// a bench bridge\n");
    options_.gpu_arch = "sm_90";
    options_.arch = "x86_64";
    options_.root = tmp_.path();
    options_.output_dir = tmp_.path() / "artifacts";
    options_.nvcc = "nvcc";
    options_.jobs = 2;
    options_.kiln_version = "0.1.0";
    options_.stage_dir = (tmp_.path() / "stage").string();
    options_.kernels = "alpha";
    options_.clean = true;
  }
  void write(const std::string& rel, const std::string& text) {
    ASSERT_TRUE(io::writeFile(tmp_.path() / rel, text));
  }
  nlohmann::json build() {
    BuildSink sink;
    auto built = runBuild(options_, tools_.runner, sink);
    EXPECT_TRUE(built) << built.error();
    auto text = io::readFile(tmp_.path() / "artifacts/x86_64/sm_90/metadata.json");
    return nlohmann::json::parse(text ? *text : std::string("{}"));
  }

  kiln::testing::TempDir tmp_;
  kiln::testing::FakeTools tools_;
  BuildOptions options_;
};

// The flags the fingerprint records are the flags the builder passes: if one changes without
// the other, this fails (update kHostCompileFlags / kArchiveFlags, and the builder uses them).
TEST_F(LibraryRecipe, TheBuilderCompilesAndArchivesWithTheRecipesFlags) {
  build();
  int compiles = 0, archives = 0;
  const std::vector<std::string> flags(kHostCompileFlags.begin(), kHostCompileFlags.end());
  for (const auto& argv : tools_.runner.calls()) {
    const std::string tool = fs::path(argv[0]).filename().string();
    if (tool.find("g++") != std::string::npos &&
        std::find(argv.begin(), argv.end(), "-c") != argv.end()) {
      ++compiles;
      ASSERT_GT(argv.size(), flags.size());
      EXPECT_EQ(std::vector<std::string>(argv.begin() + 1, argv.begin() + 1 + flags.size()), flags)
          << "a host compile's flags differ from kHostCompileFlags (library_recipe.h)";
    } else if (tool == "ar") {
      ++archives;
      ASSERT_GT(argv.size(), 1u);
      EXPECT_EQ(argv[1], kArchiveFlags) << "ar's flags differ from kArchiveFlags";
    }
  }
  EXPECT_GT(compiles, 3);  // shims, the artifact table, the runtime, the runner
  EXPECT_EQ(archives, 1);
}

TEST(LibraryRecipeText, NamesTheFlagsAndTheGenerator) {
  const std::string recipe = libraryRecipe();
  EXPECT_TRUE(std::regex_match(recipe, std::regex("host_compile_flags -std=c\\+\\+20 -O2 -fPIC\n"
                                                  "archive_flags rcsD\n"
                                                  "doctor_link_flags -pthread -ldl\n"
                                                  "codegen [0-9a-f]{64}\n")))
      << recipe;
  EXPECT_EQ(codegenFingerprint(), codegenFingerprint());
  EXPECT_NE(recipe.find(codegenFingerprint()), std::string::npos);
}

// A group's runner is an input of the library (runtime_inputs), its tests/ and bench/ are no
// input of anything: editing or adding a test or a bench file changes neither the artifact's nor
// a variant's fingerprint; editing the runner changes the artifact's only.
TEST_F(LibraryRecipe, RunnerIsAnInputTestsAndBenchAreNot) {
  const auto first = build();
  ASSERT_TRUE(first.contains("runtime_inputs")) << first.dump();
  const auto& runtime = first["runtime_inputs"];
  EXPECT_TRUE(runtime.contains("kernels/alpha/runner/runner.cpp")) << runtime.dump();
  EXPECT_TRUE(runtime.contains("kernels/alpha/runner/include/kiln/runners/alpha.h"));
  const auto& inputs = first["variants"]["alpha_h1024_bf16"]["inputs"];
  for (const auto* m : {&runtime, &inputs}) {
    for (auto it = m->begin(); it != m->end(); ++it) {
      EXPECT_EQ(it.key().find("/tests/"), std::string::npos) << it.key();
      EXPECT_EQ(it.key().find("/bench/"), std::string::npos) << it.key();
    }
  }
  EXPECT_FALSE(inputs.contains("kernels/alpha/runner/runner.cpp"));  // the library's, not nvcc's

  write("kernels/alpha/tests/alpha_selector_test.cpp", "// a CPU test, edited\n");
  write("kernels/alpha/tests/alpha_new_test.cpp", "// a new CPU test\n");
  write("kernels/alpha/tests/gpu/alpha_numerics_test.cpp", "// a GPU test, edited\n");
  write("kernels/alpha/bench/alpha_vs_torch.py", "# a new bench script\n");
  const auto tests_edited = build();
  EXPECT_EQ(tests_edited["fingerprint"], first["fingerprint"]);
  EXPECT_EQ(tests_edited["variants"]["alpha_h1024_bf16"]["fingerprint"],
            first["variants"]["alpha_h1024_bf16"]["fingerprint"]);

  write("kernels/alpha/runner/runner.cpp", "int alpha_runner = 2;\n");
  const auto runner_edited = build();
  EXPECT_NE(runner_edited["fingerprint"], first["fingerprint"]);
  EXPECT_EQ(runner_edited["variants"]["alpha_h1024_bf16"]["fingerprint"],
            first["variants"]["alpha_h1024_bf16"]["fingerprint"]);
}

// The recipe is part of the fingerprint: the same metadata hashed without it differs.
TEST(LibraryRecipeText, IsPartOfTheArtifactFingerprint) {
  ArtifactMetadata m;
  m.provenance.kiln_version = "0.1.0";
  m.provenance.arch = "x86_64";
  m.provenance.tag = "sm_90";
  m.provenance.gpu_archs = {GpuArch(90)};
  m.provenance.cuda_version = "13.0.88";
  m.provenance.host_compiler_command = "g++";
  m.provenance.host_compiler_version = "g++ 12.2.0";
  const std::string without = io::sha256Hex(
      "kiln 0.1.0\narch x86_64\nhost_target \ntag sm_90\ngpu_archs 90\ncompile_targets \ncuda "
      "13.0.88\nhost_compiler g++ g++ 12.2.0\ncutlass none\n");
  const std::string with = io::sha256Hex(
      "kiln 0.1.0\narch x86_64\nhost_target \ntag sm_90\ngpu_archs 90\ncompile_targets \ncuda "
      "13.0.88\nhost_compiler g++ g++ 12.2.0\ncutlass none\n" +
      libraryRecipe());
  EXPECT_EQ(artifactFingerprint(m), with);
  EXPECT_NE(artifactFingerprint(m), without);
}

}  // namespace
}  // namespace kiln::core
