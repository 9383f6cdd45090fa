// Hostile inputs (issue 32): crafted files that once crashed, hung or exhausted memory in
// `kiln verify`, `extract`, `inspect` and `doctor`, each now refused with one line naming the
// value and the limit (docs/packaging.md, "Threats and limits"), with nothing written. None of
// these needs nvcc: every input is refused before a cubin or library would be looked at.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>

#include <string>
#include <vector>

#include "artifact_fixture.h"
#include "core/metadata.h"
#include "core/package.h"
#include "core/report.h"
#include "core/tarball.h"
#include "core/verify.h"
#include "io/fs.h"

namespace kiln::core {
namespace {

using kiln::testing::RawEntry;
using kiln::testing::ScratchDir;
using kiln::testing::writeRawTarball;
namespace fs = std::filesystem;

constexpr const char* kName = "kiln_x86_64_sm_90_cuda13.tar.gz";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `bytes` gzip-compressed as they are (libarchive's raw format), so a test can hand-craft a tar
// header that no tar writer would produce.
std::string gzipRaw(const std::string& bytes) {
  std::string out;
  archive* a = archive_write_new();
  archive_write_set_format_raw(a);
  archive_write_add_filter_gzip(a);
  archive_write_set_bytes_in_last_block(a, 1);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* client, const void* buffer, size_t length) -> la_ssize_t {
        static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
        return static_cast<la_ssize_t>(length);
      },
      nullptr);
  archive_entry* entry = archive_entry_new();
  archive_entry_set_filetype(entry, AE_IFREG);
  archive_entry_set_pathname(entry, "raw");
  archive_write_header(a, entry);
  archive_write_data(a, bytes.data(), bytes.size());
  archive_entry_free(entry);
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

// A ustar header for a regular file `path` that declares `size` bytes (octal, 11 digits).
std::string ustarHeader(const std::string& path, unsigned long long size, char type = '0') {
  std::string h(512, '\0');
  h.replace(0, path.size(), path);
  h.replace(100, 7, "0000644");
  h.replace(108, 7, "0000000");
  h.replace(116, 7, "0000000");
  char octal[16];
  std::snprintf(octal, sizeof octal, "%011llo", size);
  h.replace(124, 11, octal);
  h.replace(136, 11, "00000000000");
  h[156] = type;
  h.replace(257, 6, std::string("ustar\0", 6));
  h.replace(263, 2, "00");
  h.replace(148, 8, "        ");
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(octal, sizeof octal, "%06o", sum);
  h.replace(148, 6, octal);
  h[154] = '\0';
  h[155] = ' ';
  return h;
}

// Writes `bytes` as dist/<kName> with a correct sidecar, returning the tarball's path.
fs::path writeWithSidecar(const fs::path& dir, const std::string& bytes) {
  const fs::path path = dir / kName;
  EXPECT_TRUE(io::writeFile(path, bytes));
  EXPECT_TRUE(io::writeFile(dir / (std::string(kName) + ".sha256"),
                            io::sha256Hex(bytes) + "  " + kName + "\n"));
  return path;
}

long peakRssKb() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

// ---- metadata.json nested too deep -----------------------------------------------------------

TEST(HostileJson, DeepArraysAreRefusedWithoutRecursion) {
  // 200,000 levels: the input that crashed verify, extract and inspect with SIGSEGV.
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  auto parsed = parseMetadata(deep);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "metadata.json nests more than 64 levels deep (the limit is 64)");
}

TEST(HostileJson, DeepObjectsWithSiblingKeysAreRefused) {
  // {"a":{"a":...1,"b":1},"b":1}: the shape that overflowed the stack (and took quadratic time),
  // because an ordered_json object that grows copies its members, each a deep subtree.
  const int levels = 100'000;
  std::string deep;
  for (int i = 0; i < levels; ++i) deep += "{\"a\":";
  deep += "1";
  for (int i = 0; i < levels; ++i) deep += ",\"b\":1}";
  auto parsed = parseMetadata(deep);
  ASSERT_FALSE(parsed);
  EXPECT_EQ(parsed.error(), "metadata.json nests more than 64 levels deep (the limit is 64)");
  // Unclosed: the depth is what is reported, not the syntax error at the end.
  parsed = parseMetadata(deep.substr(0, 5 * levels));
  ASSERT_FALSE(parsed);
  EXPECT_TRUE(contains(parsed.error(), "nests more than 64 levels deep")) << parsed.error();
}

TEST(HostileJson, SixtyFourLevelsAreNotADepthError) {
  const std::string ok = "{\"x\":" + std::string(63, '[') + std::string(63, ']') + "}";
  auto parsed = parseMetadata(ok);
  ASSERT_FALSE(parsed);  // a valid document, but not metadata
  EXPECT_FALSE(contains(parsed.error(), "levels deep")) << parsed.error();
  const std::string too_deep = "{\"x\":" + std::string(64, '[') + std::string(64, ']') + "}";
  auto refused = parseMetadata(too_deep);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error(), "nests more than 64 levels deep")) << refused.error();
}

