// metadata.json: every field of docs/artifact-format.md survives a write/read round trip (PTX
// images and compute_NN gpu_archs included; an image without `format` is a cubin, an unknown
// format is refused; metadata without `runtime_inputs` records none), other schema versions are
// rejected, the fingerprint's inputs, the tag rule, and the merge rule accepts and refuses what
// contract 6 says.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/fingerprint.h"
#include "core/metadata.h"

namespace kiln::core {
namespace {

ArtifactMetadata makeMetadata() {
  ArtifactMetadata m;
  Provenance& p = m.provenance;
  p.kiln_version = "0.1.0";
  p.arch = "x86_64";
  p.host_target = "x86_64-linux-gnu";
  p.tag = "sm_90";
  p.gpu_archs = {90};
  p.compile_targets = {"sm_90"};
  p.cuda_version = "13.0.88";
  p.host_compiler_command = "g++";
  p.host_compiler_version = "g++ 12.2.0";
  m.build_date = "2025-01-01T00:00:00Z";
  m.library = {"lib/libkiln.a", "11", 42};
  m.runtime_inputs = {{"runtime/include/kiln/status.h", "dd"}, {"runtime/src/loader.cpp", "ee"}};
  VariantRecord v;
  v.name = "rmsnorm_h4096_bf16";
  v.group = "rmsnorm";
  v.kind = "cuda";
  v.entries = {"kiln_rmsnorm"};
  v.constants = {{"hidden", ConstantType::kInt, std::int64_t{4096}},
                 {"dtype", ConstantType::kEnum, std::string("bf16")},
                 {"fused", ConstantType::kBool, false}};
  v.inputs = {{"kernels/rmsnorm/kiln.toml", "aa"}};
  v.fingerprint = "ff";
  ImageRecord image;
  image.sm = 90;
  image.target = "sm_90";
  image.symbol = "kiln_rmsnorm_h4096_bf16__arch90_image";
  image.cubin = "cubins/rmsnorm_h4096_bf16.sm_90.cubin";
  image.sha256 = "cc";
  image.size = 1000;
  image.compile_seconds = 1.5;
  image.command = {"nvcc", "-cubin"};
  image.kernels["kiln_rmsnorm"] = {40, 16, 0, 4, 8};
  v.images[90] = image;
  m.variants[v.name] = v;
  m.groups["rmsnorm"] = {"cuda", {80, 90}, {v.name}};
  m.fingerprint = artifactFingerprint(m);
  return m;
}

TEST(Metadata, HasEveryDocumentedField) {
  const auto j = nlohmann::json::parse(toJson(makeMetadata()));
  for (const char* field :
       {"schema_version", "kiln_version", "arch", "host_target", "tag", "gpu_archs",
        "compile_targets", "cuda_version", "host_compiler", "cutlass_version", "build_date",
        "library", "fingerprint", "runtime_inputs", "groups", "variants"}) {
    EXPECT_TRUE(j.contains(field)) << field;
  }
  EXPECT_EQ(j["gpu_archs"][0], "sm_90");
  EXPECT_TRUE(j["cutlass_version"].is_null());
  EXPECT_FALSE(j.contains("cute_dsl_version"));  // no CuTe DSL variant: no DSL fields
  EXPECT_FALSE(j.contains("cute_dsl_cuda"));
  EXPECT_EQ(j["runtime_inputs"]["runtime/src/loader.cpp"], "ee");
  const auto& v = j["variants"]["rmsnorm_h4096_bf16"];
  for (const char* field : {"group", "kind", "object", "header", "entries", "constants", "inputs",
                            "fingerprint", "sms"}) {
    EXPECT_TRUE(v.contains(field)) << field;
  }
  EXPECT_EQ(v["constants"]["hidden"], 4096);
  EXPECT_EQ(v["constants"]["fused"], false);
  const auto& sm = v["sms"]["90"];
  for (const char* field :
       {"target", "symbol", "cubin", "sha256", "size", "compile_seconds", "command", "kernels"}) {
    EXPECT_TRUE(sm.contains(field)) << field;
  }
  EXPECT_EQ(sm["kernels"]["kiln_rmsnorm"]["spill_load_bytes"], 8);
}

TEST(Metadata, RoundTripKeepsConstantOrderAndValues) {
  const ArtifactMetadata m = makeMetadata();
  auto back = parseMetadata(toJson(m));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(toJson(*back), toJson(m));
  const auto& constants = back->variants.at("rmsnorm_h4096_bf16").constants;
  ASSERT_EQ(constants.size(), 3u);
  EXPECT_EQ(constants[0].name, "hidden");
  EXPECT_EQ(constants[2].type, ConstantType::kBool);
  EXPECT_EQ(artifactFingerprint(*back), m.fingerprint);
}

TEST(Metadata, RejectsOtherSchemaVersionsAndMissingFields) {
  auto j = nlohmann::json::parse(toJson(makeMetadata()));
  j["schema_version"] = 2;
  auto r = parseMetadata(j.dump());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("schema_version 2"), std::string::npos) << r.error();
  j["schema_version"] = 1;
  j.erase("cuda_version");
  r = parseMetadata(j.dump());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("'cuda_version'"), std::string::npos) << r.error();
}

