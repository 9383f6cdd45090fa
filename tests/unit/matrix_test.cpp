// The release matrix (core/matrix.h): the parser's rules and error locations, the entry filter,
// the check against the registry, the coverage gate and the size report, all on hand-built
// registries and metadata; and the repository's own packaging/matrix.toml, which must parse,
// list the tarballs issue 3 requires, agree with the real registry and appear in the docs.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/matrix.h"
#include "io/fs.h"

namespace kiln::core {
namespace {

Registry makeRegistry() {
  Registry registry;
  registry.root = "/repo";
  auto group = [&](const std::string& name,
                   std::vector<std::pair<std::string, std::vector<int>>> variants) {
    Group g;
    g.name = name;
    g.toml = "/repo/kernels/" + name + "/kiln.toml";
    for (auto& [vname, sms] : variants) {
      Variant v;
      v.name = vname;
      v.group = name;
      v.supported_sms = sms;
      g.variants.push_back(v);
      for (int sm : sms) {
        if (std::find(g.supported_sms.begin(), g.supported_sms.end(), sm) == g.supported_sms.end())
          g.supported_sms.push_back(sm);
      }
    }
    std::sort(g.supported_sms.begin(), g.supported_sms.end());
    return g;
  };
  // fmha promises sm_90 only; one rmsnorm variant skips sm_87.
  registry.groups = {
      group("fmha", {{"fmha_d128_bf16", {90}}}),
      group("rmsnorm", {{"rmsnorm_h1024_bf16", {80, 87, 90}}, {"rmsnorm_h4096_bf16", {80, 90}}})};
  return registry;
}

// The metadata a correct build of `entry` would write: every promised (variant, SM).
ArtifactMetadata coveringMetadata(const MatrixEntry& entry, const Registry& registry) {
  ArtifactMetadata m;
  m.provenance.arch = entry.arch;
  m.provenance.gpu_archs.assign(entry.sms.begin(), entry.sms.end());
  m.provenance.tag = entry.tag();
  for (const Group* g : entryGroups(entry, registry)) {
    for (const auto& v : g->variants) {
      VariantRecord record;
      record.name = v.name;
      record.group = g->name;
      for (int sm : entry.sms) {
        if (std::find(v.supported_sms.begin(), v.supported_sms.end(), sm) == v.supported_sms.end())
          continue;
        ImageRecord image;
        image.sm = sm;
        image.size = 1000 + static_cast<std::uint64_t>(sm);
        record.images[sm] = image;
      }
      if (record.images.empty()) continue;
      m.groups[g->name].variants.push_back(v.name);
      m.variants[v.name] = record;
    }
  }
  return m;
}

MatrixEntry entryOf(const std::string& arch, std::vector<int> sms,
                    std::vector<std::string> kernels = {}) {
  MatrixEntry e;
  e.arch = arch;
  e.sms = std::move(sms);
  e.kernels = std::move(kernels);
  e.line = 1;
  return e;
}

std::string parseError(const std::string& text) {
  auto r = parseMatrix(text, "matrix.toml");
  EXPECT_FALSE(r) << text;
  if (r) return "";
  EXPECT_EQ(r.errorKind(), ErrorKind::kUsage);
  return r.error();
}

TEST(Matrix, ParsesEntries) {
  auto m = parseMatrix(
      "# comment\n"
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_90\"]\nkernels = \"ALL\"\n\n"
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_90\", \"sm_110\", \"sm_80\"]\nkernels = "
      "[\"rmsnorm\", \"fmha\"]\n"
      "description = \"fleet\"\n",
      "matrix.toml");
  ASSERT_TRUE(m) << m.error();
  ASSERT_EQ(m->entries.size(), 2u);
  const MatrixEntry& single = m->entries[0];
  EXPECT_EQ(single.line, 2);
  EXPECT_EQ(single.id(), "x86_64/sm_90");
  EXPECT_EQ(single.kernelsText(), "ALL");
  EXPECT_TRUE(single.kernels.empty());
  const MatrixEntry& multi = m->entries[1];
  EXPECT_EQ(multi.line, 7);
  EXPECT_EQ(multi.sms, (std::vector<int>{80, 90, 110}));  // ascending by number, not lexically
  EXPECT_EQ(multi.tag(), "sm_80_sm_90_sm_110");
  EXPECT_EQ(multi.gpuArchText(), "sm_80,sm_90,sm_110");
  EXPECT_EQ(multi.kernelsText(), "rmsnorm,fmha");
  EXPECT_EQ(multi.description, "fleet");
}

TEST(Matrix, ErrorsNameFileLineAndRule) {
  const std::string head = "[[entry]]\narch = \"x86_64\"\n";
  EXPECT_EQ(parseError(""), "matrix.toml:1: the matrix lists no [[entry]]");
  EXPECT_EQ(
      parseError("[[entry]]\narch = \"riscv64\"\ngpu_archs = [\"sm_90\"]\nkernels = \"ALL\"\n"),
      "matrix.toml:2: arch \"riscv64\" is not one of x86_64, aarch64");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90a\"]\nkernels = \"ALL\"\n"),
            "matrix.toml:3: gpu_archs entry \"sm_90a\" is not an SM of the form sm_NN (sm_90); the "
            "'a' targets come "
            "from each group's kiln.toml");
  EXPECT_EQ(parseError(head + "gpu_archs = [90]\nkernels = \"ALL\"\n").substr(0, 40),
            "matrix.toml:3: gpu_archs entry 90 is not");
  EXPECT_EQ(
      parseError(head + "gpu_archs = []\nkernels = \"ALL\"\n"),
      "matrix.toml:3: 'gpu_archs' must be a non-empty array of SMs such as [\"sm_87\", \"sm_90\"]");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90\", \"sm_87\", \"sm_90\"]\nkernels = \"ALL\"\n"),
            "matrix.toml:3: gpu_archs lists sm_90 twice");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90\"]\n"),
            "matrix.toml:1: [[entry]] misses required key 'kernels' (\"ALL\" or a list of groups)");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90\"]\nkernels = \"all\"\n"),
            "matrix.toml:4: kernels \"all\" must be \"ALL\" or an array of group names");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90\"]\nkernels = []\n"),
            "matrix.toml:4: kernels is an empty array; list groups or write \"ALL\"");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90\"]\nkernels = [\"rmsnorm\", \"rmsnorm\"]\n"),
            "matrix.toml:4: kernels lists group 'rmsnorm' twice");
  EXPECT_EQ(parseError(head + "gpu_archs = [\"sm_90\"]\nkernels = \"ALL\"\nkernel = \"x\"\n"),
            "matrix.toml:5: unknown key 'kernel' in [[entry]] (allowed: arch, cuda, description, "
            "gpu_archs, kernels)");
  EXPECT_EQ(parseError("version = 1\n"),
            "matrix.toml:1: unknown key 'version' at the top level (allowed: [[entry]])");
  EXPECT_EQ(parseError("[entry]\narch = \"x86_64\"\n"),
            "matrix.toml:1: 'entry' must be an array of tables ([[entry]])");
  // The same tarball twice, even with the SMs in another order.
  const std::string a =
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_87\", \"sm_90\"]\nkernels = \"ALL\"\n";
  const std::string b =
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_90\", \"sm_87\"]\nkernels = [\"rmsnorm\"]\n";
  EXPECT_EQ(parseError(a + b),
            "matrix.toml:5: duplicate entry x86_64/sm_87_sm_90 (first at line 1); each (arch, "
            "gpu_archs, cuda) is one tarball");
  EXPECT_NE(parseError("[[entry]\n").find("matrix.toml:1: invalid TOML"), std::string::npos);
}

