// Generated headers and shims, compared with docs/artifact-format.md; the image shim of a cubin
// and of a PTX image (the text, one NUL after it that size leaves out, kiln_image.ptx = 1).
#include <gtest/gtest.h>

#include "core/codegen.h"

namespace kiln::core {
namespace {

VariantRecord makeRecord(const std::string& name, std::int64_t hidden, const std::string& dtype) {
  VariantRecord v;
  v.name = name;
  v.group = "rmsnorm";
  v.kind = "cuda";
  v.entries = {"kiln_rmsnorm", "kiln_add_rmsnorm"};
  v.constants = {{"hidden", ConstantType::kInt, hidden}, {"dtype", ConstantType::kDtype, dtype}};
  ImageRecord image;
  image.sm = 90;
  image.target = "sm_90";
  image.symbol = "kiln_" + name + "__arch90_image";
  image.cubin = "cubins/" + name + ".sm_90.cubin";
  image.sha256 = "ab12";
  v.images[90] = image;
  return v;
}

TEST(Codegen, VariantHeaderMatchesTheFormatDocument) {
  const std::string header = variantHeader(makeRecord("rmsnorm_h4096_bf16", 4096, "bf16"));
  EXPECT_EQ(header.rfind("#pragma once\n", 0), 0u);
  for (const char* line : {
           "#include \"kiln/variant.h\"\n",
           "const kiln_variant* kiln_rmsnorm_h4096_bf16_variant(void);",
           "namespace kiln::variants::rmsnorm_h4096_bf16 {\n",
           "inline constexpr const char kName[] = \"rmsnorm_h4096_bf16\";\n",
           "inline constexpr int kHidden = 4096;\n",
           "inline constexpr const char kDtype[] = \"bf16\";\n",
       }) {
    EXPECT_NE(header.find(line), std::string::npos) << "missing: " << line << "in\n" << header;
  }
  // Constants in kiln.toml order.
  EXPECT_LT(header.find("kHidden"), header.find("kDtype"));
  // Canonical: no per-SM symbol, so the header does not depend on the SMs built.
  EXPECT_EQ(header.find("__arch"), std::string::npos) << header;
}

// A variant with two SM images: both are declared and listed by the one variant table, in SM
// order, and its header and the aggregate header are byte-identical to the single-SM ones.
TEST(Codegen, TwoSmVariantSharesTheSingleSmHeader) {
  const VariantRecord single = makeRecord("rmsnorm_h4096_bf16", 4096, "bf16");
  VariantRecord multi = single;
  ImageRecord sm87 = single.images.at(90);
  sm87.sm = 87;
  sm87.target = "sm_87";
  sm87.symbol = "kiln_rmsnorm_h4096_bf16__arch87_image";
  sm87.cubin = "cubins/rmsnorm_h4096_bf16.sm_87.cubin";
  multi.images[87] = sm87;

  EXPECT_EQ(variantHeader(multi), variantHeader(single));
  const GroupRecord group{"cuda", {80, 90}, {single.name}};
  EXPECT_EQ(groupHeader("rmsnorm", group, {&multi}, true),
            groupHeader("rmsnorm", group, {&single}, true));
  ArtifactMetadata m1, m2;
  m1.provenance.tag = "sm_90";
  m1.variants[single.name] = single;
  m1.groups["rmsnorm"].variants = {single.name};
  m2.provenance.tag = "sm_87_sm_90";
  m2.variants[multi.name] = multi;
  m2.groups["rmsnorm"].variants = {multi.name};
  EXPECT_EQ(allHeader(m2), allHeader(m1));

  const std::string shim = variantShimSource(multi);
  for (const char* line : {
           "const kiln_image* kiln_rmsnorm_h4096_bf16__arch87_image(void);\n",
           "const kiln_image* kiln_rmsnorm_h4096_bf16__arch90_image(void);\n",
           "      *kiln_rmsnorm_h4096_bf16__arch87_image(),\n"
           "      *kiln_rmsnorm_h4096_bf16__arch90_image(),\n",
           "{\"rmsnorm_h4096_bf16\", \"rmsnorm\", kEntries, 2, images, 2, 0}",
           "extern \"C\" const kiln_variant* kiln_rmsnorm_h4096_bf16_variant(void) {",
       }) {
    EXPECT_NE(shim.find(line), std::string::npos) << "missing: " << line << "in\n" << shim;
  }
  // Each image shim defines only its own SM's symbol.
  const std::string shim87 = imageShimSource(multi, multi.images.at(87), "x");
  EXPECT_NE(shim87.find("kiln_rmsnorm_h4096_bf16__arch87_image(void) {"), std::string::npos);
  EXPECT_NE(shim87.find("{87, 0, kCubin"), std::string::npos) << shim87;
  EXPECT_EQ(shim87.find("__arch90"), std::string::npos);
  EXPECT_NE(artifactTableSource(m2).find("kiln_artifact_tag(void) { return \"sm_87_sm_90\"; }"),
            std::string::npos);
}

TEST(Codegen, BoolConstant) {
  VariantRecord v = makeRecord("fmha_d128_causal", 1, "bf16");
  v.constants = {{"causal", ConstantType::kBool, true}};
  EXPECT_NE(variantHeader(v).find("inline constexpr bool kCausal = true;\n"), std::string::npos);
}

// A group without a runner (a test fixture's): a table of plain values after name and variant.
TEST(Codegen, GroupHeaderTable) {
  const VariantRecord a = makeRecord("rmsnorm_h1024_fp16", 1024, "fp16");
  const VariantRecord b = makeRecord("rmsnorm_h4096_bf16", 4096, "bf16");
  const GroupRecord group{"cuda", {80, 90}, {a.name, b.name}};
  const std::string header = groupHeader("rmsnorm", group, {&a, &b}, false);
  for (const char* line : {
           "#include \"kiln/variants/rmsnorm_h1024_fp16.h\"\n",
           "namespace kiln::generated::rmsnorm {\n",
           "struct VariantEntry {\n  const char* name;\n  const kiln_variant* (*variant)();\n  int "
           "hidden;\n"
           "  const char* dtype;\n};\n",
           "    {\"rmsnorm_h1024_fp16\", &kiln_rmsnorm_h1024_fp16_variant, 1024, \"fp16\"},\n",
           "    {\"rmsnorm_h4096_bf16\", &kiln_rmsnorm_h4096_bf16_variant, 4096, \"bf16\"},\n",
           "inline constexpr int kNumVariants = 2;\n",
           "inline constexpr int kSupportedSms[] = {80, 90};\n",
       }) {
    EXPECT_NE(header.find(line), std::string::npos) << "missing: " << line << "in\n" << header;
  }
  EXPECT_EQ(header.find("kiln/runners/"), std::string::npos) << header;
}

// A group with a runner: the rows are the runner's VariantInfo, initialized by field name with
// the constants in the runner's types, and the field count is checked, so that kiln.toml and the
// runner cannot disagree without a compile error.
TEST(Codegen, GroupHeaderTableInTheRunnersTypes) {
  VariantRecord a = makeRecord("fmha_wgmma_d128_bf16_causal", 128, "bf16");
  a.group = "fmha";
  a.constants = {{"head_dim", ConstantType::kInt, std::int64_t{128}},
                 {"dtype", ConstantType::kDtype, std::string("bf16")},
                 {"mask", ConstantType::kEnum, std::string("causal")},
                 {"paged_kv", ConstantType::kBool, false}};
  const GroupRecord group{"cuda", {90}, {a.name}};
  const std::string header = groupHeader("fmha", group, {&a}, true);
  for (const char* line : {
           "#include \"kiln/runner_support.h\"\n#include \"kiln/runners/fmha.h\"\n",
           "using VariantInfo = ::kiln::fmha::VariantInfo;\n",
           "    {.name = \"fmha_wgmma_d128_bf16_causal\", .head_dim = 128, "
           ".dtype = ::kiln::DType::kBFloat16, .mask = ::kiln::fmha::Mask::kCausal, "
           ".paged_kv = false, .variant = &kiln_fmha_wgmma_d128_bf16_causal_variant},\n",
           "static_assert(::kiln::runner::fieldCount<VariantInfo>() == 6,\n",
           "kiln::fmha::VariantInfo must have the fields name, head_dim, dtype, mask, paged_kv, "
           "variant",
           "inline constexpr int kSupportedSms[] = {90};\n",
       }) {
    EXPECT_NE(header.find(line), std::string::npos) << "missing: " << line << "in\n" << header;
  }
}

TEST(Codegen, ImageShimEmbedsTheBytes) {
  const VariantRecord v = makeRecord("rmsnorm_h4096_bf16", 4096, "bf16");
  const std::string shim = imageShimSource(v, v.images.at(90),
                                           std::string("\x7f"
                                                       "ELF\x01",
                                                       5));
  EXPECT_NE(shim.find("0x7f, 0x45, 0x4c, 0x46, 0x01,"), std::string::npos) << shim;
  EXPECT_NE(
      shim.find("extern \"C\" const kiln_image* kiln_rmsnorm_h4096_bf16__arch90_image(void) {"),
      std::string::npos);
  EXPECT_NE(shim.find("{90, 0, kCubin, sizeof(kCubin), \"ab12\", 0}"), std::string::npos) << shim;
}

TEST(Codegen, PtxImageShimEmbedsTheTextAndANul) {
  VariantRecord v = makeRecord("rmsnorm_h4096_bf16", 4096, "bf16");
  ImageRecord& ptx = v.images.at(90);
  ptx.sm = 80;
  ptx.target = "compute_80";
  ptx.format = kFormatPtx;
  ptx.symbol = "kiln_rmsnorm_h4096_bf16__arch80_image";
  ptx.cubin = "cubins/rmsnorm_h4096_bf16.compute_80.ptx";
  const std::string shim = imageShimSource(v, ptx, ".target sm_80\n");  // 14 bytes
  EXPECT_NE(
      shim.find("// The compute_80 PTX of rmsnorm_h4096_bf16 (14 bytes and a NUL, sha256 ab12"),
      std::string::npos)
      << shim;
  EXPECT_EQ(shim.find("kCubin"), std::string::npos) << shim;
  // ".target sm_80\n" as bytes, then the NUL on a line of its own, then the end of the array.
  EXPECT_NE(shim.find("alignas(64) const unsigned char kPtx[] = {\n"
                      "    0x2e, 0x74, 0x61, 0x72, 0x67, 0x65, 0x74, 0x20, 0x73, 0x6d, 0x5f, 0x38, "
                      "0x30, 0x0a,\n"
                      "    0x00,  // the NUL that ends the PTX text; not counted in size\n"
                      "};\n"),
            std::string::npos)
      << shim;
  EXPECT_NE(
      shim.find("extern \"C\" const kiln_image* kiln_rmsnorm_h4096_bf16__arch80_image(void) {"),
      std::string::npos);
  // size leaves the NUL out (it is what metadata.json records); the last field is ptx = 1.
  EXPECT_NE(
      shim.find(
          "  static const kiln_image image = {80, 0, kPtx, sizeof(kPtx) - 1, \"ab12\", 1};\n"),
      std::string::npos)
      << shim;
  // Exactly one NUL byte is embedded: the text's own bytes are never 0x00 in valid PTX.
  size_t nuls = 0;
  for (size_t at = shim.find("0x00,"); at != std::string::npos; at = shim.find("0x00,", at + 1))
    ++nuls;
  EXPECT_EQ(nuls, 1u) << shim;
}

TEST(Codegen, CubinImageShimHasNoNulAndPtxZero) {
  const VariantRecord v = makeRecord("rmsnorm_h4096_bf16", 4096, "bf16");
  ASSERT_EQ(v.images.at(90).format, kFormatCubin);  // the default
  const std::string shim = imageShimSource(v, v.images.at(90), "ab");
  EXPECT_NE(shim.find("// The sm_90 cubin of rmsnorm_h4096_bf16 (2 bytes, sha256 ab12)."),
            std::string::npos)
      << shim;
  EXPECT_NE(shim.find("const unsigned char kCubin[] = {\n    0x61, 0x62,\n};\n"), std::string::npos)
      << shim;
  EXPECT_EQ(shim.find("kPtx"), std::string::npos) << shim;
  EXPECT_EQ(shim.find("0x00"), std::string::npos) << shim;
  EXPECT_NE(shim.find("{90, 0, kCubin, sizeof(kCubin), \"ab12\", 0};\n"), std::string::npos)
      << shim;
}

TEST(Codegen, VariantShimAndArtifactTable) {
  const VariantRecord v = makeRecord("rmsnorm_h4096_bf16", 4096, "bf16");
  const std::string shim = variantShimSource(v);
  EXPECT_NE(shim.find("\"kiln_rmsnorm\", \"kiln_add_rmsnorm\""), std::string::npos) << shim;
  EXPECT_NE(shim.find("*kiln_rmsnorm_h4096_bf16__arch90_image(),"), std::string::npos);
  EXPECT_NE(shim.find("{\"rmsnorm_h4096_bf16\", \"rmsnorm\", kEntries, 2, images, 1, 0}"),
            std::string::npos);

  ArtifactMetadata m;
  m.provenance.tag = "sm_90";
  m.fingerprint = "f00d";
  m.variants[v.name] = v;
  m.groups["rmsnorm"].variants = {v.name};
  const std::string table = artifactTableSource(m);
  EXPECT_NE(table.find("kiln_rmsnorm_h4096_bf16_variant(),"), std::string::npos);
  EXPECT_NE(table.find("kiln_artifact_fingerprint(void) { return \"f00d\"; }"), std::string::npos);
  EXPECT_NE(table.find("kiln_artifact_tag(void) { return \"sm_90\"; }"), std::string::npos);
  const std::string all = allHeader(m);
  EXPECT_NE(all.find("#include \"kiln/groups/rmsnorm.h\""), std::string::npos);
  EXPECT_NE(all.find("const kiln_variant* const* kiln_artifact_variants(size_t* count);"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::core