// Issue 32: a schema_version that only converts to 1 (true, 1.5, 2^32 + 1) is not 1, and a key
// given twice is refused rather than read as its last value.
TEST(Metadata, SchemaVersionIsExactlyTheIntegerOneAndKeysAreNotRepeated) {
  auto j = nlohmann::json::parse(toJson(makeMetadata()));
  for (const nlohmann::json& bad :
       {nlohmann::json(true), nlohmann::json(1.5), nlohmann::json(4294967297LL),
        nlohmann::json("1"), nlohmann::json(-4294967295LL)}) {
    j["schema_version"] = bad;
    const auto r = parseMetadata(j.dump());
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_NE(r.error().find("schema_version " + bad.dump() + ";"), std::string::npos) << r.error();
  }
  j["schema_version"] = 1;
  ASSERT_TRUE(parseMetadata(j.dump()));
  // "schema_version": 2 first, then 1: the DOM would keep the 1.
  std::string text = j.dump();
  const std::size_t brace = text.find('{');
  text.insert(brace + 1, "\"schema_version\":2,");
  const auto r = parseMetadata(text);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("repeats the key \"schema_version\""), std::string::npos) << r.error();
  // A repeated key deeper down too; equal keys in different objects are fine.
  std::string nested = j.dump();
  const std::size_t host = nested.find("\"host_compiler\":{");
  ASSERT_NE(host, std::string::npos);
  nested.insert(host + std::string("\"host_compiler\":{").size(), "\"command\":\"x\",");
  const auto r2 = parseMetadata(nested);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().find("repeats the key \"command\""), std::string::npos) << r2.error();
}

// Metadata written before `runtime_inputs` existed reads as recording none, and its fingerprint
// is computed as it was then: provenance and variants only.
TEST(Metadata, MetadataWithoutRuntimeInputsRecordsNone) {
  ArtifactMetadata m = makeMetadata();
  m.runtime_inputs.clear();
  auto j = nlohmann::json::parse(toJson(m));
  j.erase("runtime_inputs");
  auto back = parseMetadata(j.dump());
  ASSERT_TRUE(back) << back.error();
  EXPECT_TRUE(back->runtime_inputs.empty());
  EXPECT_EQ(artifactFingerprint(*back), artifactFingerprint(m));
}

TEST(Metadata, FingerprintDependsOnVariantsAndProvenance) {
  ArtifactMetadata m = makeMetadata();
  const std::string before = artifactFingerprint(m);
  m.build_date = "2030-01-01T00:00:00Z";
  EXPECT_EQ(artifactFingerprint(m), before);  // the date is not an input
  m.variants.begin()->second.fingerprint = "00";
  EXPECT_NE(artifactFingerprint(m), before);
  m = makeMetadata();
  m.provenance.cuda_version = "13.1.0";
  EXPECT_NE(artifactFingerprint(m), before);
  m = makeMetadata();
  m.runtime_inputs["runtime/src/loader.cpp"] = "ef";  // a runtime-only change
  EXPECT_NE(artifactFingerprint(m), before);
  m = makeMetadata();
  m.runtime_inputs["runtime/src/launch.cpp"] = "ff";  // a runtime file added
  EXPECT_NE(artifactFingerprint(m), before);
}