TEST(Matrix, SelectsEntriesById) {
  ReleaseMatrix m;
  m.file = "matrix.toml";
  m.entries = {entryOf("x86_64", {90}), entryOf("aarch64", {87}), entryOf("x86_64", {80, 90})};
  EXPECT_EQ(selectEntries(m, "")->size(), 3u);
  auto two = selectEntries(m, "x86_64/sm_80_sm_90,aarch64/sm_87");
  ASSERT_TRUE(two) << two.error();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].id(), "aarch64/sm_87");  // matrix order, not filter order
  auto unknown = selectEntries(m, "aarch64/sm_90");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(unknown.error(),
            "--entries: 'aarch64/sm_90' is not an entry of matrix.toml; its entries are "
            "x86_64/sm_90, aarch64/sm_87, x86_64/sm_80_sm_90");
}

TEST(Matrix, ChecksGroupsAndSmsAgainstTheRegistry) {
  const Registry registry = makeRegistry();
  ReleaseMatrix m;
  m.file = "matrix.toml";
  m.entries = {entryOf("x86_64", {80, 87, 90}), entryOf("aarch64", {87}, {"rmsnorm"})};
  EXPECT_TRUE(checkMatrixAgainstRegistry(m, registry));

  m.entries.push_back(entryOf("x86_64", {90}, {"rmsnorm", "softmax"}));
  m.entries.back().line = 9;
  auto unknown = checkMatrixAgainstRegistry(m, registry);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.errorKind(), ErrorKind::kUsage);
  EXPECT_EQ(
      unknown.error(),
      "matrix.toml:9: entry x86_64/sm_90: unknown group 'softmax'; known groups: fmha, rmsnorm");

  // fmha alone promises nothing for sm_87: that tarball would hold no sm_87 code.
  m.entries.back() = entryOf("aarch64", {87}, {"fmha"});
  m.entries.back().line = 12;
  auto empty = checkMatrixAgainstRegistry(m, registry);
  ASSERT_FALSE(empty);
  EXPECT_EQ(
      empty.error(),
      "matrix.toml:12: entry aarch64/sm_87: no variant of its groups (fmha) supports sm_87, so "
      "the tarball would ship sm_87 with nothing in it");
}

