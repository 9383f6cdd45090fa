// The real `kiln` binary end to end: a build of the two-variant fixture group for sm_90 with the
// real nvcc and g++, its metadata and cubins, `inspect`, a merge re-run, a refused merge, a
// --clean rebuild, a multi-SM build (sm_89 + sm_90), a PTX build of the repository's rmsnorm
// group (compute_80: .ptx files that `verify` and `inspect` accept), and the exit codes of usage
// errors (docs/cli.md). Each build lifecycle is one sequential test so CI (2 cores) compiles the
// runtime as few times as possible.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/elf.h"
#include "io/fs.h"
#include "io/process.h"

namespace {

namespace fs = std::filesystem;

// e_machine of the ELF file at `path`, through kiln's ELF reader (core/elf.h); -1 when unreadable.
int elfMachineOf(const fs::path& path) {
  auto bytes = kiln::io::readFile(path);
  if (!bytes) return -1;
  auto header = kiln::core::readElfHeader(*bytes, path.string());
  return header ? header->machine : -1;
}

struct CliRun {
  int code;
  std::string out;
  std::string err;
};

CliRun kiln(std::vector<std::string> args) {
  args.insert(args.begin(), KILN_BINARY);
  kiln::io::PosixProcessRunner runner;
  auto r = runner.run(args);
  if (!r) return {-1, "", r.error()};
  return {r->exit_code, r->stdout_text, r->stderr_text};
}

std::vector<std::string> buildArgs(const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"build",
                                   "--gpu-arch",
                                   "sm_90",
                                   "--root",
                                   KILN_E2E_FIXTURES,
                                   "--runtime-dir",
                                   KILN_E2E_RUNTIME,
                                   "--output-dir",
                                   out.string(),
                                   "-j",
                                   "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The artifact's bin/kiln-doctor with `args`, and `env` set for the run (then unset).
CliRun doctor(const fs::path& artifact, std::vector<std::string> args,
              const std::vector<std::pair<std::string, std::string>>& env) {
  args.insert(args.begin(), (artifact / "bin/kiln-doctor").string());
  for (const auto& [name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
  kiln::io::PosixProcessRunner runner;
  auto r = runner.run(args);
  for (const auto& [name, value] : env) ::unsetenv(name.c_str());
  if (!r) return {-1, "", r.error()};
  return {r->exit_code, r->stdout_text, r->stderr_text};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

bool haveNvcc() {
  kiln::io::PosixProcessRunner runner;
  return runner.available("/usr/local/cuda/bin/nvcc") || runner.available("nvcc");
}

class KilnCli : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ =
        fs::path(KILN_E2E_WORK) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(work_);
    fs::create_directories(work_);
  }
  fs::path work_;
};

// bin/kiln-doctor of the x86_64 sm_90 artifact: an executable of the arch, recorded in
// metadata.json, that links only the artifact's library and the C and C++ runtimes (no libarchive,
// no CUDA library); run on the fake libcuda.so.1 (tests/runtime/fake_libcuda.cpp, found
// through LD_LIBRARY_PATH) as sm_90, sm_80 (no image), with a failing load, with two devices and
// none; with a libcuda.so.1 that does not load (exit 3, naming it); and its usage errors (exit 2).
void expectDoctorWorks(const fs::path& artifact, const nlohmann::json& metadata) {
  const fs::path binary = artifact / "bin/kiln-doctor";
  ASSERT_TRUE(fs::is_regular_file(binary));
  EXPECT_EQ(elfMachineOf(binary), kiln::core::kElfMachineX86_64);
  EXPECT_EQ(metadata["doctor"]["path"], "bin/kiln-doctor");
  EXPECT_EQ(*kiln::io::sha256File(binary), metadata["doctor"]["sha256"]);
  EXPECT_EQ(metadata["headers"]["include/kiln/runtime.h"],
            *kiln::io::sha256File(artifact / "include/kiln/runtime.h"));
  // Its dynamic section names the C and C++ runtimes only: no builder dependency, no CUDA library.
  const std::string bytes = kiln::io::readFile(binary).value();
  EXPECT_TRUE(contains(bytes, "libc.so.6"));
  for (const char* library : {"libarchive", "libfmt", "libicu", "libcudart"})
    EXPECT_FALSE(contains(bytes, library)) << library;

  // A CUDA 13.0 driver: the artifact is built with CUDA 13 (an older one refuses it, below).
  const std::vector<std::pair<std::string, std::string>> fake = {
      {"LD_LIBRARY_PATH", KILN_E2E_FAKE_LIBCUDA_DIR}, {"KILN_FAKE_DRIVER_VERSION", "13000"}};
  auto with = [&](std::vector<std::pair<std::string, std::string>> extra) {
    extra.insert(extra.begin(), fake.begin(), fake.end());
    return extra;
  };
  CliRun runs = doctor(artifact, {}, with({{"KILN_FAKE_SM", "90"}}));
  EXPECT_EQ(runs.code, 0) << runs.out << runs.err;
  EXPECT_TRUE(contains(runs.out, "kiln-doctor: artifact sm_90 (x86_64), fingerprint " +
                                     metadata["fingerprint"].get<std::string>() + ", 2 variants"))
      << runs.out;
  EXPECT_TRUE(contains(runs.out, "device 0: kiln fake GPU (sm_90, 4 SMs), driver 13.0"))
      << runs.out;
  EXPECT_TRUE(contains(runs.out, "tiny_f2_fp32")) << runs.out;
  EXPECT_TRUE(contains(runs.out, "runnable (sm_90 image)")) << runs.out;
  EXPECT_TRUE(contains(runs.out, "device 0: 2 of 2 variants runnable")) << runs.out;

  // JetPack 6's driver (CUDA 12.6) refuses the CUDA 13 artifact before loading it.
  CliRun old_driver = doctor(artifact, {},
                             {{"LD_LIBRARY_PATH", KILN_E2E_FAKE_LIBCUDA_DIR},
                              {"KILN_FAKE_DRIVER_VERSION", "12060"},
                              {"KILN_FAKE_SM", "90"}});
  EXPECT_EQ(old_driver.code, 1) << old_driver.out << old_driver.err;
  EXPECT_TRUE(contains(old_driver.out,
                       "NOT runnable: driver too old: tiny_f2_fp32: artifact built "
                       "with CUDA 13.0; driver supports 12.6; use the cuda12 "
                       "tarball or update the driver"))
      << old_driver.out;

  CliRun wrong_sm = doctor(artifact, {}, with({{"KILN_FAKE_SM", "80"}}));
  EXPECT_EQ(wrong_sm.code, 1) << wrong_sm.out << wrong_sm.err;
  EXPECT_TRUE(contains(wrong_sm.out, "NOT runnable: ")) << wrong_sm.out;
  EXPECT_TRUE(contains(wrong_sm.out, "artifact has sm_90 only; device is sm_80")) << wrong_sm.out;
  EXPECT_TRUE(contains(wrong_sm.out, "device 0: 0 of 2 variants runnable")) << wrong_sm.out;

  CliRun no_load =
      doctor(artifact, {}, with({{"KILN_FAKE_SM", "90"}, {"KILN_FAKE_LOAD_ERROR", "1"}}));
  EXPECT_EQ(no_load.code, 1) << no_load.out << no_load.err;
  EXPECT_TRUE(contains(no_load.out, "its sm_90 image does not load on this device")) << no_load.out;

  CliRun two = doctor(artifact, {}, with({{"KILN_FAKE_SM", "90"}, {"KILN_FAKE_DEVICES", "2"}}));
  EXPECT_EQ(two.code, 0) << two.out << two.err;
  EXPECT_TRUE(contains(two.out, "device 1: 2 of 2 variants runnable")) << two.out;
  CliRun one = doctor(artifact, {"--device", "1"},
                      with({{"KILN_FAKE_SM", "90"}, {"KILN_FAKE_DEVICES", "2"}}));
  EXPECT_EQ(one.code, 0) << one.out << one.err;
  EXPECT_FALSE(contains(one.out, "device 0:")) << one.out;
  CliRun out_of_range =
      doctor(artifact, {"--device=5"}, with({{"KILN_FAKE_SM", "90"}, {"KILN_FAKE_DEVICES", "2"}}));
  EXPECT_EQ(out_of_range.code, 2) << out_of_range.out << out_of_range.err;
  EXPECT_TRUE(contains(out_of_range.err, "--device 5 is out of range; 2 CUDA devices present"))
      << out_of_range.err;
  CliRun none = doctor(artifact, {}, with({{"KILN_FAKE_SM", "90"}, {"KILN_FAKE_DEVICES", "0"}}));
  EXPECT_EQ(none.code, 3) << none.out << none.err;
  EXPECT_TRUE(contains(none.err, "the driver shows no CUDA device")) << none.err;

  // A libcuda.so.1 that is not a library: found first through LD_LIBRARY_PATH, so the result is
  // the same on a machine with a real driver.
  const fs::path broken = artifact.parent_path().parent_path() / "broken_driver";
  fs::create_directories(broken);
  ASSERT_TRUE(kiln::io::writeFile(broken / "libcuda.so.1", "not a library\n"));
  CliRun no_driver = doctor(artifact, {}, {{"LD_LIBRARY_PATH", broken.string()}});
  EXPECT_EQ(no_driver.code, 3) << no_driver.out << no_driver.err;
  EXPECT_TRUE(contains(no_driver.err, "kiln-doctor: "));
  EXPECT_TRUE(contains(no_driver.err, "cannot load libcuda.so.1")) << no_driver.err;
  EXPECT_TRUE(contains(no_driver.err, "is the NVIDIA driver installed?")) << no_driver.err;

  CliRun help = doctor(artifact, {"--help"}, {});
  EXPECT_EQ(help.code, 0);
  EXPECT_TRUE(contains(help.out, "usage: kiln-doctor [--device N]")) << help.out;
  CliRun bad = doctor(artifact, {"--device", "-1"}, {});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(contains(bad.err,
                       "--device '-1' is not a device ordinal (a number from 0 to "
                       "2147483647)"))
      << bad.err;
  CliRun unknown = doctor(artifact, {"--verbose"}, {});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_TRUE(contains(unknown.err, "unknown argument '--verbose'")) << unknown.err;
}

TEST_F(KilnCli, BuildInspectMergeClean) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path artifact = work_ / "x86_64/sm_90";

  CliRun first = kiln(buildArgs(work_, {"--arch", "x86_64"}));
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("[2/2] "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("tiny_f2_fp32"), std::string::npos);
  EXPECT_NE(first.out.find(artifact.string()), std::string::npos);

  const auto metadata = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(metadata["schema_version"], 1);
  EXPECT_EQ(metadata["tag"], "sm_90");
  EXPECT_EQ(metadata["arch"], "x86_64");
  EXPECT_EQ(metadata["gpu_archs"], nlohmann::json::array({"sm_90"}));
  EXPECT_EQ(metadata["variants"].size(), 2u);
  const auto& image = metadata["variants"]["tiny_f3_fp32"]["sms"]["90"];
  EXPECT_EQ(image["target"], "sm_90");
  EXPECT_GT(image["kernels"]["kiln_tiny_scale"]["registers"].get<int>(), 0);
  EXPECT_NE(std::find(image["command"].begin(), image["command"].end(), "-DKILN_CONST_FACTOR=3"),
            image["command"].end());
  const fs::path cubin = artifact / image["cubin"].get<std::string>();
  EXPECT_EQ(elfMachineOf(cubin), kiln::core::kElfMachineCuda);
  EXPECT_EQ(*kiln::io::sha256File(cubin), image["sha256"]);
  EXPECT_EQ(*kiln::io::sha256File(artifact / "lib/libkiln.a"), metadata["library"]["sha256"]);
  EXPECT_TRUE(fs::is_regular_file(artifact / "include/kiln/variants/tiny_f2_fp32.h"));
  EXPECT_TRUE(fs::is_regular_file(artifact / "include/kiln/runtime.h"));
  expectDoctorWorks(artifact, metadata);

  CliRun json = kiln({"inspect", artifact.string(), "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(nlohmann::json::parse(json.out), metadata);
  CliRun table = kiln({"inspect", artifact.string()});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("tiny_f3_fp32"), std::string::npos);
  EXPECT_NE(table.out.find(metadata["fingerprint"].get<std::string>()), std::string::npos);

  // Same provenance: merges (both variants rebuilt, nothing lost), and the fingerprint is stable.
  CliRun merge = kiln(buildArgs(work_, {"--arch", "x86_64"}));
  ASSERT_EQ(merge.code, 0) << merge.out << merge.err;
  const auto merged = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(merged["variants"].size(), 2u);
  EXPECT_EQ(merged["fingerprint"], metadata["fingerprint"]);

  // Another host compiler command: refused, exit 2, artifact untouched.
  kiln::io::PosixProcessRunner runner;
  if (runner.available("x86_64-linux-gnu-g++")) {
    const auto before = *kiln::io::sha256File(artifact / "metadata.json");
    ::setenv("KILN_CXX", "x86_64-linux-gnu-g++", 1);
    CliRun refused = kiln(buildArgs(work_));
    ::unsetenv("KILN_CXX");
    EXPECT_EQ(refused.code, 2) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("re-run with --clean"), std::string::npos) << refused.err;
    EXPECT_EQ(*kiln::io::sha256File(artifact / "metadata.json"), before);
  }

  CliRun clean = kiln(buildArgs(work_, {"--clean", "--kernels", "tiny"}));
  ASSERT_EQ(clean.code, 0) << clean.out << clean.err;
  for (const auto& entry : fs::directory_iterator(work_ / "x86_64")) {
    EXPECT_EQ(entry.path().filename(), "sm_90") << "left behind: " << entry.path();
  }
}

// Multi-SM: the fixture group for sm_90,sm_89 (given out of order) is one artifact tagged
// sm_89_sm_90 with a cubin per SM, a per-SM image symbol per SM and one canonical variant symbol
// per variant in the library; an existing multi-SM artifact is not merged into without --clean.
// The artifact fingerprint covers the runtime compiled into lib/libkiln.a (with the runners and
// the variants: every input of the library, core/library_recipe.h): one comment appended to a
// runtime source changes it and the source's recorded hash, though no variant changed; the same
// runtime at two paths gives the same library and bin/kiln-doctor bytes.
TEST_F(KilnCli, TheFingerprintCoversTheRuntimeSources) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path runtime = work_ / "runtime";
  fs::copy(KILN_E2E_RUNTIME, runtime, fs::copy_options::recursive);
  auto args = [&](std::vector<std::string> extra) {
    auto a = buildArgs(work_ / "out", std::move(extra));
    *(std::find(a.begin(), a.end(), "--runtime-dir") + 1) = runtime.string();
    return a;
  };
  const fs::path metadata_file = work_ / "out/x86_64/sm_90/metadata.json";
  CliRun first = kiln(args({"--arch", "x86_64", "--kernels", "tiny"}));
  ASSERT_EQ(first.code, 0) << first.out << first.err;
  const auto before = nlohmann::json::parse(*kiln::io::readFile(metadata_file));
  ASSERT_TRUE(before["runtime_inputs"].contains("runtime/src/status.cpp"))
      << before["runtime_inputs"].dump();
  // The same runtime at another path (the checkout's) gives the same library and doctor, byte
  // for byte, and the same fingerprint (docs/artifact-format.md, "Reproducible bytes").
  CliRun checkout = kiln(buildArgs(work_ / "checkout", {"--arch", "x86_64", "--kernels", "tiny"}));
  ASSERT_EQ(checkout.code, 0) << checkout.out << checkout.err;
  const auto same =
      nlohmann::json::parse(*kiln::io::readFile(work_ / "checkout/x86_64/sm_90/metadata.json"));
  EXPECT_EQ(same["fingerprint"], before["fingerprint"]);
  EXPECT_EQ(same["library"]["sha256"], before["library"]["sha256"]);
  EXPECT_EQ(same["doctor"]["sha256"], before["doctor"]["sha256"]);
  EXPECT_EQ(same["headers"], before["headers"]);

  const fs::path source = runtime / "src/status.cpp";
  ASSERT_TRUE(kiln::io::writeFile(source, *kiln::io::readFile(source) + "// one more line\n"));
  CliRun second = kiln(args({"--arch", "x86_64", "--kernels", "tiny", "--clean"}));
  ASSERT_EQ(second.code, 0) << second.out << second.err;
  const auto after = nlohmann::json::parse(*kiln::io::readFile(metadata_file));
  EXPECT_NE(after["fingerprint"], before["fingerprint"]);
  EXPECT_EQ(after["runtime_inputs"]["runtime/src/status.cpp"], *kiln::io::sha256File(source));
  EXPECT_NE(after["runtime_inputs"]["runtime/src/status.cpp"],
            before["runtime_inputs"]["runtime/src/status.cpp"]);
  for (const auto& name : {"tiny_f2_fp32", "tiny_f3_fp32"}) {
    EXPECT_EQ(after["variants"][name]["fingerprint"], before["variants"][name]["fingerprint"]);
  }
}

TEST_F(KilnCli, MultiSmBuild) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  kiln::io::PosixProcessRunner runner;
  const fs::path artifact = work_ / "x86_64/sm_89_sm_90";
  std::vector<std::string> args = {"build",
                                   "--gpu-arch",
                                   "sm_90,sm_89",
                                   "--kernels",
                                   "tiny",
                                   "--root",
                                   KILN_E2E_FIXTURES,
                                   "--runtime-dir",
                                   KILN_E2E_RUNTIME,
                                   "--output-dir",
                                   work_.string(),
                                   "--arch",
                                   "x86_64",
                                   "-j",
                                   "2"};
  CliRun build = kiln(args);
  ASSERT_EQ(build.code, 0) << build.out << build.err;
  EXPECT_NE(build.out.find("[4/4] "), std::string::npos) << build.out;
  for (const char* row :
       {"tiny_f2_fp32 sm_89", "tiny_f2_fp32 sm_90", "tiny_f3_fp32 sm_89", "tiny_f3_fp32 sm_90"}) {
    EXPECT_NE(build.out.find(row), std::string::npos) << row << " not in\n" << build.out;
  }

