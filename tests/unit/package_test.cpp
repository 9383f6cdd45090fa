// package, verifyTarball and extract (issue 3, parts 3 and 6): a real artifact packages into a
// reproducible, checksummed tarball that verifies and extracts; a flipped byte, hostile entries
// ("../", absolute paths, links, devices, duplicates, files outside <tag>/) and a name that
// disagrees with metadata are refused, and in every refused case nothing is written.
#include <gtest/gtest.h>

#include <thread>

#include "artifact_fixture.h"
#include "core/package.h"
#include "core/tarball.h"
#include "core/verify.h"

namespace kiln::core {
namespace {

using kiln::testing::ArtifactSpec;
using kiln::testing::entriesOf;
using kiln::testing::makeArtifact;
using kiln::testing::RawEntry;
using kiln::testing::ScratchDir;
using kiln::testing::Toolbox;
using kiln::testing::writeRawTarball;
namespace fs = std::filesystem;

#define REQUIRE_TOOLS(arch)                                        \
  do {                                                             \
    const std::string why = Toolbox::get().missing(arch);          \
    if (!why.empty()) GTEST_SKIP() << "needs real tools: " << why; \
  } while (0)

bool isEmptyDir(const fs::path& dir) {
  return !fs::exists(dir) || fs::is_empty(dir);
}

class Package : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = Toolbox::get().missing("x86_64");
    if (!why.empty()) GTEST_SKIP() << "needs real tools: " << why;
    artifact_ = makeArtifact(tmp_.path() / "artifacts", {});
    dist_ = tmp_.path() / "dist";
    dest_ = tmp_.path() / "consumer";
    fs::create_directories(dest_);
  }

  // A hand-made tarball in dist_ with the standard name and a correct sidecar.
  fs::path rawTarball(const std::vector<RawEntry>& entries) {
    fs::create_directories(dist_);
    const fs::path path = dist_ / "kiln_x86_64_sm_90_cuda13.tar.gz";
    writeRawTarball(path, entries);
    return path;
  }

  // verifyTarball and extractTarball both refuse `tarball` with `message`, and nothing is written.
  void expectRefused(const fs::path& tarball, const std::string& message) {
    auto report = verifyTarball(tarball);
    ASSERT_FALSE(report) << "accepted " << tarball;
    EXPECT_NE(report.error().find(message), std::string::npos) << report.error();
    auto extracted = extractTarball(tarball, dest_);
    ASSERT_FALSE(extracted);
    EXPECT_NE(extracted.error().find("nothing was written"), std::string::npos)
        << extracted.error();
    EXPECT_NE(extracted.error().find(message), std::string::npos) << extracted.error();
    EXPECT_TRUE(isEmptyDir(dest_)) << "extract wrote into " << dest_;
    EXPECT_FALSE(fs::exists("/tmp/kiln-pkg-escape")) << "an entry escaped the destination";
  }

  ScratchDir tmp_;
  fs::path artifact_, dist_, dest_;
};

TEST_F(Package, WritesANamedChecksummedTarballThatVerifies) {
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  EXPECT_EQ(packaged->tarball, dist_ / "kiln_x86_64_sm_90_cuda13.tar.gz");
  EXPECT_EQ(packaged->size, fs::file_size(packaged->tarball));
  EXPECT_EQ(io::readFile(packaged->sha256_file).value(),
            packaged->sha256 + "  kiln_x86_64_sm_90_cuda13.tar.gz\n");
  EXPECT_EQ(io::sha256File(packaged->tarball).value(), packaged->sha256);

  auto report = verifyTarball(packaged->tarball);
  ASSERT_TRUE(report) << report.error();
  EXPECT_EQ(report->tag, "sm_90");
  EXPECT_EQ(report->tarball_sha256, packaged->sha256);

  // Entries: under sm_90/, sorted, directories and regular files only.
  auto entries = readTarGz(io::readFile(packaged->tarball).value(), "t");
  ASSERT_TRUE(entries) << entries.error();
  std::vector<std::string> paths;
  for (const auto& e : *entries) {
    EXPECT_EQ(e.path.rfind("sm_90", 0), 0u) << e.path;
    EXPECT_TRUE(e.type == TarEntryType::kFile || e.type == TarEntryType::kDirectory) << e.path;
    paths.push_back(e.path);
  }
  EXPECT_TRUE(std::is_sorted(paths.begin(), paths.end()));
  EXPECT_NE(std::find(paths.begin(), paths.end(), "sm_90/lib/libkiln.a"), paths.end());
}

