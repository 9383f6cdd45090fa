// verify on artifact directories (issue 3, parts 3 and 6): a real artifact passes, and each way an
// artifact can lie about itself (wrong host arch objects, a cubin for another SM, a variant
// missing from the library, an extra cubin, a tag that disagrees with its directory or its SMs,
// tampered bytes, links) is refused with a message naming the file and what was expected. PTX
// images (compute_NN): a PTX-only and a mixed artifact pass and are counted; PTX for another
// `.target`, PTX holding a NUL, a cubin under a PTX name, and an image format that disagrees
// with gpu_archs are refused.
#include <gtest/gtest.h>

#include "artifact_fixture.h"
#include "core/ar_archive.h"
#include "core/cubin.h"
#include "core/verify.h"

namespace kiln::core {
namespace {

using kiln::testing::ArtifactSpec;
using kiln::testing::editMetadata;
using kiln::testing::makeArtifact;
using kiln::testing::ScratchDir;
using kiln::testing::Toolbox;
namespace fs = std::filesystem;

#define REQUIRE_TOOLS(arch)                                        \
  do {                                                             \
    const std::string why = Toolbox::get().missing(arch);          \
    if (!why.empty()) GTEST_SKIP() << "needs real tools: " << why; \
  } while (0)

class VerifyDir : public ::testing::Test {
 protected:
  ScratchDir tmp_;
};

TEST_F(VerifyDir, RealArtifactVerifies) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  auto report = verifyArtifactDir(dir);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->arch, "x86_64");
  EXPECT_EQ(report->tag, "sm_90");
  EXPECT_EQ(report->cuda_major, 13);
  EXPECT_EQ(report->variants, 2);
  EXPECT_EQ(report->cubins, 2);
  EXPECT_EQ(report->library_members, 3);
  EXPECT_EQ(summarize(*report),
            "x86_64 sm_90 (CUDA 13.0.88): 2 variants, 2 cubins, 3 library objects verified");
}

TEST_F(VerifyDir, MultiSmArtifactVerifies) {
  REQUIRE_TOOLS("x86_64");
  ArtifactSpec spec;
  spec.sms = {80, 90};
  auto report = verifyArtifactDir(makeArtifact(tmp_.path(), spec));
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->tag, "sm_80_sm_90");
  EXPECT_EQ(report->cubins, 4);
}

TEST_F(VerifyDir, Aarch64ArtifactVerifies) {
  REQUIRE_TOOLS("aarch64");
  ArtifactSpec spec;
  spec.arch = "aarch64";
  spec.sms = {87};
  auto report = verifyArtifactDir(makeArtifact(tmp_.path(), spec));
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->arch, "aarch64");
}