TEST(CoverageGate, PassesWhenEveryPromisedImageIsThere) {
  const Registry registry = makeRegistry();
  for (const MatrixEntry& entry :
       {entryOf("x86_64", {90}), entryOf("aarch64", {87}), entryOf("x86_64", {80, 87, 90}),
        entryOf("x86_64", {90}, {"rmsnorm"})}) {
    const ArtifactMetadata m = coveringMetadata(entry, registry);
    EXPECT_TRUE(coverageGaps(entry, registry, m).empty()) << entry.id();
    EXPECT_TRUE(checkCoverage(entry, registry, m)) << entry.id();
  }
  // rmsnorm_h4096_bf16 does not promise sm_87, so its absence there is no gap.
  const MatrixEntry orin = entryOf("aarch64", {87});
  EXPECT_EQ(coveringMetadata(orin, registry).variants.count("rmsnorm_h4096_bf16"), 0u);
}

TEST(CoverageGate, NamesEntryVariantAndSmOfEveryMissingImage) {
  const Registry registry = makeRegistry();
  const MatrixEntry entry = entryOf("x86_64", {80, 90});
  ArtifactMetadata m = coveringMetadata(entry, registry);
  m.variants.at("rmsnorm_h4096_bf16").images.erase(90);  // one SM of a variant
  m.variants.erase("fmha_d128_bf16");                    // a whole variant
  const auto gaps = coverageGaps(entry, registry, m);
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_EQ(gaps[0].variant, "fmha_d128_bf16");
  EXPECT_EQ(gaps[0].sm, 90);
  EXPECT_EQ(gaps[0].problem,
            "entry x86_64/sm_80_sm_90: variant fmha_d128_bf16 (group fmha) is missing for sm_90, "
            "which kernels/fmha/kiln.toml promises (supported_sms sm_90)");
  EXPECT_EQ(gaps[1].variant, "rmsnorm_h4096_bf16");
  EXPECT_EQ(gaps[1].sm, 90);
  auto gate = checkCoverage(entry, registry, m);
  ASSERT_FALSE(gate);
  EXPECT_EQ(gate.errorKind(), ErrorKind::kFailure);
  EXPECT_NE(
      gate.error().find(
          "coverage gate failed (2 problems):\n  entry x86_64/sm_80_sm_90: variant fmha_d128_bf16"),
      std::string::npos)
      << gate.error();
  EXPECT_NE(
      gate.error().find("variant rmsnorm_h4096_bf16 (group rmsnorm) is missing for sm_90, which "
                        "kernels/rmsnorm/kiln.toml promises (supported_sms sm_80, sm_90)"),
      std::string::npos)
      << gate.error();
}