TEST_F(Package, IsReproducible) {
  auto first = packageArtifact(artifact_, tmp_.path() / "dist1");
  ASSERT_TRUE(first) << first.error();
  // Past a second boundary, so a timestamp taken from the clock would show.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  // Fresh file times on the artifact too: only contents may matter.
  for (const auto& file : io::listFiles(artifact_))
    fs::last_write_time(file, fs::file_time_type::clock::now());
  auto second = packageArtifact(artifact_, tmp_.path() / "dist2");
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(first->sha256, second->sha256);
}

TEST_F(Package, RefusesAnArtifactThatDoesNotVerify) {
  io::writeFile(artifact_ / "cubins/extra.sm_90.cubin", Toolbox::get().cubin(90)).ok();
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_FALSE(packaged);
  EXPECT_NE(packaged.error().find("refusing to package"), std::string::npos) << packaged.error();
  EXPECT_NE(packaged.error().find("cubins/extra.sm_90.cubin: not listed in metadata.json"),
            std::string::npos);
  EXPECT_TRUE(isEmptyDir(dist_));
}

TEST_F(Package, FlippedByteFailsTheChecksum) {
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  std::string bytes = io::readFile(packaged->tarball).value();
  bytes[bytes.size() / 2] ^= 0x10;
  io::writeFile(packaged->tarball, bytes).ok();
  expectRefused(packaged->tarball,
                "kiln_x86_64_sm_90_cuda13.tar.gz.sha256 records " + packaged->sha256);
}

TEST_F(Package, MissingChecksumFileIsRefused) {
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  fs::remove(packaged->sha256_file);
  expectRefused(packaged->tarball, "checksum file");
}

TEST_F(Package, DotDotEntryIsRefused) {
  auto entries = entriesOf(artifact_, "sm_90");
  entries.push_back({"sm_90/../../../../../../../tmp/kiln-pkg-escape", AE_IFREG, "x", {}, {}});
  expectRefused(rawTarball(entries),
                "entry 'sm_90/../../../../../../../tmp/kiln-pkg-escape': '..' component");
}

TEST_F(Package, AbsolutePathIsRefused) {
  auto entries = entriesOf(artifact_, "sm_90");
  entries.push_back({"/tmp/kiln-pkg-escape", AE_IFREG, "x", {}, {}});
  expectRefused(rawTarball(entries), "entry '/tmp/kiln-pkg-escape': absolute path");
}

TEST_F(Package, SymlinkEntryIsRefused) {
  auto entries = entriesOf(artifact_, "sm_90");
  entries.push_back({"sm_90/include/kiln/escape", AE_IFLNK, {}, "/tmp", {}});
  expectRefused(rawTarball(entries), "entry 'sm_90/include/kiln/escape' is a symlink to '/tmp'");
}

TEST_F(Package, HardlinkAndDeviceEntriesAreRefused) {
  auto entries = entriesOf(artifact_, "sm_90");
  entries.push_back({"sm_90/include/kiln/passwd", AE_IFREG, {}, {}, "/etc/passwd"});
  expectRefused(rawTarball(entries), "is a hardlink to '/etc/passwd'");
  entries.pop_back();
  entries.push_back({"sm_90/include/kiln/null", AE_IFCHR, {}, {}, {}});
  expectRefused(rawTarball(entries), "entry 'sm_90/include/kiln/null' is a character device");
  entries.pop_back();
  entries.push_back({"sm_90/include/kiln/pipe", AE_IFIFO, {}, {}, {}});
  expectRefused(rawTarball(entries), "is a fifo");
}

