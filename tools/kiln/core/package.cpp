// Packaging and extraction over verify's in-memory view of an artifact: what is written is
// exactly what was verified, with no second read of the files in between.
#include "core/package.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "core/tarball.h"
#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

// metadata build_date ("2025-01-31T12:00:00Z") as seconds since the epoch: a timestamp that is
// a property of the artifact, so packaging it twice gives the same bytes. 0 when unparsable.
std::int64_t buildEpoch(const std::string& build_date) {
  std::tm tm{};
  if (::strptime(build_date.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) == nullptr) return 0;
  return static_cast<std::int64_t>(::timegm(&tm));
}

// The first difference between an existing directory and the tarball's contents, or "".
std::string firstDifference(const ArtifactTree& existing, const ArtifactTree& wanted) {
  for (const auto& [path, bytes] : wanted.files) {
    const auto it = existing.files.find(path);
    if (it == existing.files.end()) return fmt::format("{} is missing", path);
    if (it->second != bytes) return fmt::format("{} differs", path);
  }
  for (const auto& [path, bytes] : existing.files) {
    if (!wanted.files.count(path)) return fmt::format("{} is not in the tarball", path);
  }
  return {};
}

Result<void> writeTree(const ArtifactTree& tree, const fs::path& root) {
  std::error_code ec;
  // The staging directory is new and ours alone: create_directory fails if it exists.
  if (!fs::create_directory(root, ec) || ec) {
    return makeError(fmt::format("cannot create {}: {}", root.string(),
                                 ec ? ec.message() : "it already exists"));
  }
  for (const std::string& dir : tree.dirs) {
    fs::create_directories(root / dir, ec);
    if (ec)
      return makeError(fmt::format("cannot create {}: {}", (root / dir).string(), ec.message()));
  }
  for (const auto& [path, bytes] : tree.files) {
    const fs::path target = root / path;
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      return makeError(
          fmt::format("cannot create {}: {}", target.parent_path().string(), ec.message()));
    errno = 0;
    std::ofstream out(target, std::ios::binary | std::ios::trunc);
    if (!out) {
      return makeError(fmt::format("{}: cannot create: {}", target.string(),
                                   errno ? std::strerror(errno) : "unknown error"));
    }
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      return makeError(fmt::format("{}: write failed: {}", target.string(),
                                   errno ? std::strerror(errno) : "unknown error"));
    }
    if (path == kDoctorPath) {
      fs::permissions(target,
                      fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                          fs::perms::others_read | fs::perms::others_exec,
                      ec);
      if (ec)
        return makeError(
            fmt::format("{}: cannot make it executable: {}", target.string(), ec.message()));
    }
  }
  return {};
}

// The ancestors of `dir` (itself included) that do not exist yet, deepest first: what an
// extraction creates and must remove again when it fails.
std::vector<fs::path> missingAncestors(const fs::path& dir) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = dir; !p.empty() && !fs::exists(fs::symlink_status(p, ec));
       p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  return missing;
}

// Removes the directories an extraction created, if still empty (another process may have put
// something there meanwhile: then they stay).
void removeCreated(const std::vector<fs::path>& created) {
  std::error_code ec;
  for (const fs::path& dir : created) fs::remove(dir, ec);  // fails, harmlessly, when not empty
}

// Compares an existing <dest_root>/<tag> with the verified contents: success when identical.
Result<fs::path> existingTarget(const fs::path& dest, const fs::path& tarball,
                                const ArtifactTree& wanted) {
  auto existing = readArtifactTree(dest);
  const std::string difference = existing ? firstDifference(*existing, wanted) : existing.error();
  if (difference.empty()) return dest;  // already extracted, byte for byte
  return makeError(
      fmt::format("{} already exists and differs from {} ({}); not overwriting it: remove it or "
                  "extract somewhere else",
                  dest.string(), tarball.filename().string(), difference),
      ErrorKind::kUsage);
}

}  // namespace

