// The CuTe DSL front end without the DSL: its command (interpreter, driver, target, constants as
// JSON, entries, pins), the pin checks that run before anything is written, a whole build
// through the builder with a fake interpreter (metadata identical in shape to a CUDA variant's,
// kind "cute_dsl"), PTX (compute_NN) refused for DSL variants by the plan and by the front end,
// the parity of the pin with scripts/setup.sh, and the driver: the bytes kiln runs are exactly
// tools/kiln/core/cute_dsl_driver.py (embedded at build time; its Python is tested by
// cute_dsl_driver_test.py), and a changed driver changes every DSL variant's fingerprint.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "core/builder.h"
#include "core/cute_dsl_frontend.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using kiln::testing::FakeTools;
using kiln::testing::TempDir;

Variant dslVariant() {
  Variant v;
  v.name = "gdn_decode_dk128_dv128_bf16";
  v.group = "gdn";
  v.kind = SourceKind::kCuteDsl;
  v.source = "/repo/kernels/gdn/gdn_decode.py";
  v.entries = {"kiln_gdn_decode"};
  v.supported_sms = {80, 90};
  v.arch_specific = true;
  v.constants = {{"head_dim", ConstantType::kInt, std::int64_t{128}},
                 {"dtype", ConstantType::kDtype, std::string("bf16")},
                 {"fused", ConstantType::kBool, false}};
  return v;
}

std::string after(const std::vector<std::string>& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it != argv.end() && it + 1 != argv.end() ? *(it + 1) : std::string();
}

TEST(CuteDslCommand, RunsTheDriverInTheVenvWithTheVariantsInputs) {
  Variant v = dslVariant();
  CuteDslToolchain dsl{"/repo/.venv/bin/python", "4.8.1", 13};
  CompileRequest request;
  request.variant = &v;
  request.sm = 90;
  request.cubin = "/stage/cubins/gdn_decode_dk128_dv128_bf16.sm_90.cubin";
  request.cute_dsl = &dsl;
  request.scratch = "/stage/.obj";
  const fs::path driver = cuteDslDriverPath(request);
  EXPECT_EQ(driver, "/stage/.obj/kiln_cute_dsl.gdn_decode_dk128_dv128_bf16.sm_90.py");
  const auto argv = cuteDslCommand(request, driver);
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ(argv[0], "/repo/.venv/bin/python");
  EXPECT_EQ(argv[1], "-P");  // the scratch directory never shadows a module
  EXPECT_EQ(argv[2], driver.string());
  EXPECT_EQ(after(argv, "--script"), "/repo/kernels/gdn/gdn_decode.py");
  EXPECT_EQ(after(argv, "--target"), "sm_90a");  // arch_specific, as nvcc would get
  EXPECT_EQ(after(argv, "--sm"), "90");
  // Constants typed as declared and in kiln.toml order: the script reads what the header bakes.
  EXPECT_EQ(after(argv, "--constants"), R"({"head_dim":128,"dtype":"bf16","fused":false})");
  EXPECT_EQ(after(argv, "--entries"), "kiln_gdn_decode");
  EXPECT_EQ(after(argv, "--dsl-version"), kCuteDslVersion);
  EXPECT_EQ(after(argv, "--cuda-major"), "13");
  EXPECT_EQ(after(argv, "--out"), request.cubin.string());
  // No environment is passed: the driver itself hides every GPU and sets the DSL's target, so
  // the command alone reproduces the compile.
  const std::string source(cuteDslDriverSource());
  EXPECT_NE(source.find(R"(os.environ["CUDA_VISIBLE_DEVICES"] = "")"), std::string::npos);
  EXPECT_NE(source.find(R"(os.environ["CUTE_DSL_ARCH"] = args.target)"), std::string::npos);
  EXPECT_NE(
      source.find("set_name_prefix(name, remove_cutlass_symbol=True, keep_mangled_name=False)"),
      std::string::npos);
}

TEST(CuteDslCommand, CudaMajor) {
  EXPECT_EQ(cudaMajorOf("13.0.88"), 13);
  EXPECT_EQ(cudaMajorOf("12.9.1"), 12);
  EXPECT_EQ(cudaMajorOf("garbage"), 0);
}