  const auto metadata = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(metadata["tag"], "sm_89_sm_90");
  EXPECT_EQ(metadata["gpu_archs"], nlohmann::json::array({"sm_89", "sm_90"}));
  EXPECT_EQ(metadata["compile_targets"], nlohmann::json::array({"sm_89", "sm_90"}));
  ASSERT_EQ(metadata["variants"].size(), 2u);
  for (const auto& [name, v] : metadata["variants"].items()) {
    ASSERT_EQ(v["sms"].size(), 2u) << name;
    for (const int sm : {89, 90}) {
      const auto& image = v["sms"][std::to_string(sm)];
      const fs::path cubin = artifact / image["cubin"].get<std::string>();
      EXPECT_EQ(elfMachineOf(cubin), kiln::core::kElfMachineCuda) << cubin;
      // CUDA 13 cubins (EI_ABIVERSION 8) carry the SM in bits 15:8 of e_flags.
      const std::string bytes = *kiln::io::readFile(cubin);
      ASSERT_GE(bytes.size(), 64u);
      EXPECT_EQ(static_cast<unsigned char>(bytes[0x31]), sm) << cubin;
      EXPECT_EQ(*kiln::io::sha256File(cubin), image["sha256"]);
      EXPECT_EQ(image["symbol"], "kiln_" + name + "__arch" + std::to_string(sm) + "_image");
    }
  }

