// The build pipeline with a fake toolchain in a scratch repository: dependency checks, the
// artifact layout and metadata, merge accepted and refused, --clean, and the staged publish
// (a build that fails midway leaves the previous artifact byte-identical and no staging dir; an
// artifact a killed build left set aside is put back and merged into);
// compute_NN (PTX) builds: the .ptx files, their metadata and image shims, a PTX + cubin build,
// and the entry check on the PTX's .entry directives.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "core/builder.h"
#include "core/elf.h"
#include "core/inputs.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using kiln::testing::FakeTools;
using kiln::testing::TempDir;

class RecordingSink : public BuildSink {
 public:
  void note(const std::string& line) override { notes.push_back(line); }
  void compiled(const CompileProgress& p) override { progress.push_back(p); }
  std::vector<std::string> notes;
  std::vector<CompileProgress> progress;
};

class BuilderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln::testing::writeGroup(tmp_.path(), "alpha");
    kiln::testing::writeGroup(tmp_.path(), "beta");
    options_.gpu_arch = "sm_90";
    options_.arch = "x86_64";
    options_.root = tmp_.path();
    options_.output_dir = tmp_.path() / "artifacts";
    options_.nvcc = "nvcc";
    options_.jobs = 2;
    options_.kiln_version = "0.1.0";
    options_.stage_dir = (tmp_.path() / "stage").string();
  }
  Result<BuildSummary> build(const std::string& kernels = "ALL", bool clean = false) {
    options_.kernels = kernels;
    options_.clean = clean;
    return runBuild(options_, tools_.runner, sink_);
  }
  fs::path artifact() const { return tmp_.path() / "artifacts/x86_64/sm_90"; }
  nlohmann::json metadata() const {
    return nlohmann::json::parse(*io::readFile(artifact() / "metadata.json"));
  }
  bool stagingLeft() const {
    for (const auto& e : fs::directory_iterator(artifact().parent_path())) {
      if (e.path().filename().string().rfind(".sm_90.", 0) == 0) return true;
    }
    return false;
  }

  TempDir tmp_;
  FakeTools tools_;
  RecordingSink sink_;
  BuildOptions options_;
};