// Issue 28: an artifact with CuTe DSL variants records the DSL (version and CUDA flavour) as
// fields of their own, which survive a round trip, enter the artifact's fingerprint (not a
// variant's: cuteDslFingerprint covers the DSL variants) and must come together.
TEST(Metadata, CuteDslProvenanceRoundTripsAndIsFingerprinted) {
  ArtifactMetadata m = makeMetadata();
  const std::string without = artifactFingerprint(m);
  m.provenance.cute_dsl_version = "4.8.1";
  m.provenance.cute_dsl_cuda = "cu13";
  const auto j = nlohmann::json::parse(toJson(m));
  EXPECT_EQ(j["cute_dsl_version"], "4.8.1");
  EXPECT_EQ(j["cute_dsl_cuda"], "cu13");
  auto back = parseMetadata(toJson(m));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->provenance.cute_dsl_version, "4.8.1");
  EXPECT_EQ(back->provenance.cute_dsl_cuda, "cu13");
  EXPECT_EQ(toJson(*back), toJson(m));
  const std::string with = artifactFingerprint(m);
  EXPECT_NE(with, without);
  m.provenance.cute_dsl_cuda = "cu12";
  EXPECT_NE(artifactFingerprint(m), with);
  EXPECT_EQ(cuteDslProvenance(m.provenance), "4.8.1 (cu12)");
  EXPECT_EQ(cuteDslProvenance(makeMetadata().provenance), "-");
  // Metadata without the fields (no DSL variant, or an older kiln) reads as none.
  back = parseMetadata(toJson(makeMetadata()));
  ASSERT_TRUE(back) << back.error();
  EXPECT_FALSE(back->provenance.cute_dsl_version);
  EXPECT_FALSE(back->provenance.cute_dsl_cuda);
  auto half = nlohmann::json::parse(toJson(m));
  half.erase("cute_dsl_cuda");
  const auto r = parseMetadata(half.dump());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("cute_dsl_version and cute_dsl_cuda must be given together"),
            std::string::npos)
      << r.error();
}

TEST(Merge, AcceptsMatchingProvenance) {
  const Provenance p = makeMetadata().provenance;
  Provenance now = p;
  now.compile_targets = {"sm_90", "sm_90a"};  // a new arch-specific group may join
  now.cutlass_version = "4.2.0";              // a group using CUTLASS may join
  now.cute_dsl_version = "4.8.1";             // a CuTe DSL group may join
  now.cute_dsl_cuda = "cu13";
  EXPECT_TRUE(checkMergeable(p, now));
  EXPECT_TRUE(checkMergeable(now, p));  // a build without DSL variants may merge into one with
  EXPECT_TRUE(checkMergeable(now, now));
}