// A fake interpreter: answers the version query with `versions`, and a driver run by writing a
// minimal CUDA ELF at --out and printing the driver's report for every --entries name.
struct FakePython {
  std::string versions = "4.8.1\n4.8.1\n";
  int driver_exit = 0;
  std::string driver_text;  // the driver file the last driver run was given
  core::Result<io::ProcessResult> answer(const std::vector<std::string>& argv) {
    io::ProcessResult r;
    if (argv.size() > 2 && argv[1] == "-c") {
      r.stdout_text = versions;
      return r;
    }
    if (auto text = io::readFile(argv.at(2))) driver_text = *text;
    if (driver_exit != 0) {
      r.exit_code = driver_exit;
      r.stderr_text = "kiln-cute-dsl: kernel script raised\n";
      return r;
    }
    const std::string out = after(argv, "--out");
    auto w = io::writeFile(out, kiln::testing::minimalElf(190, out));
    if (!w) return w.failure();
    std::stringstream entries(after(argv, "--entries"));
    for (std::string e; std::getline(entries, e, ',');) {
      r.stdout_text += "kiln-cute-dsl: Compiling entry function '" + e + "' for '" +
                       after(argv, "--target") + "'\nkiln-cute-dsl: Function properties for " + e +
                       "\n    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                       "kiln-cute-dsl: Used 96 registers, 0 bytes smem\n";
    }
    return r;
  }
};

class CuteDslBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    kiln::testing::writeGroup(tmp_.path(), "alpha");  // a CUDA group beside the DSL one
    const std::string toml =
        "[group]\nname = \"dslk\"\nkind = \"cute_dsl\"\nsource = \"dslk.py\"\n"
        "entries = [\"kiln_dslk\"]\nsupported_sms = [80, 90]\n\n[constants]\nhidden = \"int\"\n"
        "dtype = \"dtype\"\n\n[[family]]\nname = \"dslk_h{hidden}_{dtype}\"\n"
        "matrix = { hidden = [1024], dtype = [\"bf16\"] }\n";
    (void)io::writeFile(tmp_.path() / "kernels/dslk/kiln.toml", toml);
    (void)io::writeFile(tmp_.path() / "kernels/dslk/dslk.py", "# fake\n");
    options_.gpu_arch = "sm_90";
    options_.arch = "x86_64";
    options_.root = tmp_.path();
    options_.output_dir = tmp_.path() / "artifacts";
    options_.nvcc = "nvcc";
    options_.python = "/venv/bin/python";
    options_.jobs = 2;
    options_.kiln_version = "0.1.0";
  }
  Result<BuildSummary> build(const std::string& kernels) {
    options_.kernels = kernels;
    return runBuild(options_, runner_, sink_);
  }
  nlohmann::json metadata() const {
    return nlohmann::json::parse(
        *io::readFile(tmp_.path() / "artifacts/x86_64/sm_90/metadata.json"));
  }
  std::vector<std::vector<std::string>> pythonCalls() const {
    std::vector<std::vector<std::string>> calls;
    for (const auto& c : runner_.calls())
      if (c[0] == "/venv/bin/python") calls.push_back(c);
    return calls;
  }

  TempDir tmp_;
  FakeTools tools_;
  FakePython python_;
  io::FakeProcessRunner runner_{[this](const std::vector<std::string>& argv) {
    return argv[0] == "/venv/bin/python" ? python_.answer(argv) : tools_.answer(argv);
  }};
  BuildSink sink_;
  BuildOptions options_;
};