  auto nm = runner.run({"nm", "-g", "--defined-only", (artifact / "lib/libkiln.a").string()});
  ASSERT_TRUE(nm) << nm.error();
  ASSERT_EQ(nm->exit_code, 0) << nm->stderr_text;
  auto count = [&](const std::string& symbol) {
    int n = 0;
    for (size_t at = nm->stdout_text.find(" T " + symbol + "\n"); at != std::string::npos;
         at = nm->stdout_text.find(" T " + symbol + "\n", at + 1)) {
      ++n;
    }
    return n;
  };
  for (const std::string name : {"tiny_f2_fp32", "tiny_f3_fp32"}) {
    EXPECT_EQ(count("kiln_" + name + "__arch89_image"), 1) << nm->stdout_text;
    EXPECT_EQ(count("kiln_" + name + "__arch90_image"), 1);
    EXPECT_EQ(count("kiln_" + name + "_variant"), 1);
  }
  // The canonical header has no per-SM declaration.
  const auto header = *kiln::io::readFile(artifact / "include/kiln/variants/tiny_f2_fp32.h");
  EXPECT_EQ(header.find("__arch"), std::string::npos) << header;

  CliRun inspect = kiln({"inspect", artifact.string()});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("sm_89_sm_90"), std::string::npos) << inspect.out;

  const auto before = *kiln::io::sha256File(artifact / "metadata.json");
  CliRun again = kiln(args);
  EXPECT_EQ(again.code, 2) << again.out << again.err;
  EXPECT_NE(again.err.find("never merge into an existing artifact; re-run with --clean"),
            std::string::npos)
      << again.err;
  EXPECT_EQ(*kiln::io::sha256File(artifact / "metadata.json"), before);
}

