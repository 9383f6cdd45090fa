// `kiln verify`: checks that an artifact directory or a packaged tarball is what its
// metadata.json says, before anyone links or extracts it (issue 3, part 3; docs/packaging.md
// lists every rule). It exists because the reference system's users were hurt by unchecked
// tarball checksums and stale or mixed-up artifacts: every failure here names the file and what
// was expected, and all failures of one artifact are reported together.
//
// A tarball is read wholly in memory: its checksum first, then every entry header (paths, types)
// before any content check, and nothing is ever written. package.h reuses the loaded contents to
// write exactly the bytes that were verified.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/metadata.h"
#include "core/result.h"

namespace kiln::core {

struct VerifyReport {
  std::string source;        // the directory or tarball checked, as given
  std::string arch;          // "x86_64"
  std::string tag;           // "sm_87_sm_90"
  std::vector<int> sms;      // {87, 90}: the SM of each gpu_archs entry (sm_NN or compute_NN)
  std::string cuda_version;  // "13.0.88"
  int cuda_major = 0;        // 13
  std::string fingerprint;   // metadata.json's, which kiln_import_artifacts compares
  std::string build_date;    // "2025-01-31T12:00:00Z"
  int variants = 0;
  int cubins = 0;
  int ptx_images = 0;
  int library_members = 0;
  std::string tarball_sha256;  // tarballs only
};

// "x86_64 sm_90 (CUDA 13.0.88): 3 variants, 3 cubins, 12 library objects verified"
std::string summarize(const VerifyReport& report);

// Every rule of docs/packaging.md ("What verify checks") on an artifact directory
// artifacts/<arch>/<tag>/. The error lists every problem, one per line.
Result<VerifyReport> verifyArtifactDir(const std::filesystem::path& dir);

// The same rules on dist/kiln_<arch>_<tag>_cuda<major>.tar.gz, after its .sha256 sidecar and its
// entry headers; reads the tarball in memory and writes nothing.
Result<VerifyReport> verifyTarball(const std::filesystem::path& tarball);

// verifyTarball for a path ending in .tar.gz that is a file, else verifyArtifactDir for a
// directory; anything else is a usage error. What `kiln verify` and tools/kiln-verify run.
Result<VerifyReport> verifyPath(const std::filesystem::path& target);

// The line both print on success: "ok: <target>: <summary>, fingerprint <hex>, built <date>"
// and, for a tarball, ", sha256 <hex>". kiln_import_artifacts reads the fingerprint from it.
std::string verifiedLine(const std::string& target, const VerifyReport& report);

// verifyTarball without the sidecar: `bytes` is the tarball and `file_name` its name, which must
// follow the kiln_<arch>_<tag>_cuda<major>.tar.gz convention. For the fuzzer and for package's
// check of the bytes it is about to write.
Result<VerifyReport> verifyTarballBytes(std::string_view bytes, const std::string& file_name);

// ---- for package.h ---------------------------------------------------------------------------

// An artifact's files, relative to its tag directory ("cubins/x.sm_90.cubin" -> bytes), and its
// directories ("cubins", "include/kiln").
struct ArtifactTree {
  std::map<std::string, std::string> files;
  std::set<std::string> dirs;
};

struct VerifiedArtifact {
  VerifyReport report;
  ArtifactMetadata metadata;
  ArtifactTree tree;
};

// The most a .sha256 sidecar may hold: one line of hash and file name, with room to spare.
inline constexpr std::uint64_t kMaxSidecarBytes = 64 * 1024;

Result<VerifiedArtifact> loadVerifiedDir(const std::filesystem::path& dir);
Result<VerifiedArtifact> loadVerifiedTarball(const std::filesystem::path& tarball);
Result<VerifiedArtifact> loadVerifiedTarballBytes(std::string_view bytes,
                                                  const std::string& file_name);

// Reads a directory tree; fails on a symlink, device, fifo or socket anywhere inside, naming it,
// and on more files or bytes than a tarball may hold (TarLimits).
Result<ArtifactTree> readArtifactTree(const std::filesystem::path& dir);

// The parts of kiln_<arch>_<tag>_cuda<major>.tar.gz.
struct TarballName {
  std::string arch;
  std::string tag;
  int cuda_major = 0;
};
std::string tarballFileName(const std::string& arch, const std::string& tag, int cuda_major);
// Fails, saying the expected form, when `file_name` does not follow the convention.
Result<TarballName> parseTarballFileName(const std::string& file_name);
// 13 from "13.0.88"; fails naming the value.
Result<int> cudaMajor(const std::string& cuda_version);

}  // namespace kiln::core