TEST_F(VerifyDir, X86ObjectInAarch64ArtifactIsRejected) {
  REQUIRE_TOOLS("aarch64");
  REQUIRE_TOOLS("x86_64");
  ArtifactSpec spec;
  spec.arch = "aarch64";
  spec.sms = {87};
  const fs::path dir = makeArtifact(tmp_.path(), spec);
  // One x86_64 object slipped into the aarch64 library, checksums updated to match.
  Toolbox& box = Toolbox::get();
  const std::string library = box.library(
      {box.artifactObject("aarch64"), box.variantObject("aarch64", "rmsnorm_h1024_fp16", {87}),
       box.variantObject("x86_64", "rmsnorm_h4096_bf16", {87})});
  io::writeFile(dir / kLibraryPath, library).ok();
  editMetadata(dir, [&](ArtifactMetadata& m) {
    m.library.sha256 = io::sha256Hex(library);
    m.library.size = library.size();
  });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(
      report.error().find(
          "lib/libkiln.a(rmsnorm_h4096_bf16.o): ELF machine 62 (x86_64), expected 183 (aarch64)"),
      std::string::npos)
      << report.error();
  EXPECT_EQ(report.error().find("rmsnorm_h1024_fp16.o"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, CubinForTheWrongSmIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  // An sm_80 cubin under the sm_90 name, with a matching checksum: only its ELF header tells.
  const std::string sm80 = Toolbox::get().cubin(80);
  io::writeFile(dir / "cubins/rmsnorm_h4096_bf16.sm_90.cubin", sm80).ok();
  editMetadata(dir, [&](ArtifactMetadata& m) {
    m.variants["rmsnorm_h4096_bf16"].images[90].sha256 = io::sha256Hex(sm80);
    m.variants["rmsnorm_h4096_bf16"].images[90].size = sm80.size();
  });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("cubins/rmsnorm_h4096_bf16.sm_90.cubin: cubin is for sm_80"),
            std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("metadata.json says sm_90"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, TamperedCubinIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  const fs::path cubin = dir / "cubins/rmsnorm_h1024_fp16.sm_90.cubin";
  std::string bytes = io::readFile(cubin).value();
  bytes[bytes.size() / 2] ^= 1;
  io::writeFile(cubin, bytes).ok();
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("cubins/rmsnorm_h1024_fp16.sm_90.cubin: sha256"), std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, VariantMissingFromTheLibraryIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  Toolbox& box = Toolbox::get();
  const std::string library = box.library(
      {box.artifactObject("x86_64"), box.variantObject("x86_64", "rmsnorm_h1024_fp16", {90})});
  io::writeFile(dir / kLibraryPath, library).ok();
  editMetadata(dir, [&](ArtifactMetadata& m) {
    m.library.sha256 = io::sha256Hex(library);
    m.library.size = library.size();
  });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("lib/libkiln.a: no member defines kiln_rmsnorm_h4096_bf16_variant"),
            std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("no member defines kiln_rmsnorm_h4096_bf16__arch90_image"),
            std::string::npos);
}

TEST_F(VerifyDir, LibraryChecksumMismatchIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  editMetadata(dir, [&](ArtifactMetadata& m) { m.library.sha256 = std::string(64, '0'); });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("lib/libkiln.a: sha256"), std::string::npos) << report.error();
  EXPECT_NE(report.error().find("metadata.json records 0000"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, ExtraCubinIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  io::writeFile(dir / "cubins/stale_variant.sm_90.cubin", Toolbox::get().cubin(90)).ok();
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("cubins/stale_variant.sm_90.cubin: not listed in metadata.json"),
            std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, MissingCubinAndHeaderAreRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  fs::remove(dir / "cubins/rmsnorm_h4096_bf16.sm_90.cubin");
  fs::remove(dir / "include/kiln/variants/rmsnorm_h1024_fp16.h");
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("cubins/rmsnorm_h4096_bf16.sm_90.cubin: missing"),
            std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("include/kiln/variants/rmsnorm_h1024_fp16.h: missing (variant"),
            std::string::npos);
  // The header is also one that metadata.json's headers list.
  EXPECT_NE(report.error().find(
                "include/kiln/variants/rmsnorm_h1024_fp16.h: missing (metadata.json's headers"),
            std::string::npos);
  EXPECT_NE(report.error().find("3 problems"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, TagThatDisagreesWithItsDirectoryIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  const fs::path moved = dir.parent_path() / "sm_80";
  fs::rename(dir, moved);
  auto report = verifyArtifactDir(moved);
  ASSERT_FALSE(report);
  EXPECT_NE(
      report.error().find("sm_80/metadata.json: tag 'sm_90' disagrees with its directory 'sm_80'"),
      std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, TagThatDisagreesWithGpuArchsIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  editMetadata(dir, [](ArtifactMetadata& m) { m.provenance.gpu_archs = {87, 90}; });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find(
                "metadata.json: tag 'sm_90' disagrees with gpu_archs (expected 'sm_87_sm_90')"),
            std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, OtherSchemaVersionIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  std::string text = io::readFile(dir / "metadata.json").value();
  text.replace(text.find("\"schema_version\": 1"), 19, "\"schema_version\": 2");
  io::writeFile(dir / "metadata.json", text).ok();
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("schema_version 2"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, SymlinkAndStrayFilesAreRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  fs::create_symlink("/etc/passwd", dir / "include/kiln/passwd.h");
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("passwd.h: is a symlink"), std::string::npos) << report.error();
  fs::remove(dir / "include/kiln/passwd.h");
  io::writeFile(dir / ".obj/leftover.o", "x").ok();
  report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find(".obj/leftover.o: unexpected file"), std::string::npos)
      << report.error();
}

// ---- bin/kiln-doctor and the headers ---------------------------------------------------

TEST_F(VerifyDir, DoctorOfAnotherArchIsRejected) {
  REQUIRE_TOOLS("aarch64");
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  // An aarch64 doctor in an x86_64 artifact, its checksum updated to match.
  const std::string doctor = Toolbox::get().executable("aarch64");
  io::writeFile(dir / kDoctorPath, doctor).ok();
  editMetadata(dir, [&](ArtifactMetadata& m) {
    m.doctor.sha256 = io::sha256Hex(doctor);
    m.doctor.size = doctor.size();
  });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("bin/kiln-doctor: ELF machine 183 (aarch64), expected 62 (x86_64) "
                                "for arch x86_64"),
            std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, DoctorThatIsNotAnExecutableOrWasModifiedIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  // An object file (ET_REL) in the doctor's place, recorded as such.
  const std::string object =
      io::readFile(Toolbox::get().variantObject("x86_64", "rmsnorm_h4096_bf16", {90})).value();
  io::writeFile(dir / kDoctorPath, object).ok();
  editMetadata(dir, [&](ArtifactMetadata& m) {
    m.doctor.sha256 = io::sha256Hex(object);
    m.doctor.size = object.size();
  });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("bin/kiln-doctor: ELF type 1 is not an executable"),
            std::string::npos)
      << report.error();

  const fs::path other = makeArtifact(tmp_.path() / "b", {});
  io::writeFile(other / kDoctorPath, io::readFile(other / kDoctorPath).value() + "x").ok();
  report = verifyArtifactDir(other);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("bin/kiln-doctor: sha256"), std::string::npos) << report.error();
  EXPECT_NE(report.error().find("bin/kiln-doctor:"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, MissingDoctorOrDoctorRecordIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  fs::remove(dir / kDoctorPath);
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("bin/kiln-doctor: missing (metadata.json lists it)"),
            std::string::npos)
      << report.error();
  // Metadata of a kiln that predates the doctor: no record at all.
  const fs::path old = makeArtifact(tmp_.path() / "old", {});
  fs::remove(old / kDoctorPath);
  editMetadata(old, [](ArtifactMetadata& m) { m.doctor = {}; });
  report = verifyArtifactDir(old);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("metadata.json: no doctor record"), std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, HeadersAreCoveredByTheirHashes) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  // An edited header, an extra one, and one listed but gone.
  io::writeFile(dir / kAllHeaderPath, "#pragma once\n#define KILN_EVIL 1\n").ok();
  io::writeFile(dir / "include/kiln/extra.h", "#pragma once\n").ok();
  fs::remove(dir / "include/kiln/variants/rmsnorm_h1024_fp16.h");
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  const std::string& e = report.error();
  EXPECT_NE(e.find("include/kiln/kiln_all.h: sha256"), std::string::npos) << e;
  EXPECT_NE(e.find("include/kiln/extra.h: not listed in metadata.json's headers"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("include/kiln/variants/rmsnorm_h1024_fp16.h: missing (metadata.json's "
                   "headers list it)"),
            std::string::npos)
      << e;

  const fs::path old = makeArtifact(tmp_.path() / "old", {});
  editMetadata(old, [](ArtifactMetadata& m) { m.headers.clear(); });
  report = verifyArtifactDir(old);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("metadata.json: no headers record"), std::string::npos)
      << report.error();
  editMetadata(old, [](ArtifactMetadata& m) { m.headers["../../etc/passwd"] = "00"; });
  report = verifyArtifactDir(old);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("headers lists '../../etc/passwd', which is not under include/"),
            std::string::npos)
      << report.error();
}

// Names become paths, symbols and defines on the consumer's side, and recorded inputs are hashed
// again in the consumer's checkout by kiln_import_artifacts: a group name that walks out of
// kernels/, an input path that escapes the checkout or names another group, and values that are
// not sha256s are refused (issue 32: the CMake import hashed `../../dev/zero` forever).
TEST_F(VerifyDir, NamesAndRecordedInputsAreWhatKilnWrites) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), {});
  ASSERT_TRUE(verifyArtifactDir(dir));
  const std::string sha(64, 'a');
  editMetadata(dir, [&](ArtifactMetadata& m) {
    auto& v = m.variants.at("rmsnorm_h1024_fp16");
    v.inputs["../../../../../../../dev/zero"] = sha;
    v.inputs["kernels/decodeattn/kernel.cu"] = sha;
    v.inputs["kernels/common/x.cuh"] = "ZZ";
    m.runtime_inputs["runtime/src/../../../etc/passwd"] = sha;
    m.runtime_inputs["/etc/passwd"] = sha;
    m.fingerprint = "fixture";
  });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  std::string e = report.error();
  for (const char* expected :
       {"variants.rmsnorm_h1024_fp16.inputs path '../../../../../../../dev/zero': '..' "
        "component; expected a path in a kiln checkout",
        "variants.rmsnorm_h1024_fp16.inputs path 'kernels/decodeattn/kernel.cu': not under "
        "kernels/rmsnorm/ or kernels/common/",
        "variants.rmsnorm_h1024_fp16.inputs 'kernels/common/x.cuh': 'ZZ' is not a sha256",
        "runtime_inputs path 'runtime/src/../../../etc/passwd': '..' component",
        "runtime_inputs path '/etc/passwd': absolute path",
        "fingerprint 'fixture' is not a sha256"}) {
    EXPECT_NE(e.find(expected), std::string::npos) << expected << "\n" << e;
  }

  const fs::path renamed = makeArtifact(tmp_.path() / "renamed", {});
  editMetadata(renamed, [](ArtifactMetadata& m) {
    const std::string evil = "../../../../usr/include";
    m.groups[evil] = m.groups.at("rmsnorm");
    m.groups.erase("rmsnorm");
    for (auto& [name, v] : m.variants) v.group = evil;
  });
  report = verifyArtifactDir(renamed);
  ASSERT_FALSE(report);
  e = report.error();
  EXPECT_NE(e.find("group name '../../../../usr/include' must match [a-z][a-z0-9]*"),
            std::string::npos)
      << e;

  const fs::path bad_variant = makeArtifact(tmp_.path() / "bad_variant", {});
  editMetadata(bad_variant, [](ArtifactMetadata& m) {
    m.variants["rmsnorm_h1024_fp16"].inputs.clear();
    m.variants["rmsnorm_evil;x"] = m.variants.at("rmsnorm_h1024_fp16");
    m.groups.at("rmsnorm").variants.push_back("rmsnorm_evil;x");
  });
  report = verifyArtifactDir(bad_variant);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("variant name 'rmsnorm_evil;x' may contain only lower-case "
                                "letters, digits and '_'"),
            std::string::npos)
      << report.error();
}