TEST(HostileJson, InspectOfADeepMetadataIsAUsageError) {
  ScratchDir tmp;
  ASSERT_TRUE(io::writeFile(tmp.path() / "metadata.json",
                            std::string(200'000, '[') + std::string(200'000, ']')));
  auto loaded = loadArtifactMetadata(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.errorKind(), ErrorKind::kUsage);
  EXPECT_TRUE(contains(loaded.error(), "nests more than 64 levels deep")) << loaded.error();
}

TEST(HostileJson, DeepMetadataInATarballIsRefusedByVerifyAndExtract) {
  ScratchDir tmp;
  const fs::path tarball = tmp.path() / kName;
  writeRawTarball(tarball, {{"sm_90", AE_IFDIR, {}, {}, {}},
                            {"sm_90/metadata.json",
                             AE_IFREG,
                             std::string(200'000, '[') + std::string(200'000, ']'),
                             {},
                             {}}});
  auto report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "nests more than 64 levels deep")) << report.error();
  auto extracted = extractTarball(tarball, tmp.path() / "artifacts" / "x86_64");
  ASSERT_FALSE(extracted);
  EXPECT_FALSE(fs::exists(tmp.path() / "artifacts"));
}

// ---- decompression bombs and other size bounds -----------------------------------------------

TEST(HostileTarball, EntryDeclaringHugeSizeIsRefusedBeforeInflating) {
  // 8 GiB declared, a few bytes present: refused from the header alone.
  const std::string bytes =
      gzipRaw(ustarHeader("sm_90/lib/libkiln.a", 8ull << 30) + std::string(4096, '\0'));
  auto entries = readTarGz(bytes, kName);
  ASSERT_FALSE(entries);
  EXPECT_EQ(entries.error(), std::string(kName) +
                                 ": entry 'sm_90/lib/libkiln.a' holds 8589934592 bytes, more "
                                 "than the limit of 536870912 bytes for one file");
}

TEST(HostileTarball, GzipBombIsRefusedInConstantMemory) {
  // The bomb: a small .tar.gz inflating to 1 GiB (four 256 MiB files of zeros), written
  // as it streams so that building it costs no memory either.
  ScratchDir tmp;
  const fs::path path = tmp.path() / kName;
  {
    archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
    archive_write_set_filter_option(a, "gzip", "compression-level", "1");
    ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
    const std::string zeros(1 << 20, '\0');
    for (int f = 0; f < 4; ++f) {
      archive_entry* entry = archive_entry_new();
      archive_entry_set_pathname(entry, ("sm_90/cubins/bomb" + std::to_string(f)).c_str());
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_perm(entry, 0644);
      archive_entry_set_size(entry, la_int64_t{256} << 20);
      archive_write_header(a, entry);
      for (int mib = 0; mib < 256; ++mib) archive_write_data(a, zeros.data(), zeros.size());
      archive_entry_free(entry);
    }
    archive_write_close(a);
    archive_write_free(a);
  }
  const std::string bytes = io::readFile(path).value();
  ASSERT_LT(bytes.size(), 8u << 20);
  ASSERT_TRUE(io::writeFile(tmp.path() / (std::string(kName) + ".sha256"),
                            io::sha256Hex(bytes) + "  " + kName + "\n"));

  const long before = peakRssKb();
  auto report = verifyTarball(path);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "a compression ratio over the limit of 100:1"))
      << report.error();
  auto extracted = extractTarball(path, tmp.path() / "artifacts" / "x86_64");
  ASSERT_FALSE(extracted);
  EXPECT_TRUE(contains(extracted.error(), "nothing was written")) << extracted.error();
  EXPECT_FALSE(fs::exists(tmp.path() / "artifacts"));
  // The bound costs a small constant, not the inflated size (the bomb once peaked at 2.1 GB).
  EXPECT_LT(peakRssKb() - before, 64 * 1024) << "KiB of peak RSS grew by verifying a bomb";
}