TEST(CoverageGate, OnlyTheEntrysGroupsArePromisedAndNothingElseMayShip) {
  const Registry registry = makeRegistry();
  // An entry with kernels = ["rmsnorm"] does not promise fmha.
  const MatrixEntry subset = entryOf("x86_64", {90}, {"rmsnorm"});
  ArtifactMetadata m = coveringMetadata(subset, registry);
  EXPECT_TRUE(checkCoverage(subset, registry, m));
  // ...and its artifact may not carry fmha either (the tarball must be what the matrix says).
  const ArtifactMetadata all = coveringMetadata(entryOf("x86_64", {90}), registry);
  const auto extra = coverageGaps(subset, registry, all);
  ASSERT_EQ(extra.size(), 1u);
  EXPECT_EQ(extra[0].problem,
            "entry x86_64/sm_90: the artifact holds group fmha, which the entry's kernels "
            "(rmsnorm) do not include");
}

TEST(CoverageGate, ArtifactOfAnotherArchOrTagIsAGap) {
  const Registry registry = makeRegistry();
  const MatrixEntry entry = entryOf("aarch64", {87});
  ArtifactMetadata m = coveringMetadata(entry, registry);
  m.provenance.arch = "x86_64";
  m.provenance.gpu_archs = {87, 90};
  const auto gaps = coverageGaps(entry, registry, m);
  ASSERT_EQ(gaps.size(), 2u);
  EXPECT_EQ(gaps[0].problem,
            "entry aarch64/sm_87: the artifact's arch is x86_64, expected aarch64");
  EXPECT_EQ(gaps[1].problem,
            "entry aarch64/sm_87: the artifact's SMs are sm_87, sm_90, expected sm_87");
}

TEST(SizeReport, SumsPerImageVariantAndSm) {
  const Registry registry = makeRegistry();
  const MatrixEntry entry = entryOf("x86_64", {80, 90}, {"rmsnorm"});
  const ArtifactMetadata m =
      coveringMetadata(entry, registry);  // cubins 1080 (sm_80), 1090 (sm_90)
  const std::string blob(4096, 'x');
  auto member = [&](const char* name, size_t size) {
    return ArMember{name, std::string_view(blob).substr(0, size)};
  };
  const std::vector<ArMember> members = {
      member("rmsnorm_h1024_bf16.sm_80.o", 1500), member("rmsnorm_h1024_bf16.sm_90.o", 1600),
      member("rmsnorm_h1024_bf16.o", 300),        member("rmsnorm_h4096_bf16.sm_80.o", 1510),
      member("rmsnorm_h4096_bf16.sm_90.o", 1610), member("rmsnorm_h4096_bf16.o", 310),
      member("runtime_loader.o", 2000),           member("kiln_artifact.o", 100)};
  const SizeReport r = sizeReport(m, 9999, members, 4321);
  ASSERT_EQ(r.images.size(), 4u);
  EXPECT_EQ(r.images[0].variant, "rmsnorm_h1024_bf16");
  EXPECT_EQ(r.images[0].sm, 80);
  EXPECT_EQ(r.images[0].cubin, 1080u);
  EXPECT_EQ(r.images[0].object, 1500u);
  ASSERT_EQ(r.variants.size(), 2u);
  EXPECT_EQ(r.variants[1].variant, "rmsnorm_h4096_bf16");
  EXPECT_EQ(r.variants[1].sms, 2);
  EXPECT_EQ(r.variants[1].cubin, 1080u + 1090u);
  EXPECT_EQ(r.variants[1].library, 1510u + 1610u + 310u);
  ASSERT_EQ(r.sms.size(), 2u);
  EXPECT_EQ(r.sms[1].sm, 90);
  EXPECT_EQ(r.sms[1].variants, 2);
  EXPECT_EQ(r.sms[1].cubin, 2u * 1090u);
  EXPECT_EQ(r.sms[1].library, 1600u + 1610u);
  EXPECT_EQ(r.cubin_total, 2u * (1080u + 1090u));
  EXPECT_EQ(r.shared_bytes, 2100u);
  EXPECT_EQ(r.library_bytes, 9999u);
  EXPECT_EQ(r.tarball_bytes, 4321u);
  const std::string text = renderSizeReport(r);
  EXPECT_NE(text.find("per SM:"), std::string::npos) << text;
  EXPECT_NE(text.find("tarball 4.2 KiB"), std::string::npos) << text;
}