TEST_F(CuteDslBuild, MetadataHasTheShapeOfACudaVariant) {
  auto built = build("alpha,dslk");
  ASSERT_TRUE(built) << built.error();
  const auto m = metadata();
  const auto& dsl = m["variants"]["dslk_h1024_bf16"];
  const auto& cuda = m["variants"]["alpha_h1024_bf16"];
  EXPECT_EQ(dsl["kind"], "cute_dsl");
  EXPECT_EQ(cuda["kind"], "cuda");
  EXPECT_EQ(m["groups"]["dslk"]["kind"], "cute_dsl");
  // Same keys at every level: a consumer cannot tell the kinds apart except from "kind".
  auto keys = [](const nlohmann::json& j) {
    std::vector<std::string> k;
    for (auto it = j.begin(); it != j.end(); ++it) k.push_back(it.key());
    return k;
  };
  EXPECT_EQ(keys(dsl), keys(cuda));
  EXPECT_EQ(keys(dsl["sms"]["90"]), keys(cuda["sms"]["90"]));
  EXPECT_EQ(keys(dsl["sms"]["90"]["kernels"]["kiln_dslk"]),
            keys(cuda["sms"]["90"]["kernels"]["kiln_fake"]));
  EXPECT_EQ(dsl["sms"]["90"]["symbol"], "kiln_dslk_h1024_bf16__arch90_image");
  EXPECT_EQ(dsl["sms"]["90"]["kernels"]["kiln_dslk"]["registers"], 96);
  EXPECT_EQ(dsl["constants"], (nlohmann::json{{"hidden", 1024}, {"dtype", "bf16"}}));
  const auto command = dsl["sms"]["90"]["command"].get<std::vector<std::string>>();
  EXPECT_EQ(command[0], "/venv/bin/python");
  EXPECT_EQ(after(command, "--out"),
            (tmp_.path() / "artifacts/x86_64/sm_90/cubins/dslk_h1024_bf16.sm_90.cubin").string());
  EXPECT_TRUE(fs::is_regular_file(
      tmp_.path() / "artifacts/x86_64/sm_90/include/kiln/variants/dslk_h1024_bf16.h"));
  // The pins were checked once, before the compile.
  const auto calls = pythonCalls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0][1], "-c");
  EXPECT_NE(calls[0][2].find("nvidia-cutlass-dsl-libs-cu13"), std::string::npos);
}

TEST_F(CuteDslBuild, CudaOnlyBuildsNeverTouchPython) {
  ASSERT_TRUE(build("alpha"));
  EXPECT_TRUE(pythonCalls().empty());
}

TEST_F(CuteDslBuild, TheDslVersionIsPartOfTheFingerprint) {
  ASSERT_TRUE(build("dslk"));
  const std::string fingerprint = metadata()["variants"]["dslk_h1024_bf16"]["fingerprint"];
  CuteDslToolchain other{"/venv/bin/python", "4.9.0", 13};
  CuteDslToolchain same{"/venv/bin/python", "4.8.1", 13};
  EXPECT_NE(cuteDslFingerprint("base", other), cuteDslFingerprint("base", same));
  EXPECT_EQ(fingerprint.size(), 64u);
}

TEST(CuteDslDriver, TheEmbeddedDriverIsTheFileByteForByte) {
  auto file = io::readFile(fs::path(KILN_SOURCE_DIR) / "tools/kiln/core/cute_dsl_driver.py");
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(cuteDslDriverSource(), *file)
      << "the kiln binary embeds another cute_dsl_driver.py than the checkout's; rebuild kiln";
  EXPECT_GT(file->size(), 1000u);
}

TEST(CuteDslDriver, AChangedDriverChangesTheFingerprint) {
  const CuteDslToolchain dsl{"/venv/bin/python", "4.8.1", 13};
  const std::string driver(cuteDslDriverSource());
  EXPECT_EQ(cuteDslFingerprint("base", dsl), cuteDslFingerprint("base", dsl, driver));
  EXPECT_NE(cuteDslFingerprint("base", dsl, driver + "# one more comment\n"),
            cuteDslFingerprint("base", dsl, driver));
  EXPECT_NE(cuteDslFingerprint("other base", dsl), cuteDslFingerprint("base", dsl));
}

// The file the interpreter is given is the embedded driver, byte for byte.
TEST_F(CuteDslBuild, TheDriverThatRunsIsTheEmbeddedOne) {
  ASSERT_TRUE(build("dslk"));
  EXPECT_EQ(python_.driver_text, cuteDslDriverSource());
}

TEST_F(CuteDslBuild, WrongDslVersionFailsBeforeAnythingIsTouched) {
  ASSERT_TRUE(build("dslk"));
  const auto before = kiln::testing::snapshot(tmp_.path() / "artifacts");
  python_.versions = "4.7.0\n4.7.0\n";
  options_.clean = true;
  auto failed = build("dslk");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(failed.error().find("nvidia-cutlass-dsl is 4.7.0"), std::string::npos)
      << failed.error();
  EXPECT_NE(failed.error().find("kiln pins 4.8.1"), std::string::npos) << failed.error();
  EXPECT_EQ(kiln::testing::snapshot(tmp_.path() / "artifacts"), before);
}