// ---- PTX images ------------------------------------------------------------------------

// A compute_80 artifact: two PTX images (nvcc -ptx -arch=compute_80), no cubin.
ArtifactSpec ptxSpec() {
  ArtifactSpec spec;
  spec.sms = {80};
  spec.ptx_sms = {80};
  return spec;
}

TEST_F(VerifyDir, PtxArtifactVerifies) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), ptxSpec());
  EXPECT_EQ(dir.filename(), "compute_80");
  ASSERT_TRUE(fs::is_regular_file(dir / "cubins/rmsnorm_h4096_bf16.compute_80.ptx"));
  auto report = verifyArtifactDir(dir);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->tag, "compute_80");
  EXPECT_EQ(report->sms, (std::vector<int>{80}));
  EXPECT_EQ(report->cubins, 0);
  EXPECT_EQ(report->ptx_images, 2);
  EXPECT_EQ(summarize(*report),
            "x86_64 compute_80 (CUDA 13.0.88): 2 variants, 0 cubins, 2 PTX images, 3 library "
            "objects verified");
}

TEST_F(VerifyDir, MixedCubinAndPtxArtifactVerifies) {
  REQUIRE_TOOLS("x86_64");
  ArtifactSpec spec;
  spec.sms = {80, 90};
  spec.ptx_sms = {90};
  spec.variants = {"rmsnorm_h4096_bf16"};
  auto report = verifyArtifactDir(makeArtifact(tmp_.path(), spec));
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->tag, "sm_80_compute_90");
  EXPECT_EQ(report->sms, (std::vector<int>{80, 90}));
  EXPECT_EQ(report->cubins, 1);
  EXPECT_EQ(report->ptx_images, 1);
  EXPECT_EQ(summarize(*report),
            "x86_64 sm_80_compute_90 (CUDA 13.0.88): 1 variant, 1 cubin, 1 PTX image, 2 library "
            "objects verified");
}

