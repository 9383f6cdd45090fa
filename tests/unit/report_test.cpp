// The read-only reports on artifacts built by hand: the build's resource table and inspect's
// table (a PTX image's resources read "ptx (JIT)" and "-", the size column is the "image"'s, the
// runtime inputs counted or "not recorded", the CuTe DSL shown or "-"). `kiln doctor`, which needs
// the runtime, is the CLI's: run_doctor_test.cpp.
#include <gtest/gtest.h>

#include "core/report.h"
#include "io/fs.h"
#include "unit/artifact_metadata_fixture.h"

namespace kiln::core {
namespace {

namespace fs = std::filesystem;

TEST(Report, PtxImagesShowJitInsteadOfResources) {
  const ArtifactMetadata m =
      kiln::testing::twoImageMetadata(std::string(2048, 'c'), std::string(1024, 'p'));
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
  ArtifactMetadata m =
      kiln::testing::twoImageMetadata(std::string(2048, 'c'), std::string(1024, 'p'));
  EXPECT_NE(
      inspectTable(m).find("runtime        inputs not recorded (metadata of an older kiln)\n"),
      std::string::npos);
  m.runtime_inputs = {{"runtime/src/status.cpp", "aa"}, {"runtime/src/loader.cpp", "bb"}};
  EXPECT_NE(inspectTable(m).find("runtime        2 input files (runtime_inputs)\n"),
            std::string::npos);
}

TEST(Report, InspectShowsTheCuteDsl) {
  ArtifactMetadata m =
      kiln::testing::twoImageMetadata(std::string(2048, 'c'), std::string(1024, 'p'));
  EXPECT_NE(inspectTable(m).find("cutlass        -\ncute dsl       -\n"), std::string::npos)
      << inspectTable(m);
  m.provenance.cute_dsl_version = "4.8.1";
  m.provenance.cute_dsl_cuda = "cu13";
  EXPECT_NE(inspectTable(m).find("cute dsl       4.8.1 (cu13)\n"), std::string::npos)
      << inspectTable(m);
}

}  // namespace
}  // namespace kiln::core