TEST(HostileTarball, TotalEntryCountPathAndRatioLimitsNameTheirLimit) {
  std::vector<RawEntry> entries = {{"sm_90", AE_IFDIR, {}, {}, {}}};
  for (int i = 0; i < 4; ++i)
    entries.push_back({"sm_90/f" + std::to_string(i), AE_IFREG, std::string(1000, 'x'), {}, {}});
  ScratchDir tmp;
  writeRawTarball(tmp.path() / kName, entries);
  const std::string bytes = io::readFile(tmp.path() / kName).value();

  TarLimits total;
  total.max_total_bytes = 2500;
  auto refused = readTarGz(bytes, kName, total);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), std::string(kName) +
                                 ": holds more than 2500 bytes of file data (the limit; at entry "
                                 "'sm_90/f2')");

  TarLimits count;
  count.max_entries = 3;
  refused = readTarGz(bytes, kName, count);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), std::string(kName) + ": holds more than 3 entries (the limit)");

  TarLimits path;
  path.max_path = 4;
  refused = readTarGz(bytes, kName, path);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error(), std::string(kName) + ": entry 0 has a "))
      << refused.error();
  EXPECT_TRUE(contains(refused.error(), "-byte path (the limit is 4 bytes)")) << refused.error();

  TarLimits ratio;
  ratio.ratio_floor = 1024;
  ratio.max_ratio = 2;  // 4 KB of 'x' compresses far better than 2:1
  refused = readTarGz(bytes, kName, ratio);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error(), "a compression ratio over the limit of 2:1"))
      << refused.error();

  TarLimits archive_size;
  archive_size.max_archive_bytes = 10;
  refused = readTarGz(bytes, kName, archive_size);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(contains(refused.error(), "more than the limit of 10 bytes for a tarball"))
      << refused.error();

  auto read = readTarGz(bytes, kName);  // the defaults let a normal tarball through
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->size(), 5u);
}

TEST(HostileTarball, PlainTarDeclaringHugeSizeIsRefused) {
  // A plain (uncompressed) tar whose one header declares 2 GiB: the bounds hold without gzip.
  const std::string bytes = ustarHeader("sm_90/x", 2ull << 30) + std::string(1024, '\0');
  auto entries = readTarGz(bytes, kName);
  ASSERT_FALSE(entries);
  EXPECT_TRUE(contains(entries.error(), "more than the limit of 536870912 bytes for one file"))
      << entries.error();
}

// ---- file types: FIFOs, devices, links ------------------------------------------------------

TEST(HostileFiles, ReadRegularFileRefusesWhatIsNotARegularFile) {
  ScratchDir tmp;
  const fs::path fifo = tmp.path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto read = io::readRegularFile(fifo, 100);  // must not hang on open
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), fifo.string() + ": is a fifo; expected a regular file");

  const fs::path zero = tmp.path() / "zero";
  fs::create_symlink("/dev/zero", zero);
  read = io::readRegularFile(zero, 100, io::Links::kFollow);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), zero.string() + ": is a character device; expected a regular file");
  read = io::readRegularFile(zero, 100, io::Links::kRefuse);
  ASSERT_FALSE(read);
  EXPECT_TRUE(contains(read.error(), "is a symlink; expected a regular file")) << read.error();

  read = io::readRegularFile(tmp.path(), 100);
  ASSERT_FALSE(read);
  EXPECT_TRUE(contains(read.error(), "is a directory; expected a regular file")) << read.error();

  ASSERT_TRUE(io::writeFile(tmp.path() / "big", std::string(101, 'x')));
  read = io::readRegularFile(tmp.path() / "big", 100);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(),
            (tmp.path() / "big").string() + ": 101 bytes, more than the limit of 100 bytes");
  read = io::readRegularFile(tmp.path() / "big", 101);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->size(), 101u);

  const fs::path link = tmp.path() / "link";
  fs::create_symlink(tmp.path() / "big", link);
  read = io::readRegularFile(link, 1000, io::Links::kFollow);
  ASSERT_TRUE(read) << read.error();
}

TEST(HostileFiles, SidecarThatIsADeviceOrFifoIsRefused) {
  ScratchDir tmp;
  const fs::path tarball = writeWithSidecar(tmp.path(), gzipRaw(std::string(1024, '\0')));
  const fs::path sidecar = tmp.path() / (std::string(kName) + ".sha256");
  fs::remove(sidecar);
  fs::create_symlink("/dev/zero", sidecar);
  auto report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error(), sidecar.string() + ": is a character device; expected a regular file");

  fs::remove(sidecar);
  ASSERT_EQ(::mkfifo(sidecar.c_str(), 0644), 0);
  report = verifyTarball(tarball);  // must not hang
  ASSERT_FALSE(report);
  EXPECT_EQ(report.error(), sidecar.string() + ": is a fifo; expected a regular file");
  auto extracted = extractTarball(tarball, tmp.path() / "out");
  ASSERT_FALSE(extracted);
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));

  fs::remove(sidecar);
  ASSERT_TRUE(io::writeFile(sidecar, std::string(100'000, 'a')));
  report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "more than the limit of 65536 bytes")) << report.error();
}