TEST_F(BuilderTest, BuildsTheDocumentedLayout) {
  auto r = build();
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->artifact_dir, artifact());
  EXPECT_EQ(r->built.size(), 4u);
  EXPECT_EQ(sink_.progress.size(), 4u);
  EXPECT_EQ(sink_.progress.back().done, 4);
  for (const char* rel :
       {"metadata.json", "lib/libkiln.a", "include/kiln/variant.h", "include/kiln/kiln_all.h",
        "include/kiln/groups/alpha.h", "include/kiln/variants/alpha_h1024_bf16.h",
        "cubins/beta_h2048_bf16.sm_90.cubin"}) {
    EXPECT_TRUE(fs::is_regular_file(artifact() / rel)) << rel;
  }
  EXPECT_FALSE(fs::exists(artifact() / ".src"));
  EXPECT_FALSE(fs::exists(artifact() / ".obj"));
  EXPECT_FALSE(stagingLeft());
  const auto m = metadata();
  EXPECT_EQ(m["schema_version"], 1);
  EXPECT_EQ(m["cuda_version"], "13.0.88");
  EXPECT_EQ(m["host_target"], "x86_64-linux-gnu");
  EXPECT_EQ(m["host_compiler"]["version"], "g++ (Fake) 12.2.0");
  EXPECT_EQ(m["compile_targets"], nlohmann::json::array({"sm_90"}));
  EXPECT_EQ(m["groups"]["alpha"]["variants"],
            nlohmann::json::array({"alpha_h1024_bf16", "alpha_h2048_bf16"}));
  const auto& v = m["variants"]["alpha_h1024_bf16"];
  EXPECT_EQ(v["constants"]["hidden"], 1024);
  EXPECT_EQ(v["constants"]["dtype"], "bf16");
  EXPECT_TRUE(v["inputs"].contains("kernels/alpha/k.cu"));
  EXPECT_TRUE(v["inputs"].contains("kernels/alpha/kiln.toml"));
  const auto& sm = v["sms"]["90"];
  EXPECT_EQ(sm["symbol"], "kiln_alpha_h1024_bf16__arch90_image");
  EXPECT_EQ(sm["kernels"]["kiln_fake"]["registers"], 40);
  EXPECT_EQ(sm["kernels"]["kiln_fake"]["spill_store_bytes"], 4);
  EXPECT_EQ(sm["sha256"], *io::sha256File(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin"));
  EXPECT_EQ(m["library"]["sha256"], *io::sha256File(artifact() / "lib/libkiln.a"));
  // The nvcc command recorded is the one that ran, with the published cubin path.
  const auto command = sm["command"].get<std::vector<std::string>>();
  ASSERT_GE(command.size(), 3u);
  EXPECT_EQ(command[command.size() - 2],
            (artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin").string());
  bool found = false;
  for (const auto& call : tools_.runner.calls()) {
    if (call.size() == command.size() && call.back() == command.back() &&
        std::equal(call.begin(), call.end() - 3, command.begin())) {
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST_F(BuilderTest, MergeKeepsOldVariantsAndRebuildsSelected) {
  ASSERT_TRUE(build("alpha"));
  const std::string alpha_cubin =
      *io::sha256File(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin");
  auto r = build("beta");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->kept.size(), 2u);
  const auto m = metadata();
  EXPECT_EQ(m["variants"].size(), 4u);
  EXPECT_TRUE(m["groups"].contains("alpha"));
  EXPECT_TRUE(m["groups"].contains("beta"));
  EXPECT_EQ(*io::sha256File(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin"), alpha_cubin);
  // The generated aggregate header includes both groups.
  const auto all = *io::readFile(artifact() / "include/kiln/kiln_all.h");
  EXPECT_NE(all.find("groups/alpha.h"), std::string::npos);
  EXPECT_NE(all.find("groups/beta.h"), std::string::npos);
}

TEST_F(BuilderTest, MergeRefusedWhenProvenanceDiffersAndCleanReplaces) {
  ASSERT_TRUE(build("alpha"));
  const auto before = kiln::testing::snapshot(artifact());
  tools_.cxx_version = "g++ (Fake) 13.1.0";
  auto r = build("beta");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(r.error().find(
                "host compiler version differs (old: g++ (Fake) 12.2.0, new: g++ (Fake) 13.1.0); "
                "re-run with --clean"),
            std::string::npos)
      << r.error();
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
  auto clean = build("beta", /*clean=*/true);
  ASSERT_TRUE(clean) << clean.error();
  const auto m = metadata();
  EXPECT_EQ(m["variants"].size(), 2u);
  EXPECT_FALSE(m["groups"].contains("alpha"));
}

TEST_F(BuilderTest, FailedBuildLeavesThePreviousArtifactIntact) {
  ASSERT_TRUE(build());
  const auto before = kiln::testing::snapshot(artifact());
  tools_.nvcc_compiles = 0;
  tools_.fail_nvcc_after = 1;  // the second compile fails
  auto r = build("ALL", /*clean=*/true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kFailure);
  EXPECT_NE(r.error().find("nvcc failed with exit code 2"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("identifier \"oops\" is undefined"), std::string::npos);
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
  EXPECT_FALSE(stagingLeft());
}

TEST_F(BuilderTest, TamperedOldCubinRefusesTheMerge) {
  ASSERT_TRUE(build("alpha"));
  ASSERT_TRUE(io::writeFile(artifact() / "cubins/alpha_h1024_bf16.sm_90.cubin", "tampered"));
  auto r = build("beta");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("re-run with --clean"), std::string::npos) << r.error();
  EXPECT_FALSE(stagingLeft());
}

TEST_F(BuilderTest, MissingNvccIsAnEnvironmentErrorBeforeAnythingIsTouched) {
  ASSERT_TRUE(build());
  const auto before = kiln::testing::snapshot(artifact());
  tools_.runner.setMissing({"nvcc"});
  auto r = build("ALL", /*clean=*/true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("nvcc not found"), std::string::npos) << r.error();
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
}

TEST_F(BuilderTest, MissingCrossCompilerNamesThePackage) {
  options_.arch = "aarch64";
  tools_.runner.setMissing({"aarch64-linux-gnu-g++"});
  auto r = build();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("aarch64-linux-gnu-g++ not found"), std::string::npos) << r.error();
}

TEST_F(BuilderTest, CrossBuildChecksObjectMachines) {
  options_.arch = "aarch64";
  auto r = build();
  ASSERT_TRUE(r) << r.error();
  const auto m =
      nlohmann::json::parse(*io::readFile(tmp_.path() / "artifacts/aarch64/sm_90/metadata.json"));
  EXPECT_EQ(m["host_target"], "aarch64-linux-gnu");
  EXPECT_EQ(m["arch"], "aarch64");
  EXPECT_TRUE(fs::exists(tmp_.path() / "artifacts/aarch64/sm_90/lib/libkiln.a"));
}

TEST_F(BuilderTest, ObjectOfTheWrongArchFailsBeforePublishing) {
  tools_.object_machine = 62;  // an x86_64 object in an aarch64 build
  options_.arch = "aarch64";
  auto r = build();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("ELF machine 62 but --arch aarch64 needs 183"), std::string::npos)
      << r.error();
  EXPECT_FALSE(fs::exists(tmp_.path() / "artifacts/aarch64/sm_90"));
}

TEST_F(BuilderTest, MissingCutlassNamesTheSetupScript) {
  kiln::testing::writeGroup(tmp_.path(), "gamma", "uses = [\"cutlass\"]\n");
  auto r = build("gamma");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("scripts/setup.sh"), std::string::npos) << r.error();
}

TEST_F(BuilderTest, SelectionErrorsAndNotes) {
  auto unknown = build("alpha,nope");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(unknown.error().find("unknown group 'nope'; known groups: alpha, beta"),
            std::string::npos);
  options_.gpu_arch = "sm_87";
  auto nothing = build();
  ASSERT_FALSE(nothing);
  EXPECT_NE(nothing.error().find("nothing to build"), std::string::npos);
  EXPECT_NE(nothing.error().find("lists sm_87"), std::string::npos) << nothing.error();
  options_.gpu_arch = "sm_90,sm_87,sm_90";
  auto duplicate = build();
  ASSERT_FALSE(duplicate);
  EXPECT_EQ(duplicate.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(duplicate.error().find("'sm_90' is listed twice"), std::string::npos)
      << duplicate.error();
  options_.gpu_arch = "sm_87,sm_95";
  auto untargetable = build();
  ASSERT_FALSE(untargetable);
  EXPECT_EQ(untargetable.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(untargetable.error().find("--gpu-arch sm_95: nvcc 13.0.88 cannot target it"),
            std::string::npos)
      << untargetable.error();
  options_.gpu_arch = "sm_95";
  auto unknown_sm = build();
  ASSERT_FALSE(unknown_sm);
  EXPECT_EQ(unknown_sm.errorKind(), ErrorKind::kEnvironment);
}

// ---- multi-SM builds --------------------------------------------------------------------

// The SMs in any order give the ascending tag; every (variant, SM) is compiled, recorded and
// reported; the headers are byte-identical to a single-SM build's.
TEST_F(BuilderTest, MultiSmBuildCompilesEveryVariantSmPair) {
  options_.gpu_arch = "sm_90,sm_80";
  auto r = build();
  ASSERT_TRUE(r) << r.error();
  const fs::path dir = tmp_.path() / "artifacts/x86_64/sm_80_sm_90";
  EXPECT_EQ(r->artifact_dir, dir);
  EXPECT_EQ(r->built.size(), 8u);
  ASSERT_EQ(sink_.progress.size(), 8u);
  EXPECT_EQ(sink_.progress.back().done, 8);
  EXPECT_EQ(sink_.progress.back().total, 8);
  std::set<std::string> progressed;
  for (const auto& p : sink_.progress) progressed.insert(p.variant + " " + p.target);
  EXPECT_EQ(progressed.size(), 8u);
  EXPECT_TRUE(progressed.count("beta_h2048_bf16 sm_80"));
  EXPECT_TRUE(sink_.notes.empty());

  const auto m = nlohmann::json::parse(*io::readFile(dir / "metadata.json"));
  EXPECT_EQ(m["tag"], "sm_80_sm_90");
  EXPECT_EQ(m["gpu_archs"], nlohmann::json::array({"sm_80", "sm_90"}));
  EXPECT_EQ(m["compile_targets"], nlohmann::json::array({"sm_80", "sm_90"}));
  for (const auto& [name, v] : m["variants"].items()) {
    ASSERT_EQ(v["sms"].size(), 2u) << name;
    for (const char* sm : {"80", "90"}) {
      const auto& image = v["sms"][sm];
      EXPECT_EQ(image["symbol"], "kiln_" + name + "__arch" + sm + "_image");
      EXPECT_EQ(image["target"], std::string("sm_") + sm);
      EXPECT_EQ(image["sha256"], *io::sha256File(dir / image["cubin"].get<std::string>()));
    }
  }

  options_.gpu_arch = "sm_90";
  ASSERT_TRUE(build());
  for (const char* rel : {"include/kiln/variants/alpha_h1024_bf16.h", "include/kiln/groups/alpha.h",
                          "include/kiln/kiln_all.h"}) {
    EXPECT_EQ(*io::readFile(dir / rel), *io::readFile(artifact() / rel)) << rel;
  }
}

TEST_F(BuilderTest, MultiSmSkipsPerVariantAndSmWithNotes) {
  kiln::testing::writeGroup(tmp_.path(), "gamma");
  // gamma supports sm_90 only: its sm_80 image is skipped, alpha keeps both.
  auto toml = *io::readFile(tmp_.path() / "kernels/gamma/kiln.toml");
  toml.replace(toml.find("[80, 90]"), 8, "[90]");
  ASSERT_TRUE(io::writeFile(tmp_.path() / "kernels/gamma/kiln.toml", toml));
  options_.gpu_arch = "sm_80,sm_90";
  auto r = build("alpha,gamma");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->built.size(), 6u);
  EXPECT_EQ(sink_.notes, (std::vector<std::string>{
                             "skipped gamma_h1024_bf16 for sm_80: its supported_sms are [90]",
                             "skipped gamma_h2048_bf16 for sm_80: its supported_sms are [90]"}));
  const auto m = nlohmann::json::parse(
      *io::readFile(tmp_.path() / "artifacts/x86_64/sm_80_sm_90/metadata.json"));
  EXPECT_EQ(m["variants"]["gamma_h1024_bf16"]["sms"].size(), 1u);
  EXPECT_TRUE(m["variants"]["gamma_h1024_bf16"]["sms"].contains("90"));
  EXPECT_EQ(m["variants"]["alpha_h1024_bf16"]["sms"].size(), 2u);

  // gamma alone for sm_80 and sm_87: nothing left at all is a usage error.
  options_.gpu_arch = "sm_80,sm_87";
  auto nothing = build("gamma", /*clean=*/true);
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(nothing.error().find("nothing to build"), std::string::npos) << nothing.error();
}

TEST_F(BuilderTest, MultiSmRefusesAnExistingArtifactWithoutClean) {
  options_.gpu_arch = "sm_80,sm_90";
  ASSERT_TRUE(build("alpha"));
  const fs::path dir = tmp_.path() / "artifacts/x86_64/sm_80_sm_90";
  const auto before = kiln::testing::snapshot(dir);
  const int compiles = tools_.nvcc_compiles;
  auto r = build("alpha");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(r.error().find(
                "multi-SM builds (sm_80_sm_90) never merge into an existing artifact; re-run with "
                "--clean"),
            std::string::npos)
      << r.error();
  EXPECT_EQ(tools_.nvcc_compiles, compiles);  // refused before compiling anything
  EXPECT_EQ(kiln::testing::snapshot(dir), before);
  auto clean = build("beta", /*clean=*/true);
  ASSERT_TRUE(clean) << clean.error();
  const auto m = nlohmann::json::parse(*io::readFile(dir / "metadata.json"));
  EXPECT_EQ(m["variants"].size(), 2u);
  EXPECT_TRUE(m["variants"].contains("beta_h1024_bf16"));
}

// An entry kernel present on one SM only (say, behind #if KILN_TARGET_SM >= 90) would make the
// shared header and table lie for the other SM: the build fails naming the variant and both SMs.
TEST_F(BuilderTest, MultiSmAbiMismatchFailsTheBuild) {
  io::FakeProcessRunner runner(
      [this](const std::vector<std::string>& argv) -> Result<io::ProcessResult> {
        auto r = tools_.answer(argv);
        const bool sm90_compile = std::find(argv.begin(), argv.end(), "-arch=sm_90") != argv.end();
        const bool nvcc = fs::path(argv[0]).filename() == "nvcc";
        if (r && nvcc && sm90_compile &&
            FakeTools::valueAfter(argv, "-o").find("alpha_h2048") != std::string::npos) {
          r->stderr_text +=
              "ptxas info    : Compiling entry function 'kiln_fake_sm90_only' for 'sm_90'\n"
              "ptxas info    : Used 8 registers\n";
        }
        return r;
      });
  options_.gpu_arch = "sm_80,sm_90";
  options_.kernels = "alpha";
  auto r = runBuild(options_, runner, sink_);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kFailure);
  EXPECT_NE(
      r.error().find(
          "alpha_h2048_bf16: ABI differs between sm_80 and sm_90: entry 'kiln_fake_sm90_only' is "
          "in the sm_90 cubin only"),
      std::string::npos)
      << r.error();
  EXPECT_FALSE(fs::exists(tmp_.path() / "artifacts/x86_64/sm_80_sm_90"));
  for (const auto& e : fs::directory_iterator(tmp_.path() / "artifacts/x86_64")) {
    ADD_FAILURE() << "left behind: " << e.path();
  }
}

// ---- PTX (compute_NN) builds -------------------------------------------------------------

// A compute_80 build: nvcc -ptx per variant, the PTX published as cubins/<variant>.compute_80.ptx
// and recorded as a ptx image without ptxas resources, its shim embedding the text and a NUL.
TEST_F(BuilderTest, PtxBuildPublishesPtxImages) {
  std::mutex mu;
  std::map<std::string, std::string> shims;  // image shim file name -> its source
  io::FakeProcessRunner runner(
      [&](const std::vector<std::string>& argv) -> Result<io::ProcessResult> {
        const std::string tool = fs::path(argv[0]).filename().string();
        const std::string source = FakeTools::valueAfter(argv, "-c");
        if (tool == "g++" && source.find(".compute_80.cpp") != std::string::npos) {
          std::lock_guard<std::mutex> lock(mu);
          shims[fs::path(source).filename().string()] = *io::readFile(source);
        }
        return tools_.answer(argv);
      });
  options_.gpu_arch = "compute_80";
  options_.kernels = "alpha";
  auto r = runBuild(options_, runner, sink_);
  ASSERT_TRUE(r) << r.error();
  const fs::path dir = tmp_.path() / "artifacts/x86_64/compute_80";
  EXPECT_EQ(r->artifact_dir, dir);
  EXPECT_EQ(r->built.size(), 2u);
  ASSERT_EQ(sink_.progress.size(), 2u);
  EXPECT_EQ(sink_.progress.back().target, "compute_80");
  EXPECT_FALSE(fs::exists(dir / "cubins/alpha_h1024_bf16.sm_80.cubin"));
  const auto ptx = *io::readFile(dir / "cubins/alpha_h1024_bf16.compute_80.ptx");
  EXPECT_NE(ptx.find("\n.target sm_80\n"), std::string::npos) << ptx;
  EXPECT_NE(ptx.find("\n.visible .entry kiln_fake(\n"), std::string::npos) << ptx;

  // nvcc ran with -ptx for compute_80 and without ptxas flags.
  int ptx_compiles = 0;
  for (const auto& call : runner.calls()) {
    if (fs::path(call[0]).filename() != "nvcc" || call.size() < 3 || call[1].rfind("--", 0) == 0)
      continue;
    ++ptx_compiles;
    EXPECT_EQ(call[1], "-ptx");
    EXPECT_EQ(call[2], "-arch=compute_80");
    EXPECT_EQ(std::find(call.begin(), call.end(), "-Xptxas"), call.end());
  }
  EXPECT_EQ(ptx_compiles, 2);

  const auto m = nlohmann::json::parse(*io::readFile(dir / "metadata.json"));
  EXPECT_EQ(m["tag"], "compute_80");
  EXPECT_EQ(m["gpu_archs"], nlohmann::json::array({"compute_80"}));
  EXPECT_EQ(m["compile_targets"], nlohmann::json::array({"compute_80"}));
  const auto& image = m["variants"]["alpha_h1024_bf16"]["sms"]["80"];
  EXPECT_EQ(image["format"], "ptx");
  EXPECT_EQ(image["target"], "compute_80");
  EXPECT_EQ(image["cubin"], "cubins/alpha_h1024_bf16.compute_80.ptx");
  EXPECT_EQ(image["symbol"], "kiln_alpha_h1024_bf16__arch80_image");
  EXPECT_EQ(image["sha256"], *io::sha256File(dir / "cubins/alpha_h1024_bf16.compute_80.ptx"));
  EXPECT_EQ(image["size"], ptx.size());
  EXPECT_TRUE(image["kernels"].empty()) << image["kernels"];
  EXPECT_EQ(image["command"][1], "-ptx");

  // The image shim: the text's bytes, then the NUL, size without it, ptx = 1.
  ASSERT_EQ(shims.size(), 2u);
  const std::string& shim = shims.at("alpha_h1024_bf16.compute_80.cpp");
  EXPECT_NE(shim.find("const unsigned char kPtx[] = {"), std::string::npos) << shim;
  EXPECT_NE(shim.find("    0x00,  // the NUL that ends the PTX text"), std::string::npos) << shim;
  EXPECT_NE(shim.find("{80, 0, kPtx, sizeof(kPtx) - 1, \"" + image["sha256"].get<std::string>() +
                      "\", 1};"),
            std::string::npos)
      << shim;
  EXPECT_NE(shim.find(fmt::format("({} bytes and a NUL", ptx.size())), std::string::npos) << shim;
}

// A single compute_NN artifact merges like a single-SM one: the old PTX is kept byte-identical.
TEST_F(BuilderTest, PtxBuildMergesKeepingOldPtx) {
  options_.gpu_arch = "compute_80";
  ASSERT_TRUE(build("alpha"));
  const fs::path dir = tmp_.path() / "artifacts/x86_64/compute_80";
  const std::string alpha = *io::sha256File(dir / "cubins/alpha_h1024_bf16.compute_80.ptx");
  auto r = build("beta");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->kept.size(), 2u);
  const auto m = nlohmann::json::parse(*io::readFile(dir / "metadata.json"));
  EXPECT_EQ(m["variants"].size(), 4u);
  EXPECT_EQ(m["variants"]["alpha_h1024_bf16"]["sms"]["80"]["format"], "ptx");
  EXPECT_EQ(*io::sha256File(dir / "cubins/alpha_h1024_bf16.compute_80.ptx"), alpha);
  EXPECT_TRUE(fs::is_regular_file(dir / "cubins/beta_h2048_bf16.compute_80.ptx"));
  // Tampered old PTX refuses the merge, as a tampered cubin does.
  ASSERT_TRUE(io::writeFile(dir / "cubins/alpha_h1024_bf16.compute_80.ptx", "tampered"));
  auto refused = build("beta");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("re-run with --clean"), std::string::npos) << refused.error();
}

// sm_90 cubins and compute_80 PTX in one artifact, tagged by SM order.
TEST_F(BuilderTest, PtxAndCubinInOneBuild) {
  options_.gpu_arch = "sm_90,compute_80";
  auto r = build("alpha");
  ASSERT_TRUE(r) << r.error();
  const fs::path dir = tmp_.path() / "artifacts/x86_64/compute_80_sm_90";
  EXPECT_EQ(r->artifact_dir, dir);
  EXPECT_EQ(r->built.size(), 4u);
  const auto m = nlohmann::json::parse(*io::readFile(dir / "metadata.json"));
  EXPECT_EQ(m["gpu_archs"], nlohmann::json::array({"compute_80", "sm_90"}));
  EXPECT_EQ(m["compile_targets"], nlohmann::json::array({"compute_80", "sm_90"}));
  const auto& sms = m["variants"]["alpha_h2048_bf16"]["sms"];
  EXPECT_EQ(sms["80"]["format"], "ptx");
  EXPECT_EQ(sms["80"]["cubin"], "cubins/alpha_h2048_bf16.compute_80.ptx");
  EXPECT_TRUE(sms["80"]["kernels"].empty());
  EXPECT_EQ(sms["90"]["format"], "cubin");
  EXPECT_EQ(sms["90"]["cubin"], "cubins/alpha_h2048_bf16.sm_90.cubin");
  EXPECT_EQ(sms["90"]["kernels"]["kiln_fake"]["registers"], 40);
  const auto cubin = io::readFile(dir / "cubins/alpha_h2048_bf16.sm_90.cubin");
  ASSERT_TRUE(cubin) << cubin.error();
  EXPECT_EQ(readElfHeader(*cubin, "cubin")->machine, kElfMachineCuda);
  EXPECT_TRUE(fs::is_regular_file(dir / "cubins/alpha_h2048_bf16.compute_80.ptx"));
}

TEST_F(BuilderTest, PtxMissingAnEntryFailsNamingItsEntryDirectives) {
  tools_.ptx_entries = {"kiln_other", "kiln_aux"};
  options_.gpu_arch = "compute_80";
  auto r = build("alpha");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kFailure);
  EXPECT_NE(
      r.error().find(
          " for compute_80: entry 'kiln_fake' (declared in kiln.toml) is not an entry kernel of "
          "the PTX; its .entry directives are [kiln_aux, kiln_other] (is it extern \"C\" "
          "__global__?)"),
      std::string::npos)
      << r.error();
  EXPECT_FALSE(fs::exists(tmp_.path() / "artifacts/x86_64/compute_80"));
}

// An entry the PTX has and the cubin of another SM lacks: the shared table would lie.
TEST_F(BuilderTest, PtxAndCubinWithDifferentEntriesFailTheAbiCheck) {
  tools_.ptx_entries = {"kiln_fake", "kiln_extra"};
  options_.gpu_arch = "compute_80,sm_90";
  auto r = build("alpha");
  ASSERT_FALSE(r);
  EXPECT_NE(
      r.error().find(
          ": ABI differs between compute_80 and sm_90: entry 'kiln_extra' is in the compute_80 "
          "PTX only"),
      std::string::npos)
      << r.error();
  EXPECT_FALSE(fs::exists(tmp_.path() / "artifacts/x86_64/compute_80_sm_90"));
}

TEST_F(BuilderTest, PtxSelectionErrors) {
  kiln::testing::writeGroup(tmp_.path(), "gamma", "arch_specific = true\n");
  options_.gpu_arch = "compute_90";
  auto arch_specific = build("gamma");
  ASSERT_FALSE(arch_specific);
  EXPECT_EQ(arch_specific.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(arch_specific.error().find("--gpu-arch compute_90: group gamma is arch_specific"),
            std::string::npos)
      << arch_specific.error();
  options_.gpu_arch = "sm_80,compute_80";
  auto both = build("alpha");
  ASSERT_FALSE(both);
  EXPECT_EQ(both.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(both.error().find("'sm_80' and 'compute_80' are both for SM 80"), std::string::npos)
      << both.error();
  options_.gpu_arch = "compute_95";
  auto untargetable = build("alpha");
  ASSERT_FALSE(untargetable);
  EXPECT_EQ(untargetable.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(untargetable.error().find("--gpu-arch compute_95: nvcc 13.0.88 cannot target it"),
            std::string::npos)
      << untargetable.error();
  EXPECT_EQ(tools_.nvcc_compiles, 0);
}

// nvcc reads the staged copy of the group's inputs (core/inputs.h), not the checkout: every path
// of the command is under the stage directory, whose files carry the fixed time.
TEST_F(BuilderTest, NvccReadsTheStagedSources) {
  ASSERT_TRUE(build("alpha"));
  const auto command = metadata()["variants"]["alpha_h1024_bf16"]["sms"]["90"]["command"]
                           .get<std::vector<std::string>>();
  const fs::path source = command.back();
  EXPECT_EQ(source.parent_path().parent_path().parent_path().parent_path(),
            fs::path(options_.stage_dir));
  EXPECT_EQ(source.filename(), "k.cu");
  EXPECT_EQ(*io::readFile(source), *io::readFile(tmp_.path() / "kernels/alpha/k.cu"));
  struct stat st {};
  ASSERT_EQ(::stat(source.c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, kStagedFileTime);
  const auto include = std::find(command.begin(), command.end(), "-I");
  ASSERT_NE(include, command.end());
  EXPECT_EQ(*(include + 1), (source.parent_path().parent_path()).string());
  for (const auto& arg : command)
    EXPECT_EQ(arg.find((tmp_.path() / "kernels").string()), std::string::npos) << arg;
}

// The artifact fingerprint covers the runtime and runner sources compiled into the library, by
// content and relative path, with the variants' rule: a runtime-only change makes the artifact
// stale, documentation does not, and neither touches a variant's fingerprint.
TEST_F(BuilderTest, RuntimeSourcesAreInputsOfTheArtifactFingerprint) {
  ASSERT_TRUE(
      io::writeFile(tmp_.path() / "kernels/alpha/runner/runner.cpp", "int alpha_runner;\n"));
  ASSERT_TRUE(
      io::writeFile(tmp_.path() / "kernels/gamma/runner/runner.cpp", "int gamma_runner;\n"));
  ASSERT_TRUE(build("alpha"));
  const auto first = metadata();
  EXPECT_EQ(first["runtime_inputs"],
            nlohmann::json(
                {{"runtime/include/kiln/variant.h", io::sha256Hex("#pragma once\n")},
                 {"kernels/alpha/runner/runner.cpp", io::sha256Hex("int alpha_runner;\n")},
                 {"runtime/src/status.cpp", io::sha256Hex("int kiln_status;\n")},
                 {"runtime/doctor/kiln_doctor.cpp", io::sha256Hex("int main() { return 0; }\n")}}));
  const std::string variant = first["variants"]["alpha_h1024_bf16"]["fingerprint"];

  ASSERT_TRUE(io::writeFile(tmp_.path() / "runtime/src/README.md", "# the runtime\n"));
  ASSERT_TRUE(
      io::writeFile(tmp_.path() / "kernels/gamma/runner/runner.cpp", "int gamma_runner_v2;\n"));
  ASSERT_TRUE(build("alpha", /*clean=*/true));
  EXPECT_EQ(metadata()["fingerprint"], first["fingerprint"]);  // *.md, and a group not built
  EXPECT_EQ(metadata()["runtime_inputs"], first["runtime_inputs"]);

  ASSERT_TRUE(io::writeFile(tmp_.path() / "runtime/src/status.cpp", "int kiln_status = 1;\n"));
  ASSERT_TRUE(build("alpha", /*clean=*/true));
  const auto changed = metadata();
  EXPECT_NE(changed["fingerprint"], first["fingerprint"]);
  EXPECT_EQ(changed["runtime_inputs"]["runtime/src/status.cpp"],
            io::sha256Hex("int kiln_status = 1;\n"));
  EXPECT_EQ(changed["variants"]["alpha_h1024_bf16"]["fingerprint"], variant);

  ASSERT_TRUE(
      io::writeFile(tmp_.path() / "kernels/alpha/runner/runner.cpp", "int alpha_runner_v2;\n"));
  ASSERT_TRUE(build("alpha", /*clean=*/true));
  EXPECT_NE(metadata()["fingerprint"], changed["fingerprint"]);
}

// A build killed between publish's two renames left the previous artifact set aside and nothing
// in its place: the next build puts it back before it reads it, and merges into it.
TEST_F(BuilderTest, AnArtifactSetAsideByAKilledBuildIsPutBackAndMergedInto) {
  ASSERT_TRUE(build("alpha"));
  const auto before = kiln::testing::snapshot(artifact());
  fs::rename(artifact(), artifact().parent_path() / ".sm_90.old-999999999");
  auto r = build("beta");
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->kept, (std::vector<std::string>{"alpha_h1024_bf16", "alpha_h2048_bf16"}));
  EXPECT_EQ(metadata()["variants"].size(), 4u);
  const auto after = kiln::testing::snapshot(artifact());
  EXPECT_EQ(after.at("cubins/alpha_h1024_bf16.sm_90.cubin"),
            before.at("cubins/alpha_h1024_bf16.sm_90.cubin"));
  EXPECT_FALSE(stagingLeft());
}

// A compiler launcher (ccache, sccache) goes in front of every nvcc and host-compiler command
// that compiles, and of nothing else (the version queries, ar); the artifact is the one a build
// without it makes: the same files, and the same metadata (commands and fingerprints included)
// but for the build date and the compile times.
TEST_F(BuilderTest, CompilerLauncherPrefixesTheCompilesAndLeavesTheArtifactAlone) {
  ASSERT_TRUE(build("ALL", /*clean=*/true));
  auto without = kiln::testing::snapshot(artifact());
  auto without_metadata = metadata();
  const size_t calls_without = tools_.runner.calls().size();

  options_.compiler_launcher = "ccache";
  auto r = build("ALL", /*clean=*/true);
  ASSERT_TRUE(r) << r.error();
  auto with = kiln::testing::snapshot(artifact());
  auto with_metadata = metadata();
  without.erase("metadata.json");
  with.erase("metadata.json");
  EXPECT_EQ(with, without);
  for (auto* m : {&without_metadata, &with_metadata}) {  // what differs between any two builds
    m->erase("build_date");
    for (auto& [name, variant] : (*m)["variants"].items()) {
      for (auto& [sm, image] : variant["sms"].items()) image.erase("compile_seconds");
    }
  }
  EXPECT_EQ(with_metadata, without_metadata);
  for (const auto& [name, variant] : with_metadata["variants"].items()) {
    for (const auto& [sm, image] : variant["sms"].items())
      EXPECT_EQ(image["command"][0], "nvcc") << name;
  }

  const auto all = tools_.runner.calls();
  const std::vector<std::vector<std::string>> calls(all.begin() + calls_without, all.end());
  ASSERT_EQ(calls.size(), calls_without);
  int nvcc_compiles = 0;
  int host_compiles = 0;
  for (const auto& call : calls) {
    // bin/kiln-doctor's link writes with -o too, but is no compile: ccache does not cache links.
    const bool links = call[0] == "g++" && std::find(call.begin(), call.end(), "-c") == call.end();
    const bool compiles = std::find(call.begin(), call.end(), "-o") != call.end() && !links;
    const bool launched = call[0] == "ccache";
    EXPECT_EQ(launched, compiles) << io::shellJoin(call);
    if (!launched) {
      EXPECT_TRUE(call[0] == "nvcc" || call[0] == "g++" || call[0] == "ar") << call[0];
      continue;
    }
    ASSERT_GE(call.size(), 2u);
    nvcc_compiles += call[1] == "nvcc";
    host_compiles += call[1] == "g++";
    // ccache caches nvcc only with -c (without it, it counts a link and runs it uncached).
    if (call[1] == "nvcc") {
      EXPECT_NE(std::find(call.begin(), call.end(), "-c"), call.end());
    }
  }
  EXPECT_EQ(nvcc_compiles, 4);
  EXPECT_GT(host_compiles, 0);
}

// A launcher that cannot be run is an environment error before anything is compiled or written.
TEST_F(BuilderTest, MissingCompilerLauncherFailsBeforeCompiling) {
  ASSERT_TRUE(build());
  const auto before = kiln::testing::snapshot(artifact());
  const int compiles = tools_.nvcc_compiles;
  options_.compiler_launcher = "ccachee";
  tools_.runner.setMissing({"ccachee"});
  auto r = build("ALL", /*clean=*/true);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(r.error().find("compiler launcher 'ccachee' not found on PATH"), std::string::npos)
      << r.error();
  EXPECT_EQ(tools_.nvcc_compiles, compiles);
  EXPECT_EQ(kiln::testing::snapshot(artifact()), before);
}

TEST_F(BuilderTest, AbandonedStagingDirectoriesAreRemoved) {
  const fs::path abandoned = tmp_.path() / "artifacts/x86_64/.sm_90.staging-999999999";
  ASSERT_TRUE(io::writeFile(abandoned / "metadata.json", "{}"));
  ASSERT_TRUE(build());
  EXPECT_FALSE(fs::exists(abandoned));
}

}  // namespace
}  // namespace kiln::core
