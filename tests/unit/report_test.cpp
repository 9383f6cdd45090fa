// The read-only reports on artifacts built by hand: the build's resource table and inspect's
// table (a PTX image's resources read "ptx (JIT)" and "-", the size column is the "image"'s, the
// runtime inputs counted or "not recorded"),
// and `kiln doctor`'s runDoctor, which rebuilds the variant tables from the files (a PTX image
// NUL-terminated, marked ptx) and asks the runtime, here on the fake driver of tests/runtime.
#include <gtest/gtest.h>

#include "core/report.h"
#include "io/fs.h"
#include "runtime/fake_driver.h"
#include "unit/fake_toolchain.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;

// Two variants: rmsnorm_h1024_bf16 with an sm_90 cubin, rmsnorm_h4096_bf16 with compute_80 PTX.
ArtifactMetadata makeMetadata(const std::string& cubin_bytes, const std::string& ptx_bytes) {
  ArtifactMetadata m;
  Provenance& p = m.provenance;
  p.kiln_version = "0.1.0";
  p.arch = "x86_64";
  p.host_target = "x86_64-linux-gnu";
  p.tag = "compute_80_sm_90";
  p.gpu_archs = {GpuArch(80, true), GpuArch(90)};
  p.compile_targets = {"compute_80", "sm_90"};
  p.cuda_version = "13.0.88";
  p.host_compiler_command = "g++";
  p.host_compiler_version = "g++ 12.2.0";
  m.build_date = "2025-01-01T00:00:00Z";
  m.library = {"lib/libkiln.a", "11", 42};
  for (const char* name : {"rmsnorm_h1024_bf16", "rmsnorm_h4096_bf16"}) {
    const bool ptx = std::string(name) == "rmsnorm_h4096_bf16";
    const int sm = ptx ? 80 : 90;
    VariantRecord v;
    v.name = name;
    v.group = "rmsnorm";
    v.kind = "cuda";
    v.entries = {"kernel_main"};
    v.constants = {{"hidden", ConstantType::kInt, std::int64_t{ptx ? 4096 : 1024}}};
    v.fingerprint = "ff";
    ImageRecord image;
    image.sm = sm;
    image.target = nvccTarget(sm, false, ptx);
    image.format = ptx ? kFormatPtx : kFormatCubin;
    image.symbol = imageSymbol(name, sm);
    image.cubin = imagePath(name, sm, ptx);
    const std::string& bytes = ptx ? ptx_bytes : cubin_bytes;
    image.sha256 = io::sha256Hex(bytes);
    image.size = bytes.size();
    image.compile_seconds = 0.5;
    if (!ptx) image.kernels["kernel_main"] = {40, 2048, 0, 4, 8};
    v.images[sm] = image;
    m.variants[name] = v;
  }
  m.groups["rmsnorm"] = {"cuda", {80, 90}, {"rmsnorm_h1024_bf16", "rmsnorm_h4096_bf16"}};
  m.fingerprint = artifactFingerprint(m);
  return m;
}

TEST(Report, PtxImagesShowJitInsteadOfResources) {
  const ArtifactMetadata m = makeMetadata(std::string(2048, 'c'), std::string(1024, 'p'));
  EXPECT_EQ(resourceTable(m),
            "variant             SM          registers  smem     spills (st/ld)  image    compile\n"
            "------------------------------------------------------------------------------------\n"
            "rmsnorm_h1024_bf16  sm_90       40         2.0 KiB  4/8             2.0 KiB  0.5s\n"
            "rmsnorm_h4096_bf16  compute_80  ptx (JIT)  -        -               1.0 KiB  0.5s\n");

  const std::string inspect = inspectTable(m);
  EXPECT_NE(inspect.find("tag            compute_80_sm_90\n"), std::string::npos) << inspect;
  EXPECT_NE(inspect.find("spills (st/ld)  image\n"), std::string::npos) << inspect;
  EXPECT_NE(inspect.find("rmsnorm_h4096_bf16  compute_80  hidden=4096  ptx (JIT)  -"),
            std::string::npos)
      << inspect;
}

TEST(Report, InspectCountsTheRuntimeInputs) {
  ArtifactMetadata m = makeMetadata(std::string(2048, 'c'), std::string(1024, 'p'));
  EXPECT_NE(
      inspectTable(m).find("runtime        inputs not recorded (metadata of an older kiln)\n"),
      std::string::npos);
  m.runtime_inputs = {{"runtime/src/status.cpp", "aa"}, {"runtime/src/loader.cpp", "bb"}};
  EXPECT_NE(inspectTable(m).find("runtime        2 input files (runtime_inputs)\n"),
            std::string::npos);
}

TEST(Report, DoctorRunsAPtxImageFromTheArtifactFiles) {
  kiln::testing::TempDir tmp;
  const std::string cubin = "FAKECUBIN kernel_main";
  const std::string ptx = "FAKEPTX kernel_main";
  const ArtifactMetadata m = makeMetadata(cubin, ptx);
  ASSERT_TRUE(io::writeFile(tmp.path() / kMetadataFile, toJson(m)));
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h1024_bf16.sm_90.cubin", cubin));
  ASSERT_TRUE(io::writeFile(tmp.path() / "cubins/rmsnorm_h4096_bf16.compute_80.ptx", ptx));

  kiln::fake::Driver driver({kiln::fake::h200()});
  auto report = runDoctor(tmp.path(), 0);
  ASSERT_TRUE(report) << report.error();
  ASSERT_EQ(report->variants.size(), 2u);
  EXPECT_EQ(report->variants[0].name, "rmsnorm_h1024_bf16");
  EXPECT_TRUE(report->variants[0].runnable) << report->variants[0].reason;
  EXPECT_EQ(report->variants[0].image_sm, 90);
  EXPECT_FALSE(report->variants[0].image_ptx);
  EXPECT_EQ(report->variants[1].name, "rmsnorm_h4096_bf16");
  EXPECT_TRUE(report->variants[1].runnable) << report->variants[1].reason;
  EXPECT_EQ(report->variants[1].image_sm, 80);
  EXPECT_TRUE(report->variants[1].image_ptx);
  EXPECT_EQ(driver.ex_loads.load(), 1);  // the PTX went through the JIT load, NUL-terminated
  EXPECT_EQ(driver.loads.load(), 2);

  // A JIT failure is the variant's reason, not the doctor's.
  driver.fail_jit = 1;
  driver.jit_log = "ptxas fatal   : Unsupported .version 9.9";
  report = runDoctor(tmp.path(), 0);
  ASSERT_TRUE(report) << report.error();
  EXPECT_TRUE(report->variants[0].runnable);
  EXPECT_FALSE(report->variants[1].runnable);
  EXPECT_NE(report->variants[1].reason.find(
                "its compute_80 PTX image does not load on this device: PTX JIT "
                "failed: "),
            std::string::npos)
      << report->variants[1].reason;
  EXPECT_NE(report->variants[1].reason.find("; JIT log: ptxas fatal   : Unsupported .version 9.9"),
            std::string::npos)
      << report->variants[1].reason;
}

}  // namespace
}  // namespace kiln::core