Result<PackageResult> packageArtifact(const fs::path& artifact_dir, const fs::path& dist_dir) {
  auto verified = loadVerifiedDir(artifact_dir);
  if (!verified) {
    return makeError(
        fmt::format("refusing to package {}:\n{}", artifact_dir.string(), verified.error()));
  }
  const VerifyReport& report = verified->report;
  const std::string tag = report.tag;

  // Sorted, so the order does not depend on the directory listing; a parent sorts before its
  // children because '/' is the only separator and a prefix sorts first.
  std::vector<TarEntry> entries;
  entries.push_back({tag, TarEntryType::kDirectory, "directory", {}, {}, false});
  for (const std::string& dir : verified->tree.dirs) {
    entries.push_back({tag + "/" + dir, TarEntryType::kDirectory, "directory", {}, {}, false});
  }
  for (const auto& [path, bytes] : verified->tree.files) {
    // bin/kiln-doctor is the one executable file (0755); verify refuses an execute bit elsewhere.
    entries.push_back(
        {tag + "/" + path, TarEntryType::kFile, "regular file", {}, bytes, path == kDoctorPath});
  }
  std::sort(entries.begin(), entries.end(),
            [](const TarEntry& a, const TarEntry& b) { return a.path < b.path; });

  auto bytes = writeTarGz(entries, buildEpoch(verified->metadata.build_date));
  if (!bytes) return bytes.failure();

  const std::string name = tarballFileName(report.arch, tag, report.cuda_major);
  // The bytes about to be published go through the reader too, so a writer bug cannot ship.
  auto round_trip = verifyTarballBytes(*bytes, name);
  if (!round_trip) {
    return makeError(fmt::format("the tarball written for {} does not verify (a kiln bug):\n{}",
                                 artifact_dir.string(), round_trip.error()));
  }

  PackageResult result;
  result.tarball = dist_dir / name;
  result.sha256_file = dist_dir / (name + ".sha256");
  result.sha256 = io::sha256Hex(*bytes);
  result.size = bytes->size();
  result.report = report;
  if (auto written = io::writeFile(result.tarball, *bytes); !written) return written.failure();
  if (auto written =
          io::writeFile(result.sha256_file, fmt::format("{}  {}\n", result.sha256, name));
      !written) {
    return written.failure();
  }
  return result;
}

Result<fs::path> extractTarball(const fs::path& tarball, const fs::path& dest_root) {
  auto verified = loadVerifiedTarball(tarball);
  if (!verified) {
    return makeError(fmt::format("refusing to extract {}; nothing was written:\n{}",
                                 tarball.string(), verified.error()));
  }
  const std::string tag = verified->report.tag;
  const fs::path dest = dest_root / tag;
  std::error_code ec;
  if (fs::exists(fs::symlink_status(dest, ec)))
    return existingTarget(dest, tarball, verified->tree);
  // A staging name of its own per extraction, also for two in one process (threads).
  static std::atomic<unsigned> counter{0};
  const fs::path staging =
      dest_root / fmt::format(".{}.extract-{}-{}", tag, ::getpid(), counter.fetch_add(1));
  const std::vector<fs::path> created = missingAncestors(dest_root);
  fs::create_directories(dest_root, ec);
  if (ec) {
    removeCreated(created);
    return makeError(fmt::format("cannot create {}: {}", dest_root.string(), ec.message()));
  }
  auto fail = [&](Error error) {
    std::error_code ignored;
    fs::remove_all(staging, ignored);
    removeCreated(created);
    return error;
  };
  if (auto written = writeTree(verified->tree, staging); !written) {
    return fail(makeError(fmt::format("extracting {} failed; nothing was left behind: {}",
                                      tarball.string(), written.error())));
  }
  fs::rename(staging, dest, ec);
  if (ec) {
    // Another extraction (or a build) got there first. rename(2) never replaces a non-empty
    // directory, so nothing was mixed; identical contents are success (docs/packaging.md).
    std::error_code exists_ec;
    if (fs::exists(fs::symlink_status(dest, exists_ec))) {
      std::error_code ignored;
      fs::remove_all(staging, ignored);
      return existingTarget(dest, tarball, verified->tree);
    }
    return fail(makeError(
        fmt::format("cannot rename {} to {}: {}", staging.string(), dest.string(), ec.message())));
  }
  return dest;
}

Result<fs::path> extractInto(const fs::path& tarball, const fs::path& artifacts_root) {
  auto name = parseTarballFileName(tarball.filename().string());
  if (!name) return makeError(name.error(), ErrorKind::kUsage);
  return extractTarball(tarball, artifacts_root / name->arch);
}

}  // namespace kiln::core