TEST_F(Package, DuplicateAndOutsideEntriesAreRefused) {
  auto entries = entriesOf(artifact_, "sm_90");
  entries.push_back({"sm_90/metadata.json", AE_IFREG, "{}", {}, {}});
  expectRefused(rawTarball(entries), "entry 'sm_90/metadata.json' appears more than once");
  entries.pop_back();
  entries.push_back({"sm_80/metadata.json", AE_IFREG, "{}", {}, {}});
  expectRefused(rawTarball(entries), "entry 'sm_80/metadata.json' lies outside 'sm_90/'");
}

TEST_F(Package, TopLevelDirectoryThatDisagreesWithTheTagIsRefused) {
  expectRefused(rawTarball(entriesOf(artifact_, "sm_80")),
                "tag 'sm_90' disagrees with its directory 'sm_80'");
}

TEST_F(Package, FileNameThatDisagreesWithMetadataIsRefused) {
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  const fs::path renamed = dist_ / "kiln_aarch64_sm_90_cuda12.tar.gz";
  fs::rename(packaged->tarball, renamed);
  io::writeFile(renamed.string() + ".sha256",
                packaged->sha256 + "  " + renamed.filename().string() + "\n")
      .ok();
  auto report = verifyTarball(renamed);
  ASSERT_FALSE(report);
  EXPECT_NE(report.error().find("file name says arch aarch64, metadata.json says x86_64"),
            std::string::npos)
      << report.error();
  EXPECT_NE(report.error().find("file name says cuda12, metadata.json's cuda_version is 13.0.88"),
            std::string::npos);
}

TEST_F(Package, ExtractsVerifiedTarballAndRefusesToOverwrite) {
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  auto extracted = extractTarball(packaged->tarball, dest_);
  ASSERT_TRUE(extracted) << extracted.error();
  EXPECT_EQ(*extracted, dest_ / "sm_90");
  auto report = verifyArtifactDir(*extracted);
  ASSERT_TRUE(report) << report.error();
  // No staging directory left behind.
  std::vector<fs::path> children;
  for (const auto& entry : fs::directory_iterator(dest_)) children.push_back(entry.path());
  EXPECT_EQ(children, std::vector<fs::path>{dest_ / "sm_90"});

  // The same tarball again: identical, so a no-op.
  auto again = extractTarball(packaged->tarball, dest_);
  ASSERT_TRUE(again) << again.error();

  // A different directory in the way is left alone.
  io::writeFile(dest_ / "sm_90/include/kiln/kiln_all.h", "// edited by hand\n").ok();
  auto refused = extractTarball(packaged->tarball, dest_);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("already exists and differs"), std::string::npos)
      << refused.error();
  EXPECT_NE(refused.error().find("include/kiln/kiln_all.h differs"), std::string::npos)
      << refused.error();
  EXPECT_EQ(io::readFile(dest_ / "sm_90/include/kiln/kiln_all.h").value(), "// edited by hand\n");
}

// bin/kiln-doctor is packaged executable (0755) and extracted executable; it is the only file
// that may be: an extra executable entry (a file verify would otherwise refuse as unexpected,
// or a header) is refused.
TEST_F(Package, TheDoctorIsTheOneExecutableFile) {
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  auto entries = readTarGz(io::readFile(packaged->tarball).value(), "t");
  ASSERT_TRUE(entries) << entries.error();
  for (const auto& e : *entries) {
    if (e.type != TarEntryType::kFile) continue;
    EXPECT_EQ(e.executable, e.path == "sm_90/bin/kiln-doctor") << e.path;
  }
  auto extracted = extractTarball(packaged->tarball, tmp_.path() / "extracted");
  ASSERT_TRUE(extracted) << extracted.error();
  const fs::perms perms = fs::status(*extracted / kDoctorPath).permissions();
  EXPECT_NE(perms & fs::perms::owner_exec, fs::perms::none);
  EXPECT_EQ(fs::status(*extracted / kAllHeaderPath).permissions() & fs::perms::owner_exec,
            fs::perms::none);

  auto raw = entriesOf(artifact_, "sm_90");
  for (auto& e : raw)
    if (e.path == "sm_90/include/kiln/kiln_all.h") e.perm = 0755;
  expectRefused(rawTarball(raw),
                "entry 'sm_90/include/kiln/kiln_all.h' is executable; only sm_90/bin/kiln-doctor "
                "may be");
}

