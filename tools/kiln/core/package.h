// `kiln package` and the safe half of consuming a tarball (issue 3, part 3; docs/packaging.md).
// Packaging refuses an artifact that does not verify, and writes the same bytes for the same
// artifact so a rebuilt release can be compared by its sha256. Extraction verifies first, writes
// into a sibling staging directory and renames it into place, so a bad tarball writes nothing and
// an interrupted extraction never leaves a half artifact where a consumer would pick it up.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/result.h"
#include "core/verify.h"

namespace kiln::core {

struct PackageResult {
  std::filesystem::path tarball;      // <dist>/kiln_<arch>_<tag>_cuda<major>.tar.gz
  std::filesystem::path sha256_file;  // <tarball>.sha256, in sha256sum format
  std::string sha256;
  std::uint64_t size = 0;
  VerifyReport report;  // of the artifact directory that was packaged
};

// Verifies `artifact_dir` (artifacts/<arch>/<tag>), then writes the tarball (entries under
// <tag>/, sorted, files 0644 and directories 0755, owner 0:0, mtime = metadata build_date) and
// its .sha256 into `dist_dir` (created if needed), each through a temporary file renamed into
// place. An existing tarball of the same name is replaced.
Result<PackageResult> packageArtifact(const std::filesystem::path& artifact_dir,
                                      const std::filesystem::path& dist_dir);

// Verifies `tarball` (checksum, entries, contents) and extracts it to <dest_root>/<tag>, returning
// that path. `dest_root` is the directory the tag directory goes in, e.g. artifacts/x86_64. When
// <dest_root>/<tag> already exists it is left alone: identical contents succeed without writing,
// anything else is an error that says so. Nothing is written when verification fails.
Result<std::filesystem::path> extractTarball(const std::filesystem::path& tarball,
                                             const std::filesystem::path& dest_root);

// extractTarball into the artifacts tree `artifacts_root`: the artifact lands in
// <artifacts_root>/<arch>/<tag>, the arch taken from the tarball's file name (a name that does not
// follow kiln_<arch>_<tag>_cuda<major>.tar.gz is a usage error). What `kiln extract` and
// tools/kiln-verify --extract run.
Result<std::filesystem::path> extractInto(const std::filesystem::path& tarball,
                                          const std::filesystem::path& artifacts_root);

}  // namespace kiln::core
