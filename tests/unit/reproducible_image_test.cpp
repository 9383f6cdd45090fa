// Byte-reproducible images: one small CUDA C++ variant (device code in its group and in
// kernels/common/) built by the builder with the real nvcc, as a cubin for sm_90 and as PTX for
// compute_80, from two copies of the sources at different paths with different file times. The
// images must be byte-identical: kiln compiles with -lineinfo, whose line table records each
// source's directory (cubin and PTX) and modification time (cubin), so this holds only because
// nvcc reads the staged copy (core/inputs.h). The host compiler and ar are the fake toolchain's,
// so the test takes seconds; it needs nvcc, no GPU.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "core/builder.h"
#include "io/fs.h"
#include "io/process.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;
using kiln::testing::FakeTools;
using kiln::testing::TempDir;

// The real nvcc for every command that names it; the fake toolchain for the rest.
class RealNvccRunner final : public io::ProcessRunner {
 public:
  explicit RealNvccRunner(FakeTools& fake) : fake_(fake) {}
  Result<io::ProcessResult> run(const std::vector<std::string>& argv) override {
    return argv.front() == KILN_TEST_NVCC ? real_.run(argv) : fake_.runner.run(argv);
  }
  bool available(const std::string& program) override {
    return program == KILN_TEST_NVCC ? real_.available(program) : fake_.runner.available(program);
  }

 private:
  FakeTools& fake_;
  io::PosixProcessRunner real_;
};

// One group, one variant, device code in three files of two directories.
void writeSources(const fs::path& root) {
  ASSERT_TRUE(io::writeFile(root / "kernels/repro/kiln.toml",
                            "[group]\nname = \"repro\"\nkind = \"cuda\"\nsource = \"repro.cu\"\n"
                            "entries = [\"kiln_repro_scale\"]\nsupported_sms = [80, 90]\n\n"
                            "[constants]\nfactor = \"int\"\n\n"
                            "[[variant]]\nname = \"repro_f3\"\nconstants = { factor = 3 }\n"));
  ASSERT_TRUE(
      io::writeFile(root / "kernels/repro/repro.cu",
                    "#include \"repro/scale.cuh\"\n\n"
                    "extern \"C\" __global__ void kiln_repro_scale(float* out, const float* in, "
                    "int n) {\n"
                    "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                    "  if (i < n) out[i] = scaled(in[i]);\n}\n"));
  ASSERT_TRUE(io::writeFile(root / "kernels/repro/scale.cuh",
                            "#pragma once\n#include \"common/twice.cuh\"\n\n"
                            "__device__ inline float scaled(float x) { return twice(x) * "
                            "KILN_CONST_FACTOR; }\n"));
  ASSERT_TRUE(io::writeFile(root / "kernels/repro/README.md", "# not an input\n"));
  ASSERT_TRUE(
      io::writeFile(root / "kernels/common/twice.cuh",
                    "#pragma once\n__device__ inline float twice(float x) { return x + x; }\n"));
  ASSERT_TRUE(io::writeFile(root / "runtime/include/kiln/variant.h", "#pragma once\n"));
  ASSERT_TRUE(io::writeFile(root / "runtime/src/status.cpp", "int kiln_status;\n"));
  ASSERT_TRUE(io::writeFile(root / "runtime/doctor/kiln_doctor.cpp", "int main() {}\n"));
}

void setTimes(const fs::path& root, fs::file_time_type time) {
  for (const auto& file : io::listFiles(root)) fs::last_write_time(file, time);
}

class ReproducibleImage : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!io::PosixProcessRunner().available(KILN_TEST_NVCC)) {
      GTEST_SKIP() << KILN_TEST_NVCC << " is not installed";
    }
  }

  // The artifact's metadata after building `root` into <root>/artifacts.
  ArtifactMetadata build(const fs::path& root) {
    BuildOptions options;
    options.gpu_arch = "compute_80,sm_90";
    options.arch = "x86_64";
    options.root = root;
    options.output_dir = root / "artifacts";
    options.nvcc = KILN_TEST_NVCC;
    options.jobs = 2;
    options.kiln_version = "0.1.0";
    options.stage_dir = stage_.path().string();
    FakeTools fake;
    RealNvccRunner runner(fake);
    BuildSink sink;
    auto built = runBuild(options, runner, sink);
    EXPECT_TRUE(built) << built.error();
    return built ? built->metadata : ArtifactMetadata{};
  }

  TempDir stage_;
  TempDir work_;
};

TEST_F(ReproducibleImage, TwoCheckoutsGiveIdenticalImages) {
  const fs::path first = work_.path() / "a";
  const fs::path second = work_.path() / "second-checkout/of/the/same/commit";
  writeSources(first);
  writeSources(second);
  const auto now = fs::file_time_type::clock::now();
  setTimes(first, now - std::chrono::hours(24 * 400));
  setTimes(second, now);

  const ArtifactMetadata a = build(first);
  const ArtifactMetadata b = build(second);
  ASSERT_EQ(a.variants.count("repro_f3"), 1u);
  ASSERT_EQ(b.variants.count("repro_f3"), 1u);
  EXPECT_EQ(a.fingerprint, b.fingerprint);
  const auto& images_a = a.variants.at("repro_f3").images;
  const auto& images_b = b.variants.at("repro_f3").images;
  ASSERT_EQ(images_a.size(), 2u);  // compute_80 (PTX) and sm_90 (cubin)
  for (const auto& [sm, image] : images_a) {
    SCOPED_TRACE(image.target);
    ASSERT_EQ(images_b.count(sm), 1u);
    EXPECT_EQ(image.sha256, images_b.at(sm).sha256);
    const auto bytes = io::readFile(first / "artifacts/x86_64/compute_80_sm_90" / image.cubin);
    ASSERT_TRUE(bytes) << bytes.error();
    // -lineinfo is kept: the line table names the staged sources, and neither checkout.
    EXPECT_NE(bytes->find(stage_.path().string() + "/kiln-src-"), std::string::npos);
    EXPECT_EQ(bytes->find(first.string()), std::string::npos);
  }
}

}  // namespace
}  // namespace kiln::core