TEST(HostileFiles, TarballThatIsAFifoOrDeviceIsRefusedByVerifyAndExtract) {
  ScratchDir tmp;
  const fs::path fifo = tmp.path() / kName;
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  auto extracted = extractTarball(fifo, tmp.path() / "out");  // must not hang
  ASSERT_FALSE(extracted);
  EXPECT_TRUE(contains(extracted.error(), "is a fifo; expected a regular file"))
      << extracted.error();
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));
  fs::remove(fifo);
  fs::create_symlink("/dev/zero", fifo);
  auto report = verifyTarball(fifo);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "is a character device; expected a regular file"))
      << report.error();
  extracted = extractTarball(fifo, tmp.path() / "out");
  ASSERT_FALSE(extracted);
  EXPECT_FALSE(fs::exists(tmp.path() / "out"));
}

TEST(HostileFiles, MetadataThatIsADeviceLinkOrFifoIsRefusedByInspect) {
  ScratchDir tmp;
  fs::create_symlink("/dev/zero", tmp.path() / "metadata.json");
  auto loaded = loadArtifactMetadata(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_EQ(loaded.errorKind(), ErrorKind::kUsage);
  EXPECT_TRUE(contains(loaded.error(), "is a symlink; expected a regular file")) << loaded.error();
  fs::remove(tmp.path() / "metadata.json");
  ASSERT_EQ(::mkfifo((tmp.path() / "metadata.json").c_str(), 0644), 0);
  loaded = loadArtifactMetadata(tmp.path());
  ASSERT_FALSE(loaded);
  EXPECT_TRUE(contains(loaded.error(), "is a fifo; expected a regular file")) << loaded.error();
}

TEST(HostileFiles, ArtifactDirectoryFileSwappedForAFifoIsRefusedNotRead) {
  ScratchDir tmp;
  ASSERT_TRUE(io::writeFile(tmp.path() / "sm_90/metadata.json", "{}"));
  ASSERT_EQ(::mkfifo((tmp.path() / "sm_90/cubins.fifo").c_str(), 0644), 0);
  auto tree = readArtifactTree(tmp.path() / "sm_90");
  ASSERT_FALSE(tree);
  EXPECT_TRUE(contains(tree.error(), "special file")) << tree.error();
}

// ---- the sidecar's format ---------------------------------------------------------------------

TEST(HostileFiles, SidecarInBinaryModeFormatPassesTheChecksum) {
  // `sha256sum -b` writes "<hash> *<name>": accepted, so the check goes on to the entries.
  ScratchDir tmp;
  const std::string bytes = gzipRaw(std::string(1024, '\0'));
  const fs::path tarball = writeWithSidecar(tmp.path(), bytes);
  ASSERT_TRUE(io::writeFile(tmp.path() / (std::string(kName) + ".sha256"),
                            io::sha256Hex(bytes) + " *" + kName + "\n"));
  auto report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_FALSE(contains(report.error(), "sha256sum format")) << report.error();
  EXPECT_FALSE(contains(report.error(), "names")) << report.error();
  // A wrong hash in that form is still a checksum failure.
  ASSERT_TRUE(io::writeFile(tmp.path() / (std::string(kName) + ".sha256"),
                            std::string(64, '0') + " *" + kName + "\n"));
  report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "the tarball is corrupt or was modified")) << report.error();
  // Any other separator is not the sha256sum format.
  ASSERT_TRUE(io::writeFile(tmp.path() / (std::string(kName) + ".sha256"),
                            io::sha256Hex(bytes) + " +" + kName + "\n"));
  report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "expected the sha256sum format")) << report.error();
}

// ---- entry names ----------------------------------------------------------------------------

TEST(HostileTarball, LongNameComponentAndFileUsedAsADirectoryAreRefused) {
  ScratchDir tmp;
  const fs::path tarball = tmp.path() / kName;
  writeRawTarball(tarball, {{"sm_90", AE_IFDIR, {}, {}, {}},
                            {"sm_90/include/" + std::string(300, 'n'), AE_IFREG, "x", {}, {}}});
  auto report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(), "a 300-byte name component (the limit is 255 bytes)"))
      << report.error();

  writeRawTarball(tarball, {{"sm_90", AE_IFDIR, {}, {}, {}},
                            {"sm_90/x86_64", AE_IFREG, "x", {}, {}},
                            {"sm_90/x86_64/sub", AE_IFDIR, {}, {}, {}}});
  report = verifyTarball(tarball);
  ASSERT_FALSE(report);
  EXPECT_TRUE(contains(report.error(),
                       "entry 'sm_90/x86_64' is a file but also the parent of 'x86_64/sub'"))
      << report.error();
  auto extracted = extractTarball(tarball, tmp.path() / "artifacts" / "x86_64");
  ASSERT_FALSE(extracted);
  EXPECT_FALSE(fs::exists(tmp.path() / "artifacts")) << "extract left a directory behind";
}

}  // namespace
}  // namespace kiln::core