TEST(Merge, RefusesAnyProvenanceDifferenceNamingBothValues) {
  const Provenance p = makeMetadata().provenance;
  struct Case {
    void (*mutate)(Provenance&);
    const char* message;
  };
  const Case cases[] = {
      {[](Provenance& n) { n.kiln_version = "0.2.0"; },
       "kiln version differs (old: 0.1.0, new: 0.2.0)"},
      {[](Provenance& n) { n.arch = "aarch64"; }, "arch differs (old: x86_64, new: aarch64)"},
      {[](Provenance& n) { n.host_target = "x86_64-pc-linux-gnu"; }, "host target differs"},
      {[](Provenance& n) { n.cuda_version = "13.1.0"; },
       "CUDA version differs (old: 13.0.88, new: 13.1.0)"},
      {[](Provenance& n) { n.host_compiler_version = "g++ 13"; },
       "host compiler version differs (old: g++ 12.2.0, new: g++ 13)"},
      {[](Provenance& n) { n.gpu_archs = {87}; }, "gpu archs differs (old: 90, new: 87)"},
      {[](Provenance& n) {
         n.cute_dsl_version = "4.9.0";
         n.cute_dsl_cuda = "cu13";
       },
       "CuTe DSL version differs (old: 4.8.1 (cu13), new: 4.9.0 (cu13))"},
      {[](Provenance& n) {
         n.cute_dsl_version = "4.8.1";
         n.cute_dsl_cuda = "cu12";
       },
       "CuTe DSL version differs (old: 4.8.1 (cu13), new: 4.8.1 (cu12))"},
  };
  Provenance with_dsl = p;  // the old artifact has CuTe DSL variants
  with_dsl.cute_dsl_version = "4.8.1";
  with_dsl.cute_dsl_cuda = "cu13";
  for (const auto& c : cases) {
    Provenance now = with_dsl;
    c.mutate(now);
    auto r = checkMergeable(with_dsl, now);
    ASSERT_FALSE(r) << c.message;
    EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
    EXPECT_NE(r.error().find(c.message), std::string::npos) << r.error();
    EXPECT_NE(r.error().find("re-run with --clean"), std::string::npos);
  }
  Provenance a = p, b = p;
  a.cutlass_version = "4.1.0";
  b.cutlass_version = "4.2.0";
  EXPECT_FALSE(checkMergeable(a, b));
}

// A multi-SM artifact: every SM in gpu_archs, every target in compile_targets, one `sms` entry
// per SM image, all through a round trip; the tag is the SMs joined.
TEST(Metadata, MultiSmRoundTrip) {
  ArtifactMetadata m = makeMetadata();
  m.provenance.tag = "sm_87_sm_90";
  m.provenance.gpu_archs = {87, 90};
  m.provenance.compile_targets = {"sm_87", "sm_90"};
  VariantRecord& v = m.variants.begin()->second;
  ImageRecord sm87 = v.images.at(90);
  sm87.sm = 87;
  sm87.target = "sm_87";
  sm87.symbol = "kiln_rmsnorm_h4096_bf16__arch87_image";
  sm87.cubin = "cubins/rmsnorm_h4096_bf16.sm_87.cubin";
  v.images[87] = sm87;
  ASSERT_TRUE(checkTag(m.provenance));
  const auto j = nlohmann::json::parse(toJson(m));
  EXPECT_EQ(j["gpu_archs"], nlohmann::json::array({"sm_87", "sm_90"}));
  EXPECT_EQ(j["compile_targets"], nlohmann::json::array({"sm_87", "sm_90"}));
  EXPECT_EQ(j["variants"]["rmsnorm_h4096_bf16"]["sms"]["87"]["symbol"],
            "kiln_rmsnorm_h4096_bf16__arch87_image");
  EXPECT_EQ(j["variants"]["rmsnorm_h4096_bf16"]["sms"]["90"]["symbol"],
            "kiln_rmsnorm_h4096_bf16__arch90_image");
  auto back = parseMetadata(toJson(m));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->provenance.gpu_archs, (std::vector<GpuArch>{87, 90}));
  EXPECT_EQ(back->variants.begin()->second.images.size(), 2u);
  EXPECT_EQ(toJson(*back), toJson(m));
}

TEST(Metadata, TagMustBeTheGpuArchsJoined) {
  Provenance p = makeMetadata().provenance;
  p.gpu_archs = {87, 90};
  auto stale = checkTag(p);  // tag still "sm_90"
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error(), "tag 'sm_90' does not match gpu_archs (expected 'sm_87_sm_90')");
  p.tag = "sm_87_sm_90";
  EXPECT_TRUE(checkTag(p));
  p.gpu_archs = {90, 87};
  p.tag = "sm_90_sm_87";
  EXPECT_FALSE(checkTag(p));
  p.gpu_archs = {90, 90};
  EXPECT_FALSE(checkTag(p));
}

