// Publish (see publish.h): the staging directory's life, from the removal of what killed builds
// left to the rename into place.
#include "core/publish.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <utility>

#include <fmt/format.h>

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

// ".<tag>.<kind>-": the name of a build's `kind` directory next to `artifact_dir`, before its pid.
std::string prefix(const fs::path& artifact_dir, const char* kind) {
  return fmt::format(".{}.{}-", artifact_dir.filename().string(), kind);
}

// A staging or set-aside directory of a build that is gone.
struct Leftover {
  fs::path path;
  bool set_aside = false;
};

// Every directory next to `artifact_dir` named as a staging or set-aside directory of this tag,
// whose pid is neither this build's nor that of a build still running.
std::vector<Leftover> leftovers(io::FileSystem& files, const fs::path& artifact_dir,
                                const BuildProcess& process) {
  std::vector<Leftover> found;
  for (const std::string& name : files.list(artifact_dir.parent_path())) {
    for (const bool set_aside : {false, true}) {
      const std::string start = prefix(artifact_dir, set_aside ? "old" : "staging");
      if (name.rfind(start, 0) != 0) continue;
      const std::string digits = name.substr(start.size());
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      long pid = 0;
      if (std::from_chars(digits.data(), digits.data() + digits.size(), pid).ec != std::errc())
        continue;  // too long to be a pid
      if (pid == process.pid || process.running(pid)) continue;
      found.push_back({artifact_dir.parent_path() / name, set_aside});
    }
  }
  return found;
}

}  // namespace

fs::path stagingDir(const fs::path& artifact_dir, int pid) {
  return artifact_dir.parent_path() / (prefix(artifact_dir, "staging") + std::to_string(pid));
}

fs::path setAsideDir(const fs::path& artifact_dir, int pid) {
  return artifact_dir.parent_path() / (prefix(artifact_dir, "old") + std::to_string(pid));
}

BuildProcess thisProcess() {
  // EPERM: the process exists but belongs to another user.
  return {static_cast<int>(::getpid()),
          [](long pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH; }};
}

Result<void> restoreSetAside(io::FileSystem& files, const fs::path& artifact_dir,
                             const BuildProcess& process) {
  if (files.exists(artifact_dir)) return {};
  for (const Leftover& leftover : leftovers(files, artifact_dir, process)) {
    if (!leftover.set_aside) continue;
    if (auto ec = files.rename(leftover.path, artifact_dir)) {
      return makeError(fmt::format("cannot move {} back to {}, where a killed build left it: {}",
                                   leftover.path.string(), artifact_dir.string(), ec.message()));
    }
    return {};
  }
  return {};
}

StagedArtifact::StagedArtifact(io::FileSystem& files, fs::path artifact_dir, BuildProcess process)
    : files_(files), artifact_dir_(std::move(artifact_dir)), process_(std::move(process)) {}

StagedArtifact::~StagedArtifact() {
  if (!dir_.empty() && !published_) files_.removeAll(dir_);
}

Result<void> StagedArtifact::open() {
  const fs::path parent = artifact_dir_.parent_path();
  if (auto ec = files_.createDirectories(parent))
    return makeError(fmt::format("cannot create {}: {}", parent.string(), ec.message()));
  for (const Leftover& leftover : leftovers(files_, artifact_dir_, process_))
    files_.removeAll(leftover.path);
  dir_ = stagingDir(artifact_dir_, process_.pid);
  files_.removeAll(dir_);  // left by an earlier process that had this pid
  for (const char* sub : {"cubins", "lib", "bin", "include/kiln", kSourceScratch, kObjectScratch}) {
    if (auto ec = files_.createDirectories(dir_ / sub))
      return makeError(fmt::format("cannot create {}: {}", (dir_ / sub).string(), ec.message()));
  }
  return {};
}

Result<std::string> StagedArtifact::keep(const ImageRecord& image) {
  const fs::path from = artifact_dir_ / image.cubin;
  auto bytes = files_.readFile(from);
  if (!bytes) return bytes.failure();
  if (const std::string sha = io::sha256Hex(*bytes); sha != image.sha256) {
    return makeError(fmt::format("{}: sha256 {} differs from its metadata.json ({}); the old "
                                 "artifact was modified; re-run with --clean",
                                 from.string(), sha, image.sha256),
                     ErrorKind::kUsage);
  }
  if (auto copied = files_.copyFile(from, dir_ / image.cubin); !copied) return copied.failure();
  return bytes;
}

Result<void> StagedArtifact::write(const std::vector<ArtifactFile>& files) {
  for (const ArtifactFile& file : files) {
    if (auto written = files_.writeFile(dir_ / file.path, file.bytes); !written) return written;
  }
  return {};
}

Result<void> StagedArtifact::complete(const std::string& metadata_json) {
  for (const char* scratch : {kSourceScratch, kObjectScratch}) {
    if (auto ec = files_.removeAll(dir_ / scratch)) {
      return makeError(
          fmt::format("cannot remove {}: {}", (dir_ / scratch).string(), ec.message()));
    }
  }
  return files_.writeFile(dir_ / kMetadataFile, metadata_json);
}

Result<void> StagedArtifact::publish() {
  const fs::path aside = setAsideDir(artifact_dir_, process_.pid);
  const bool had_old = files_.exists(artifact_dir_);
  if (had_old) {
    if (auto ec = files_.rename(artifact_dir_, aside)) {
      return makeError(
          fmt::format("cannot move {} aside: {}", artifact_dir_.string(), ec.message()));
    }
  }
  if (auto ec = files_.rename(dir_, artifact_dir_)) {
    std::string message = fmt::format("cannot rename {} to {}: {}", dir_.string(),
                                      artifact_dir_.string(), ec.message());
    if (had_old) {
      if (auto restore = files_.rename(aside, artifact_dir_)) {
        message += fmt::format(
            "; the previous artifact is left at {} ({}), and the next build puts it back",
            aside.string(), restore.message());
      }
    }
    return makeError(std::move(message));
  }
  published_ = true;
  // Should this fail, the set-aside copy is a leftover, removed by the next build.
  if (had_old) files_.removeAll(aside);
  return {};
}

}  // namespace kiln::core