// Rewrites the image file of (variant, SM) with `bytes` and updates its sha256 and size, so that
// only what the bytes say about themselves is at fault.
void replaceImage(const fs::path& dir, const std::string& variant, int sm,
                  const std::string& bytes) {
  std::string rel;
  editMetadata(dir, [&](ArtifactMetadata& m) {
    ImageRecord& image = m.variants.at(variant).images.at(sm);
    image.sha256 = io::sha256Hex(bytes);
    image.size = bytes.size();
    rel = image.cubin;
  });
  io::writeFile(dir / rel, bytes).ok();
}

TEST_F(VerifyDir, PtxForAnotherTargetIsRejected) {
  REQUIRE_TOOLS("x86_64");
  ArtifactSpec spec = ptxSpec();
  spec.sms = {90};
  spec.ptx_sms = {90};
  const fs::path dir = makeArtifact(tmp_.path(), spec);
  const std::string compute80 = Toolbox::get().ptx(80);
  ASSERT_NE(compute80.find(".target sm_80"), std::string::npos) << compute80;
  replaceImage(dir, "rmsnorm_h4096_bf16", 90, compute80);
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(
      report.error().find("cubins/rmsnorm_h4096_bf16.compute_90.ptx: PTX is for .target sm_80, "
                          "metadata.json says compute_90"),
      std::string::npos)
      << report.error();
  EXPECT_EQ(report.error().find("rmsnorm_h1024_fp16"), std::string::npos) << report.error();
}