// makeMetadata() as a compute_80 artifact: one PTX image, gpu_archs ["compute_80"].
ArtifactMetadata makePtxMetadata() {
  ArtifactMetadata m = makeMetadata();
  m.provenance.tag = "compute_80";
  m.provenance.gpu_archs = {GpuArch(80, true)};
  m.provenance.compile_targets = {"compute_80"};
  VariantRecord& v = m.variants.begin()->second;
  ImageRecord image = v.images.at(90);
  image.sm = 80;
  image.target = "compute_80";
  image.format = kFormatPtx;
  image.symbol = "kiln_rmsnorm_h4096_bf16__arch80_image";
  image.cubin = "cubins/rmsnorm_h4096_bf16.compute_80.ptx";
  image.command = {"nvcc", "-ptx", "-arch=compute_80"};
  image.kernels.clear();  // no ptxas ran
  v.images = {{80, image}};
  m.fingerprint = artifactFingerprint(m);
  return m;
}

TEST(Metadata, PtxImageRoundTrip) {
  const ArtifactMetadata m = makePtxMetadata();
  ASSERT_TRUE(checkTag(m.provenance));
  const auto j = nlohmann::json::parse(toJson(m));
  EXPECT_EQ(j["tag"], "compute_80");
  EXPECT_EQ(j["gpu_archs"], nlohmann::json::array({"compute_80"}));
  const auto& sm = j["variants"]["rmsnorm_h4096_bf16"]["sms"]["80"];
  EXPECT_EQ(sm["format"], "ptx");
  EXPECT_EQ(sm["target"], "compute_80");
  EXPECT_EQ(sm["cubin"], "cubins/rmsnorm_h4096_bf16.compute_80.ptx");
  EXPECT_TRUE(sm["kernels"].empty());
  auto back = parseMetadata(toJson(m));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->provenance.gpu_archs, (std::vector<GpuArch>{GpuArch(80, true)}));
  EXPECT_EQ(back->provenance.tag, "compute_80");
  const ImageRecord& image = back->variants.at("rmsnorm_h4096_bf16").images.at(80);
  EXPECT_TRUE(image.isPtx());
  EXPECT_EQ(image.format, "ptx");
  EXPECT_FALSE(image.archSpecific());
  EXPECT_EQ(toJson(*back), toJson(m));
  EXPECT_EQ(artifactFingerprint(*back), m.fingerprint);
  // A cubin image writes its format too.
  EXPECT_EQ(nlohmann::json::parse(
                toJson(makeMetadata()))["variants"]["rmsnorm_h4096_bf16"]["sms"]["90"]["format"],
            "cubin");
}

TEST(Metadata, MixedCubinAndPtxRoundTrip) {
  ArtifactMetadata m = makePtxMetadata();
  m.provenance.tag = "sm_80_compute_90";
  m.provenance.gpu_archs = {GpuArch(80), GpuArch(90, true)};
  VariantRecord& v = m.variants.begin()->second;
  ImageRecord ptx = v.images.at(80);
  ptx.sm = 90;
  ptx.target = "compute_90";
  ptx.symbol = "kiln_rmsnorm_h4096_bf16__arch90_image";
  ptx.cubin = "cubins/rmsnorm_h4096_bf16.compute_90.ptx";
  ImageRecord cubin = makeMetadata().variants.begin()->second.images.at(90);
  cubin.sm = 80;
  cubin.target = "sm_80";
  cubin.symbol = "kiln_rmsnorm_h4096_bf16__arch80_image";
  cubin.cubin = "cubins/rmsnorm_h4096_bf16.sm_80.cubin";
  v.images = {{80, cubin}, {90, ptx}};
  ASSERT_TRUE(checkTag(m.provenance));
  const auto j = nlohmann::json::parse(toJson(m));
  EXPECT_EQ(j["gpu_archs"], nlohmann::json::array({"sm_80", "compute_90"}));
  auto back = parseMetadata(toJson(m));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->provenance.gpu_archs, (std::vector<GpuArch>{GpuArch(80), GpuArch(90, true)}));
  EXPECT_FALSE(back->variants.begin()->second.images.at(80).isPtx());
  EXPECT_TRUE(back->variants.begin()->second.images.at(90).isPtx());
}