// The repository's own matrix: the one list CI, the docs and these tests read.
TEST(Matrix, CudaMajorPerEntryKeepsIdsUnique) {
  auto m = parseMatrix(
      "[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_87\"]\nkernels = \"ALL\"\n\n"
      "[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_87\"]\nkernels = \"ALL\"\ncuda = 12\n\n"
      "[[entry]]\narch = \"x86_64\"\ngpu_archs = [\"sm_90\"]\nkernels = \"ALL\"\ncuda = 13\n",
      "matrix.toml");
  ASSERT_TRUE(m) << m.error();
  ASSERT_EQ(m->entries.size(), 3u);
  EXPECT_EQ(m->entries[0].cuda, 13);  // the default
  EXPECT_EQ(m->entries[0].id(), "aarch64/sm_87");
  EXPECT_EQ(m->entries[0].artifactsSubdir(), "");
  EXPECT_EQ(m->entries[1].cuda, 12);
  EXPECT_EQ(m->entries[1].id(), "aarch64/sm_87/cuda12");
  EXPECT_EQ(m->entries[1].artifactsSubdir(), "cuda12");
  EXPECT_EQ(m->entries[2].id(), "x86_64/sm_90");
  auto picked = selectEntries(*m, "aarch64/sm_87/cuda12");
  ASSERT_TRUE(picked) << picked.error();
  ASSERT_EQ(picked->size(), 1u);
  EXPECT_EQ(picked->front().cuda, 12);

  EXPECT_EQ(parseError("[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_87\"]\nkernels = "
                       "\"ALL\"\ncuda = 11\n"),
            "matrix.toml:5: cuda 11 must be a CUDA major kiln builds with: 12 or 13");
  EXPECT_EQ(parseError("[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_87\"]\nkernels = "
                       "\"ALL\"\ncuda = \"12\"\n"),
            "matrix.toml:5: cuda \"12\" must be a CUDA major kiln builds with: 12 or 13");
  const std::string twice =
      "[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_87\"]\nkernels = \"ALL\"\ncuda = 12\n"
      "[[entry]]\narch = \"aarch64\"\ngpu_archs = [\"sm_87\"]\nkernels = \"ALL\"\ncuda = 12\n";
  EXPECT_NE(parseError(twice).find("duplicate entry aarch64/sm_87/cuda12 (first at line 1)"),
            std::string::npos)
      << parseError(twice);
}

TEST(ReleaseMatrixFile, ListsTheRequiredTarballsAndAgreesWithRegistryAndDocs) {
  const std::filesystem::path root = KILN_SOURCE_DIR;
  auto m = loadMatrix(root / "packaging/matrix.toml");
  ASSERT_TRUE(m) << m.error();
  std::vector<std::string> ids;
  for (const auto& e : m->entries) ids.push_back(e.id());
  for (const char* required : {"x86_64/sm_90", "aarch64/sm_87", "aarch64/sm_87/cuda12",
                               "aarch64/sm_110", "x86_64/sm_80_sm_86_sm_89_sm_90"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), required), ids.end())
        << required << " is not in the matrix";
  }
  auto registry = loadRegistry(root, {});
  ASSERT_TRUE(registry) << registry.error();
  auto agrees = checkMatrixAgainstRegistry(*m, *registry);
  EXPECT_TRUE(agrees) << agrees.error();
  // docs/packaging.md shows every tarball of the matrix (and so must be updated with it).
  auto docs = io::readFile(root / "docs/packaging.md");
  ASSERT_TRUE(docs) << docs.error();
  for (const auto& e : m->entries) {
    const std::string name =
        "kiln_" + e.arch + "_" + e.tag() + "_cuda" + std::to_string(e.cuda) + ".tar.gz";
    EXPECT_NE(docs->find(name), std::string::npos)
        << name << " is in the matrix but not in docs/packaging.md";
  }
}

}  // namespace
}  // namespace kiln::core