TEST_F(VerifyDir, PtxHoldingANulIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), ptxSpec());
  std::string bytes = Toolbox::get().ptx(80);
  bytes.insert(bytes.find(".address_size"), std::string(1, '\0'));
  replaceImage(dir, "rmsnorm_h1024_fp16", 80, bytes);
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find(
                "cubins/rmsnorm_h1024_fp16.compute_80.ptx: PTX holds a NUL byte (the driver "
                "would load it truncated)"),
            std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, CubinUnderAPtxNameIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), ptxSpec());
  replaceImage(dir, "rmsnorm_h4096_bf16", 80, Toolbox::get().cubin(80));
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  // A cubin's bytes hold NULs; either way the file is refused as PTX, naming it.
  EXPECT_NE(report.error().find("cubins/rmsnorm_h4096_bf16.compute_80.ptx: "), std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("PTX holds a NUL byte"), std::string::npos) << report.error();
  // Text that is not PTX at all has no .target.
  replaceImage(dir, "rmsnorm_h4096_bf16", 80, "hello\n");
  report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find(
                "cubins/rmsnorm_h4096_bf16.compute_80.ptx: not PTX (no .target sm_NN directive)"),
            std::string::npos)
      << report.error();
}

TEST_F(VerifyDir, ImageFormatThatDisagreesWithGpuArchsIsRejected) {
  REQUIRE_TOOLS("x86_64");
  const fs::path dir = makeArtifact(tmp_.path(), ptxSpec());
  // gpu_archs says sm_80 (cubins) while the images are PTX.
  editMetadata(dir, [](ArtifactMetadata& m) { m.provenance.gpu_archs = {GpuArch(80)}; });
  auto report = verifyArtifactDir(dir);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find(
                "metadata.json: variant rmsnorm_h4096_bf16 SM 80 has a ptx image, but gpu_archs "
                "lists sm_80"),
            std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("tag 'compute_80' disagrees with gpu_archs (expected 'sm_80')"),
            std::string::npos)
      << report.error();

  // A PTX image whose target is not compute_NN.
  const fs::path other = makeArtifact(tmp_.path() / "other", ptxSpec());
  editMetadata(other, [](ArtifactMetadata& m) {
    m.variants.at("rmsnorm_h1024_fp16").images.at(80).target = "sm_80";
  });
  report = verifyArtifactDir(other);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find(
                "metadata.json: variant rmsnorm_h1024_fp16 SM 80 is PTX with target 'sm_80', "
                "expected 'compute_80'"),
            std::string::npos)
      << report.error();

  // A cubin image where gpu_archs lists compute_NN.
  ArtifactSpec sm80;
  sm80.sms = {80};
  const fs::path cubin = makeArtifact(tmp_.path() / "cubin", sm80);
  editMetadata(cubin, [](ArtifactMetadata& m) {
    m.provenance.gpu_archs = {GpuArch(80, true)};
    m.provenance.tag = "compute_80";
  });
  report = verifyArtifactDir(cubin);
  ASSERT_FALSE(report);
  EXPECT_NE(
      report.error().find("variant rmsnorm_h4096_bf16 SM 80 has a cubin image, but gpu_archs lists "
                          "compute_80"),
      std::string::npos)
      << report.error();
}