// A kernel whose parameter struct changes with the SM compiles on each SM, but the variant's
// shared header and table cannot describe both: the real cubins' parameter sizes are compared and
// the build fails (exit 1) before any host code is compiled, naming the variant and both SMs.
TEST_F(KilnCli, MultiSmAbiMismatchFails) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path group = work_ / "root/kernels/skew";
  ASSERT_TRUE(kiln::io::writeFile(
      group / "kiln.toml",
      "[group]\nname = \"skew\"\nkind = \"cuda\"\nsource = \"skew.cu\"\n"
      "entries = [\"kiln_skew\"]\nsupported_sms = [89, 90]\nsm_constant = true\n\n"
      "[constants]\nfactor = \"int\"\n\n[[family]]\nname = \"skew_f{factor}\"\n"
      "matrix = { factor = [2] }\n"));
  ASSERT_TRUE(kiln::io::writeFile(
      group / "skew.cu",
      "struct Args {\n#if KILN_TARGET_SM >= 90\n  long long extra;\n#endif\n"
      "  float* out;\n};\n"
      "extern \"C\" __global__ void kiln_skew(Args a) { a.out[0] = KILN_CONST_FACTOR; }\n"));
  CliRun r = kiln({"build", "--gpu-arch", "sm_89,sm_90", "--root", (work_ / "root").string(),
                   "--runtime-dir", KILN_E2E_RUNTIME, "--output-dir", (work_ / "out").string(),
                   "--arch", "x86_64", "-j", "2"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_NE(
      r.err.find(
          "skew_f2: ABI differs between sm_89 and sm_90: entry 'kiln_skew' takes 8 parameter bytes "
          "on sm_89 but 16 on sm_90"),
      std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(work_ / "out/x86_64/sm_89_sm_90"));
}

// PTX: the repository's own rmsnorm group (16 variants) for compute_80, with the real nvcc -ptx.
// Each variant's image is PTX text for .target sm_80 holding both entries; the artifact
// verifies, counting PTX images, and inspect shows the PTX images' resources as JIT-compiled.
TEST_F(KilnCli, PtxBuildVerifiesAndInspects) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path root = fs::path(KILN_E2E_RUNTIME).parent_path();
  const fs::path artifact = work_ / "x86_64/compute_80";
  CliRun build = kiln({"build", "--gpu-arch", "compute_80", "--kernels", "rmsnorm", "--root",
                       root.string(), "--runtime-dir", KILN_E2E_RUNTIME, "--output-dir",
                       work_.string(), "--arch", "x86_64", "-j", "2"});
  ASSERT_EQ(build.code, 0) << build.out << build.err;
  EXPECT_NE(build.out.find("[16/16] "), std::string::npos) << build.out;
  EXPECT_NE(build.out.find("ptx (JIT)"), std::string::npos) << build.out;

  const auto metadata = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(metadata["tag"], "compute_80");
  EXPECT_EQ(metadata["gpu_archs"], nlohmann::json::array({"compute_80"}));
  EXPECT_EQ(metadata["compile_targets"], nlohmann::json::array({"compute_80"}));
  ASSERT_EQ(metadata["variants"].size(), 16u);
  for (const auto& [name, v] : metadata["variants"].items()) {
    ASSERT_EQ(v["sms"].size(), 1u) << name;
    const auto& image = v["sms"]["80"];
    EXPECT_EQ(image["format"], "ptx") << name;
    EXPECT_EQ(image["target"], "compute_80") << name;
    EXPECT_EQ(image["cubin"], "cubins/" + name + ".compute_80.ptx");
    const fs::path ptx = artifact / image["cubin"].get<std::string>();
    const std::string text = *kiln::io::readFile(ptx);
    EXPECT_EQ(*kiln::io::sha256File(ptx), image["sha256"]) << name;
    EXPECT_EQ(text.size(), image["size"].get<std::size_t>()) << name;
    EXPECT_NE(text.find("\n.target sm_80\n"), std::string::npos) << name;
    EXPECT_NE(text.find(".visible .entry kiln_rmsnorm("), std::string::npos) << name;
    EXPECT_NE(text.find(".visible .entry kiln_add_rmsnorm("), std::string::npos) << name;
    EXPECT_EQ(text.find('\0'), std::string::npos) << name;
  }
  EXPECT_FALSE(fs::exists(artifact / "cubins/rmsnorm_h4096_bf16.sm_80.cubin"));

  CliRun verify = kiln({"verify", artifact.string()});
  ASSERT_EQ(verify.code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("x86_64 compute_80 (CUDA 13."), std::string::npos) << verify.out;
  EXPECT_NE(verify.out.find("16 variants, 0 cubins, 16 PTX images"), std::string::npos)
      << verify.out;

  CliRun inspect = kiln({"inspect", artifact.string()});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_NE(inspect.out.find("compute_80"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("ptx (JIT)"), std::string::npos) << inspect.out;
  // The size column is the image's (a PTX file's size too), not "cubin".
  EXPECT_NE(inspect.out.find("spills (st/ld)  image\n"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find(
                "rmsnorm_h4096_bf16  compute_80  hidden=4096 dtype=\"bf16\"  ptx (JIT)  -     -  "),
            std::string::npos)
      << inspect.out;

  // A byte flipped in one PTX file (its .target) is caught by verify, exit 1.
  const fs::path ptx = artifact / "cubins/rmsnorm_h4096_bf16.compute_80.ptx";
  std::string text = *kiln::io::readFile(ptx);
  text.replace(text.find(".target sm_80"), 13, ".target sm_90");
  ASSERT_TRUE(kiln::io::writeFile(ptx, text));
  CliRun tampered = kiln({"verify", artifact.string()});
  EXPECT_EQ(tampered.code, 1) << tampered.out << tampered.err;
  EXPECT_NE(tampered.err.find("cubins/rmsnorm_h4096_bf16.compute_80.ptx: sha256"),
            std::string::npos)
      << tampered.err;
  EXPECT_NE(tampered.err.find(
                "cubins/rmsnorm_h4096_bf16.compute_80.ptx: PTX is for .target sm_90, metadata.json "
                "says compute_80"),
            std::string::npos)
      << tampered.err;
}

// CUDA 12 (--cuda-version 12): the repository's rmsnorm group for sm_87 with the split toolchain,
// the system nvcc's PTX assembled by the pinned CUDA 12 ptxas that scripts/setup.sh installs in
// .cuda12/ (skipped without it). The artifact records both tools, verifies, and packages as a
// _cuda12 tarball.
TEST_F(KilnCli, Cuda12BuildOfRmsnormVerifiesAndPackages) {
  if (!haveNvcc()) GTEST_SKIP() << "nvcc is not installed";
  const fs::path root = fs::path(KILN_E2E_RUNTIME).parent_path();
  if (!fs::exists(root / ".cuda12/nvidia/cuda_nvcc/bin/ptxas"))
    GTEST_SKIP() << "no CUDA 12 ptxas in .cuda12/ (scripts/setup.sh installs it)";
  const fs::path artifact = work_ / "x86_64/sm_87";
  CliRun build = kiln({"build", "--cuda-version", "12", "--gpu-arch", "sm_87", "--kernels",
                       "rmsnorm", "--root", root.string(), "--runtime-dir", KILN_E2E_RUNTIME,
                       "--output-dir", work_.string(), "--arch", "x86_64", "-j", "2"});
  ASSERT_EQ(build.code, 0) << build.out << build.err;
  EXPECT_NE(build.out.find("[16/16] "), std::string::npos) << build.out;
  const auto metadata = nlohmann::json::parse(*kiln::io::readFile(artifact / "metadata.json"));
  EXPECT_EQ(metadata["cuda_version"].get<std::string>().rfind("12.6.", 0), 0u)
      << metadata["cuda_version"];
  EXPECT_EQ(metadata["cuda_frontend_version"].get<std::string>().rfind("13.", 0), 0u);
  for (const auto& [name, v] : metadata["variants"].items()) {
    const auto& image = v["sms"]["87"];
    EXPECT_EQ(image["format"], "cubin") << name;
    EXPECT_EQ(image["kernels"].size(), 2u) << name;  // ptxas -v reported both entries
    const fs::path cubin = artifact / image["cubin"].get<std::string>();
    EXPECT_EQ(elfMachineOf(cubin), 190) << name;
    // e_ident[EI_ABIVERSION]: 7 for a CUDA 12 ptxas' cubin, 8 for CUDA 13's, which a CUDA 12
    // driver does not load.
    EXPECT_EQ(static_cast<int>(kiln::io::readFile(cubin)->at(8)), 7) << name;
  }
  CliRun verify = kiln({"verify", artifact.string()});
  ASSERT_EQ(verify.code, 0) << verify.out << verify.err;
  EXPECT_NE(verify.out.find("x86_64 sm_87 (CUDA 12.6."), std::string::npos) << verify.out;
  CliRun package = kiln({"package", artifact.string(), "--dist", (work_ / "dist").string()});
  ASSERT_EQ(package.code, 0) << package.out << package.err;
  EXPECT_TRUE(fs::exists(work_ / "dist/kiln_x86_64_sm_87_cuda12.tar.gz")) << package.out;
  // A CUDA 13 build does not merge into it.
  CliRun merge = kiln({"build", "--gpu-arch", "sm_87", "--kernels", "rmsnorm", "--root",
                       root.string(), "--runtime-dir", KILN_E2E_RUNTIME, "--output-dir",
                       work_.string(), "--arch", "x86_64", "-j", "2"});
  EXPECT_EQ(merge.code, 2) << merge.out << merge.err;
  EXPECT_NE(merge.err.find("CUDA version differs (old: 12.6."), std::string::npos) << merge.err;
}

TEST_F(KilnCli, UsageErrorsExitWithTwo) {
  EXPECT_EQ(kiln({"build"}).code, 2);  // --gpu-arch is required
  EXPECT_EQ(kiln({}).code, 2);         // a subcommand is required
  EXPECT_EQ(kiln({"frobnicate"}).code, 2);
  CliRun cuda11 = kiln(buildArgs(work_, {"--cuda-version", "11"}));
  EXPECT_EQ(cuda11.code, 2) << cuda11.err;
  EXPECT_NE(cuda11.err.find("--cuda-version 11: kiln builds with CUDA 12 or 13 (allowed values: "
                            "12, 13)"),
            std::string::npos)
      << cuda11.err;
  CliRun unknown = kiln(buildArgs(work_, {"--kernels", "nope"}));
  if (haveNvcc()) {
    EXPECT_EQ(unknown.code, 2) << unknown.err;
    EXPECT_NE(unknown.err.find("unknown group 'nope'; known groups: tiny"), std::string::npos)
        << unknown.err;
    CliRun twice = kiln({"build", "--gpu-arch", "sm_90,sm_89,sm_90", "--root", KILN_E2E_FIXTURES});
    EXPECT_EQ(twice.code, 2);
    EXPECT_NE(twice.err.find("'sm_90' is listed twice"), std::string::npos) << twice.err;
  }
  CliRun missing = kiln({"inspect", (work_ / "nothing").string()});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("not a kiln artifact"), std::string::npos) << missing.err;
  EXPECT_EQ(kiln({"--help"}).code, 0);
}

TEST_F(KilnCli, ListShowsTheFixtureGroup) {
  CliRun list = kiln({"list", "--root", KILN_E2E_FIXTURES});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("tiny_f2_fp32"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("factor:int"), std::string::npos) << list.out;
}

}  // namespace
