// The library recipe (see library_recipe.h). The probe artifact is built here, in code, so that
// it is the same in every checkout and every process: only kiln's generator can change its hash.
#include "core/library_recipe.h"

#include <cstdint>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/codegen.h"
#include "core/metadata.h"
#include "core/naming.h"
#include "io/fs.h"

namespace kiln::core {

namespace {

// Bytes that hold a NUL and high bytes, as a cubin does.
const std::string& probeImage() {
  static const std::string bytes(
      "\x7f"
      "ELF\x02\x01\x00probe\xff\x80",
      13);
  return bytes;
}

ImageRecord probeImageRecord(const std::string& variant, int sm, bool arch_specific, bool ptx) {
  ImageRecord image;
  image.sm = sm;
  image.target = nvccTarget(sm, arch_specific, ptx);
  image.format = ptx ? kFormatPtx : kFormatCubin;
  image.symbol = imageSymbol(variant, sm);
  image.cubin = imagePath(variant, sm, ptx);
  image.sha256 = io::sha256Hex(probeImage());
  image.size = probeImage().size();
  return image;
}

VariantRecord probeVariant(const std::string& name, const std::string& group,
                           std::vector<Constant> constants) {
  VariantRecord v;
  v.name = name;
  v.group = group;
  v.kind = "cuda";
  v.entries = {"kiln_probe_main", "kiln_probe_tail"};
  v.constants = std::move(constants);
  return v;
}

ArtifactMetadata probeArtifact() {
  ArtifactMetadata m;
  m.provenance.tag = "compute_80_sm_90";
  m.fingerprint = "probe-fingerprint";
  const std::vector<Constant> constants = {
      {"hidden", ConstantType::kInt, std::int64_t{4096}},
      {"stride", ConstantType::kInt, std::int64_t{1} << 40},
      {"fused", ConstantType::kBool, true},
      {"dtype", ConstantType::kDtype, std::string("bf16")},
      {"mask_mode", ConstantType::kEnum, std::string("sliding_window")}};
  VariantRecord a = probeVariant("probe_h4096_bf16", "probe", constants);
  a.images[80] = probeImageRecord(a.name, 80, false, true);
  a.images[90] = probeImageRecord(a.name, 90, true, false);
  VariantRecord b = probeVariant("probe_h1024_fp16", "probe", constants);
  b.constants[0].value = std::int64_t{1024};
  b.constants[2].value = false;
  b.constants[3].value = std::string("fp16");
  b.images[90] = probeImageRecord(b.name, 90, false, false);
  VariantRecord c = probeVariant("plain_n8_fp32", "plain",
                                 {{"n", ConstantType::kInt, std::int64_t{8}},
                                  {"dtype", ConstantType::kDtype, std::string("fp32")},
                                  {"exact", ConstantType::kBool, true},
                                  {"layout", ConstantType::kEnum, std::string("row")}});
  c.images[90] = probeImageRecord(c.name, 90, false, false);
  for (VariantRecord* v : {&a, &b, &c}) m.variants[v->name] = *v;
  m.groups["probe"] = {"cuda", {80, 90}, {b.name, a.name}};
  m.groups["plain"] = {"cuda", {90}, {c.name}};
  return m;
}

}  // namespace

std::string codegenFingerprint() {
  static const std::string fingerprint = [] {
    const ArtifactMetadata m = probeArtifact();
    std::string text;
    for (const auto& [name, v] : m.variants) {
      text += variantHeader(v);
      text += variantShimSource(v, "13.0.88");
      for (const auto& [sm, image] : v.images) text += imageShimSource(v, image, probeImage());
    }
    for (const auto& [group, g] : m.groups) {
      std::vector<const VariantRecord*> records;
      for (const auto& name : g.variants) records.push_back(&m.variants.at(name));
      // Both row types for every group: with the runner's (a group with a runner header) and
      // the plain struct.
      text += groupHeader(group, g, records, true);
      text += groupHeader(group, g, records, false);
    }
    text += allHeader(m);
    text += artifactTableSource(m);
    return io::sha256Hex(text);
  }();
  return fingerprint;
}

std::string libraryRecipe() {
  return fmt::format("host_compile_flags {}\narchive_flags {}\ndoctor_link_flags {}\ncodegen {}\n",
                     fmt::join(kHostCompileFlags, " "), kArchiveFlags,
                     fmt::join(kDoctorLinkFlags, " "), codegenFingerprint());
}

}  // namespace kiln::core