TEST(TarballName, ParsesComputeTags) {
  EXPECT_EQ(tarballFileName("x86_64", "compute_80", 13), "kiln_x86_64_compute_80_cuda13.tar.gz");
  auto name = parseTarballFileName("kiln_x86_64_compute_80_cuda13.tar.gz");
  ASSERT_TRUE(name) << name.error();
  EXPECT_EQ(name->arch, "x86_64");
  EXPECT_EQ(name->tag, "compute_80");
  auto mixed = parseTarballFileName("kiln_aarch64_sm_87_compute_90_cuda13.tar.gz");
  ASSERT_TRUE(mixed) << mixed.error();
  EXPECT_EQ(mixed->arch, "aarch64");
  EXPECT_EQ(mixed->tag, "sm_87_compute_90");
  auto bad = parseTarballFileName("kiln_x86_64_cuda13.tar.gz");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("kiln_x86_64_compute_80_cuda13.tar.gz"), std::string::npos)
      << bad.error();
}

// The e_flags decoding of cubin.h, on cubins nvcc writes now.
TEST(Cubin, ReadsTheSmFromRealCubins) {
  REQUIRE_TOOLS("x86_64");
  for (int sm : {80, 86, 87, 90, 100, 120}) {
    const std::string bytes = Toolbox::get().cubin(sm);
    ASSERT_FALSE(bytes.empty()) << sm;
    auto info = readCubin(bytes, "k.cubin");
    ASSERT_TRUE(info) << info.error();
    EXPECT_EQ(info->sm, sm);
    EXPECT_EQ(info->ptxas_target, "sm_" + std::to_string(sm));
  }
}

// sm_90a and sm_90 cubins share e_flags; the ptxas target in the toolkit note tells them apart.
TEST(Cubin, ReadsTheArchSpecificTarget) {
  REQUIRE_TOOLS("x86_64");
  ScratchDir tmp;
  io::writeFile(tmp.path() / "k.cu", "extern \"C\" __global__ void k(int* p) { *p = 1; }\n").ok();
  ASSERT_TRUE(kiln::testing::runQuiet(kiln::testing::nvccPath() + " -cubin -arch=sm_90a " +
                                      (tmp.path() / "k.cu").string() + " -o " +
                                      (tmp.path() / "k.cubin").string()));
  auto info = readCubin(io::readFile(tmp.path() / "k.cubin").value(), "k.cubin");
  ASSERT_TRUE(info) << info.error();
  EXPECT_EQ(info->sm, 90);
  EXPECT_EQ(info->ptxas_target, "sm_90a");
}

TEST(Cubin, RejectsHostObjectsAndGarbage) {
  EXPECT_FALSE(readCubin("not an elf", "x.cubin"));
  std::string host(64, '\0');
  host.replace(0, 4,
               "\x7f"
               "ELF");
  host[4] = 2;
  host[5] = 1;
  host[18] = 62;
  auto info = readCubin(host, "x.cubin");
  ASSERT_FALSE(info);
  EXPECT_NE(info.error().find("x.cubin: ELF machine 62, expected 190"), std::string::npos)
      << info.error();
}

TEST(ArArchive, RejectsTruncatedAndThinArchives) {
  EXPECT_NE(readArArchive("!<thin>\n", "lib.a").error().find("thin archive"), std::string::npos);
  std::string archive =
      "!<arch>\nfoo.o/          0           0     0     644     100       `\nshort";
  auto members = readArArchive(archive, "lib.a");
  ASSERT_FALSE(members);
  EXPECT_NE(members.error().find("claims 100 bytes"), std::string::npos) << members.error();
}

TEST(TarballName, ParsesAndFormats) {
  EXPECT_EQ(tarballFileName("x86_64", "sm_87_sm_90", 13), "kiln_x86_64_sm_87_sm_90_cuda13.tar.gz");
  auto name = parseTarballFileName("kiln_x86_64_sm_87_sm_90_cuda13.tar.gz");
  ASSERT_TRUE(name) << name.error();
  EXPECT_EQ(name->arch, "x86_64");
  EXPECT_EQ(name->tag, "sm_87_sm_90");
  EXPECT_EQ(name->cuda_major, 13);
  EXPECT_FALSE(parseTarballFileName("kiln_x86_64_cuda13.tar.gz"));
  EXPECT_FALSE(parseTarballFileName("kiln_aarch64_sm_87.tar.gz"));
  EXPECT_FALSE(cudaMajor("thirteen"));
  EXPECT_EQ(cudaMajor("12.8.93").value(), 12);
}

}  // namespace
}  // namespace kiln::core