TEST_F(Package, BinaryModeSidecarIsAccepted) {
  // `sha256sum -b` writes "<hash> *<name>"; the format docs/packaging.md names accepts it.
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  ASSERT_TRUE(io::writeFile(packaged->sha256_file,
                            packaged->sha256 + " *kiln_x86_64_sm_90_cuda13.tar.gz\n"));
  auto report = verifyTarball(packaged->tarball);
  ASSERT_TRUE(report) << report.error();
  auto extracted = extractTarball(packaged->tarball, dest_);
  ASSERT_TRUE(extracted) << extracted.error();
}

TEST_F(Package, RacingExtractsOfTheSameTarballBothSucceed) {
  // Two extractions into one missing target: one renames its staging directory into place, the
  // other finds it there, identical, and succeeds too (docs/packaging.md, "Extraction").
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  for (int round = 0; round < 8; ++round) {
    const fs::path root = dest_ / std::to_string(round);
    Result<fs::path> first = makeError("not run");
    Result<fs::path> second = makeError("not run");
    std::thread a([&] { first = extractTarball(packaged->tarball, root); });
    std::thread b([&] { second = extractTarball(packaged->tarball, root); });
    a.join();
    b.join();
    ASSERT_TRUE(first) << "round " << round << ": " << first.error();
    ASSERT_TRUE(second) << "round " << round << ": " << second.error();
    std::vector<fs::path> children;
    for (const auto& entry : fs::directory_iterator(root)) children.push_back(entry.path());
    EXPECT_EQ(children, std::vector<fs::path>{root / "sm_90"}) << "a staging directory was left";
    auto report = verifyArtifactDir(root / "sm_90");
    ASSERT_TRUE(report) << report.error();
  }
}

TEST_F(Package, FailedWriteLeavesNothingBehind) {
  // A destination so deep that the entries' paths pass PATH_MAX: writing fails (ENAMETOOLONG)
  // after verification. Neither the staging directory nor the arch directory it created stays.
  auto packaged = packageArtifact(artifact_, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  fs::path deep = dest_;
  while (deep.string().size() < 4040)
    deep /= std::string(std::min<size_t>(200, 4040 - deep.string().size()), 'd');
  std::error_code ec;
  fs::create_directories(deep, ec);
  ASSERT_FALSE(ec) << ec.message();
  auto extracted = extractTarball(packaged->tarball, deep / "x86_64");
  ASSERT_FALSE(extracted) << "extracted into " << deep;
  EXPECT_NE(extracted.error().find("nothing was left behind"), std::string::npos)
      << extracted.error();
  EXPECT_NE(extracted.error().find("File name too long"), std::string::npos) << extracted.error();
  EXPECT_EQ(extracted.error().find("disk full"), std::string::npos) << extracted.error();
  EXPECT_TRUE(fs::is_empty(deep)) << "left behind in " << deep;
}

TEST_F(Package, Aarch64MultiSmArtifactRoundTrips) {
  REQUIRE_TOOLS("aarch64");
  ArtifactSpec spec;
  spec.arch = "aarch64";
  spec.sms = {87, 90};
  const fs::path artifact = makeArtifact(tmp_.path() / "artifacts", spec);
  auto packaged = packageArtifact(artifact, dist_);
  ASSERT_TRUE(packaged) << packaged.error();
  EXPECT_EQ(packaged->tarball.filename(), "kiln_aarch64_sm_87_sm_90_cuda13.tar.gz");
  auto extracted = extractTarball(packaged->tarball, dest_);
  ASSERT_TRUE(extracted) << extracted.error();
  EXPECT_EQ(*extracted, dest_ / "sm_87_sm_90");
}

}  // namespace
}  // namespace kiln::core
