// Publish: every write the builder makes to the artifact's directory, through io::FileSystem
// (docs/artifact-format.md, docs/cli.md, "Merge, clean and staging"). A build writes only into
// its own staging directory next to the artifact, `<arch>/.<tag>.staging-<pid>/`; publishing
// moves the previous artifact aside (`.<tag>.old-<pid>`), renames the staging directory into
// place, then removes the set-aside copy. So at every moment the artifact's path holds the
// previous artifact whole, the new one whole, or (between the two renames) nothing while the
// previous one is whole beside it: a build that fails or is killed at any step never leaves half
// an artifact. A failed build removes its staging directory; a killed one leaves it behind, and
// the next build for the tag removes what builds that are gone left, after putting back a
// set-aside artifact that a build killed between the two renames left without a replacement.
// The pid names the directories so that builds of other tags, or other kiln processes, never
// touch each other's.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/metadata.h"
#include "core/result.h"
#include "io/fs.h"

namespace kiln::core {

// The staging and set-aside directory names next to `artifact_dir`.
std::filesystem::path stagingDir(const std::filesystem::path& artifact_dir, int pid);
std::filesystem::path setAsideDir(const std::filesystem::path& artifact_dir, int pid);

// The staging directory's scratch folders: the generated sources and the objects of the library.
// They are removed before the staging directory is published.
inline constexpr char kSourceScratch[] = ".src";
inline constexpr char kObjectScratch[] = ".obj";

// One file of the artifact as data: its path relative to the artifact directory, and its bytes.
struct ArtifactFile {
  std::string path;
  std::string bytes;
};

// The build that publishes: its pid names its directories, and `running` says whether the build
// of another pid still runs (its directories are then left alone).
struct BuildProcess {
  int pid = 0;
  std::function<bool(long pid)> running;
};
// This process, and kill(pid, 0) to ask about the others.
BuildProcess thisProcess();

// When nothing is at `artifact_dir` and a build that is gone left the previous artifact set
// aside (killed between the two renames of publish()), renames it back into place. Run before
// the existing artifact is read, so that the build merges into it or replaces it as usual.
Result<void> restoreSetAside(io::FileSystem& files, const std::filesystem::path& artifact_dir,
                             const BuildProcess& process);

// This build's staging directory, removed when the object goes unless publish() succeeded.
class StagedArtifact {
 public:
  StagedArtifact(io::FileSystem& files, std::filesystem::path artifact_dir, BuildProcess process);
  ~StagedArtifact();
  StagedArtifact(const StagedArtifact&) = delete;
  StagedArtifact& operator=(const StagedArtifact&) = delete;

  const std::filesystem::path& dir() const { return dir_; }

  // Removes what builds that are gone left next to the artifact, then creates the staging
  // directory with the folders the compilers write into (cubins/, lib/, bin/, the scratch
  // folders).
  Result<void> open();
  // Merge: copies an image of the existing artifact into the staging directory after checking
  // its sha256 against its metadata (a mismatch is a usage error: the old artifact was modified),
  // and returns its bytes.
  Result<std::string> keep(const ImageRecord& image);
  Result<void> write(const std::vector<ArtifactFile>& files);
  // Removes the scratch folders and writes metadata.json, last: the staging directory then holds
  // exactly the artifact.
  Result<void> complete(const std::string& metadata_json);
  // Sets the previous artifact aside, renames the staging directory into place and removes the
  // set-aside copy. A failed rename puts the previous artifact back and names the path.
  Result<void> publish();

 private:
  io::FileSystem& files_;
  std::filesystem::path artifact_dir_;
  BuildProcess process_;
  std::filesystem::path dir_;
  bool published_ = false;
};

}  // namespace kiln::core