TEST_F(CuteDslBuild, MissingCudaMajorLibrariesNameThem) {
  python_.versions = "4.8.1\nabsent\n";
  auto failed = build("dslk");
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().find("nvidia-cutlass-dsl-libs-cu13 is absent"), std::string::npos)
      << failed.error();
}

TEST_F(CuteDslBuild, MissingInterpreterNamesTheSetupScript) {
  runner_.setMissing({"/venv/bin/python"});
  auto failed = build("dslk");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.errorKind(), ErrorKind::kEnvironment);
  EXPECT_NE(failed.error().find("scripts/setup.sh"), std::string::npos) << failed.error();
}

TEST_F(CuteDslBuild, AFailingScriptNamesTheVariantAndKeepsItsOutput) {
  python_.driver_exit = 1;
  auto failed = build("dslk");
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().find("dslk_h1024_bf16 for sm_90"), std::string::npos) << failed.error();
  EXPECT_NE(failed.error().find("kernel script raised"), std::string::npos) << failed.error();
}

TEST_F(CuteDslBuild, NvccFlagsAreRefusedForDslVariants) {
  auto toml = *io::readFile(tmp_.path() / "kernels/dslk/kiln.toml");
  toml.replace(toml.find("supported_sms"), 0, "nvcc_flags = [\"--use_fast_math\"]\n");
  (void)io::writeFile(tmp_.path() / "kernels/dslk/kiln.toml", toml);
  auto failed = build("dslk");
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().find("apply to cuda variants only"), std::string::npos)
      << failed.error();
}

// The DSL's AOT export writes cubins only: a compute_NN build of a DSL group is refused by the
// plan, before the interpreter runs; a CUDA group beside it still builds PTX.
TEST_F(CuteDslBuild, PtxIsRefusedForDslGroups) {
  options_.gpu_arch = "compute_90";
  auto failed = build("alpha,dslk");
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.errorKind(), ErrorKind::kUsage);
  EXPECT_NE(failed.error().find(
                "--gpu-arch compute_90: group dslk is cute_dsl, whose front end (the DSL's AOT "
                "export) emits cubins only, no PTX; build it for sm_90"),
            std::string::npos)
      << failed.error();
  EXPECT_TRUE(pythonCalls().empty());
  EXPECT_TRUE(build("alpha")) << "a CUDA group alone builds compute_90";
  EXPECT_TRUE(pythonCalls().empty());
}

// Behind the plan, the front end refuses a PTX request itself rather than label a cubin PTX.
TEST(CuteDslCommand, FrontEndRefusesAPtxRequest) {
  Variant v = dslVariant();
  v.arch_specific = false;
  CuteDslToolchain dsl{"/repo/.venv/bin/python", "4.8.1", 13};
  CompileRequest request;
  request.variant = &v;
  request.sm = 80;
  request.ptx = true;
  request.cubin = "/stage/cubins/gdn_decode_dk128_dv128_bf16.compute_80.ptx";
  request.cute_dsl = &dsl;
  request.scratch = "/stage/.obj";
  io::FakeProcessRunner runner([](const std::vector<std::string>&) -> Result<io::ProcessResult> {
    return io::ProcessResult{};
  });
  auto front_end = frontEndFor(SourceKind::kCuteDsl);
  ASSERT_TRUE(front_end);
  auto output = (*front_end)->compile(request, runner);
  ASSERT_FALSE(output);
  EXPECT_EQ(output.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(output.error(),
            "gdn_decode_dk128_dv128_bf16: the CuTe DSL front end emits cubins only; compute_80 "
            "(PTX) cannot be built");
  EXPECT_TRUE(runner.calls().empty());
}

TEST(CuteDslPin, SetupScriptInstallsThePinnedVersion) {
  auto text = io::readFile(fs::path(KILN_SOURCE_DIR) / "scripts/setup.sh");
  ASSERT_TRUE(text) << text.error();
  std::smatch match;
  ASSERT_TRUE(std::regex_search(*text, match, std::regex(R"re(\nCUTE_DSL_VERSION="([^"]+)")re")));
  EXPECT_EQ(match[1], kCuteDslVersion) << "scripts/setup.sh and cute_dsl_frontend.h disagree";
}

}  // namespace
}  // namespace kiln::core