TEST(Metadata, ImageWithoutFormatIsACubinAndAnUnknownFormatIsRefused) {
  auto j = nlohmann::json::parse(toJson(makeMetadata()));
  auto& sm = j["variants"]["rmsnorm_h4096_bf16"]["sms"]["90"];
  sm.erase("format");  // metadata written before PTX images existed
  auto old = parseMetadata(j.dump());
  ASSERT_TRUE(old) << old.error();
  const ImageRecord& image = old->variants.at("rmsnorm_h4096_bf16").images.at(90);
  EXPECT_EQ(image.format, "cubin");
  EXPECT_FALSE(image.isPtx());
  sm["format"] = "fatbin";
  auto unknown = parseMetadata(j.dump());
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(),
            "metadata.json: variants.rmsnorm_h4096_bf16 SM 90: format 'fatbin' is neither 'cubin' "
            "nor 'ptx'");
}

TEST(Metadata, MalformedGpuArchsEntryParsesAsSmZeroAndFailsTheTag) {
  auto j = nlohmann::json::parse(toJson(makePtxMetadata()));
  j["gpu_archs"] = nlohmann::json::array({"compute_80a"});
  auto m = parseMetadata(j.dump());
  ASSERT_TRUE(m) << m.error();  // checkTag (and verify) judge it, in their own words
  ASSERT_EQ(m->provenance.gpu_archs.size(), 1u);
  EXPECT_EQ(m->provenance.gpu_archs[0].sm, 0);
  auto tag = checkTag(m->provenance);
  ASSERT_FALSE(tag);
  EXPECT_EQ(tag.error(),
            "gpu_archs [?] must be SMs (sm_NN or compute_NN), ascending and without repeats");
}

// The same artifact as sm_90 cubins and as compute_90 PTX are different inputs to a consumer.
TEST(Metadata, FingerprintTellsACubinArtifactFromAPtxOne) {
  ArtifactMetadata cubin = makeMetadata();
  ArtifactMetadata ptx = makeMetadata();
  ptx.provenance.gpu_archs = {GpuArch(90, true)};
  EXPECT_NE(artifactFingerprint(cubin), artifactFingerprint(ptx));
}

TEST(Metadata, TagOfComputeEntries) {
  Provenance p = makePtxMetadata().provenance;
  EXPECT_TRUE(checkTag(p));  // "compute_80"
  p.gpu_archs = {GpuArch(80), GpuArch(90, true)};
  p.tag = "sm_80_compute_90";
  EXPECT_TRUE(checkTag(p));
  p.tag = "sm_80_sm_90";
  auto wrong_kind = checkTag(p);
  ASSERT_FALSE(wrong_kind);
  EXPECT_EQ(wrong_kind.error(),
            "tag 'sm_80_sm_90' does not match gpu_archs (expected 'sm_80_compute_90')");
  // One SM twice, as a cubin and as PTX: not ascending.
  p.gpu_archs = {GpuArch(80), GpuArch(80, true)};
  p.tag = "sm_80_compute_80";
  auto repeated = checkTag(p);
  ASSERT_FALSE(repeated);
  EXPECT_EQ(repeated.error(),
            "gpu_archs [sm_80, compute_80] must be SMs (sm_NN or compute_NN), ascending and "
            "without repeats");
}

TEST(Merge, RefusesAPtxArtifactForACubinOne) {
  const Provenance p = makeMetadata().provenance;
  Provenance now = p;
  now.gpu_archs = {GpuArch(90, true)};
  auto r = checkMergeable(p, now);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("gpu archs differs (old: 90, new: compute_90)"), std::string::npos)
      << r.error();
}

}  // namespace
}  // namespace kiln::core
