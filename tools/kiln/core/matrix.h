// The release matrix (issue 3, part 4; docs/packaging.md "Release matrix"): packaging/matrix.toml
// lists every tarball kiln ships, one [[entry]] per (arch, tag), and CI, the docs and the tests
// read that one list, so "what we ship" is never restated by hand. This file parses it, checks it
// against the kernel registry, runs it (`kiln package --matrix`: build clean, gate, package,
// verify), and computes the size report.
//
// The coverage gate exists because a tarball that silently lacks a variant is found only at a
// customer's launch ("no kernel image is available"): every variant whose kiln.toml
// supported_sms includes an SM of the entry, in every group the entry includes, must be in the
// artifact for that SM, or the entry fails naming entry, variant and SM. It is a pure function of
// the entry, the registry and the artifact's metadata, so it is unit-tested without nvcc.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/ar_archive.h"
#include "core/builder.h"
#include "core/metadata.h"
#include "core/package.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/verify.h"
#include "io/process.h"

namespace kiln::core {

struct MatrixEntry {
  std::string arch;                  // "x86_64" | "aarch64"
  std::vector<int> sms;              // ascending, unique
  std::vector<std::string> kernels;  // group names as listed; empty: ALL
  std::string description;           // optional, for people ("Jetson Orin")
  int cuda = 13;                     // the CUDA major it is built with (--cuda-version); key cuda
  int line = 0;                      // line of the [[entry]] in the matrix file

  std::string tag() const;  // "sm_87_sm_90"
  // "aarch64/sm_87", or "aarch64/sm_87/cuda12" for a CUDA major other than the default 13.
  std::string id() const;
  // Where the entry's artifact goes under the artifacts root: "" for the default CUDA major,
  // "cuda12" for another, so that two CUDA majors of one (arch, tag) never share a directory;
  // the artifact is then <root>/<this>/<arch>/<tag>.
  std::string artifactsSubdir() const;
  std::string kernelsText() const;  // "ALL" | "rmsnorm,decodeattn" (the --kernels value)
  std::string gpuArchText() const;  // "sm_87,sm_90" (the --gpu-arch value)
};

struct ReleaseMatrix {
  std::string file;                  // as displayed in errors
  std::vector<MatrixEntry> entries;  // file order
};

// Parses the matrix text. Errors read "<file>:<line>: <rule broken>" (usage errors), like
// kiln.toml's. `display` is the file name used in them.
Result<ReleaseMatrix> parseMatrix(std::string_view text, const std::string& display);
// Reads and parses `file`; a missing file is a usage error naming it.
Result<ReleaseMatrix> loadMatrix(const std::filesystem::path& file);

// The entries named in `filter` ("x86_64/sm_90,aarch64/sm_87", the ids), in matrix order; an
// empty filter keeps all. An id not in the matrix is a usage error listing the ids that are.
Result<std::vector<MatrixEntry>> selectEntries(const ReleaseMatrix& matrix,
                                               const std::string& filter);

// Checks the matrix against the registry before anything is built: every listed group exists,
// and every SM of an entry is promised (supported_sms) by some variant of the entry's groups, so
// no tarball ships an SM that holds nothing. Usage errors, "<file>:<line>: ...".
Result<void> checkMatrixAgainstRegistry(const ReleaseMatrix& matrix, const Registry& registry);

// The groups an entry includes: every registry group for ALL, else the listed ones that exist.
std::vector<const Group*> entryGroups(const MatrixEntry& entry, const Registry& registry);

// ---- the coverage gate -------------------------------------------------------------------------

struct CoverageGap {
  std::string group;
  std::string variant;  // empty when the problem is not a missing variant
  int sm = 0;
  std::string problem;  // one line, naming the entry, the variant and the SM
};

// What is wrong with `metadata` as the artifact of `entry`: its arch or tag differs from the
// entry's; a variant that the entry's groups promise for an SM of the entry (kiln.toml
// supported_sms) has no image for that SM; a group in the artifact that the entry does not
// include. Empty when the artifact covers the entry.
std::vector<CoverageGap> coverageGaps(const MatrixEntry& entry, const Registry& registry,
                                      const ArtifactMetadata& metadata);
// Fails (kFailure) with every gap, one per line, when there is any.
Result<void> checkCoverage(const MatrixEntry& entry, const Registry& registry,
                           const ArtifactMetadata& metadata);

// ---- the size report ---------------------------------------------------------------------------

struct ImageSize {
  std::string variant;
  int sm = 0;
  std::uint64_t cubin = 0;   // the cubin file
  std::uint64_t object = 0;  // its library member <variant>.sm_<NN>.o (the embedded image)
};
struct VariantSize {
  std::string variant;
  int sms = 0;
  std::uint64_t cubin = 0;    // over its SMs
  std::uint64_t library = 0;  // its image members plus its shim member <variant>.o
};
struct SmSize {
  int sm = 0;
  int variants = 0;
  std::uint64_t cubin = 0;
  std::uint64_t library = 0;  // the image members of this SM
};
struct SizeReport {
  std::vector<ImageSize> images;      // by variant, then SM
  std::vector<VariantSize> variants;  // by variant
  std::vector<SmSize> sms;            // ascending
  std::uint64_t cubin_total = 0;
  std::uint64_t library_bytes = 0;  // lib/libkiln.a
  std::uint64_t shared_bytes = 0;   // members that belong to no variant: runtime, runners, table
  std::uint64_t tarball_bytes = 0;
};

// Pure: from the metadata, the library's members (readArArchive) and the tarball's size.
SizeReport sizeReport(const ArtifactMetadata& metadata, std::uint64_t library_bytes,
                      const std::vector<ArMember>& members, std::uint64_t tarball_bytes);
// Reads <artifact_dir>/lib/libkiln.a and computes the report.
Result<SizeReport> sizeReportFor(const std::filesystem::path& artifact_dir,
                                 const ArtifactMetadata& metadata, std::uint64_t tarball_bytes);
// Three tables (per variant and SM, per variant, per SM) and a totals line.
std::string renderSizeReport(const SizeReport& report);

// ---- running the matrix ------------------------------------------------------------------------

struct MatrixOptions {
  std::filesystem::path matrix_file;  // empty: <root>/packaging/matrix.toml
  std::string entries;                // filter, see selectEntries
  std::filesystem::path dist_dir;     // empty: <root>/dist
  bool no_build = false;              // gate and package the artifacts already in the output dir
  // root, runtime_dir, output_dir, jobs and the tool overrides; gpu_arch, arch, kernels and clean
  // are set per entry.
  BuildOptions build;
};

struct EntryOutcome {
  MatrixEntry entry;
  bool ok = false;
  Error error;  // when !ok: the build, gate, package or verify failure
  std::filesystem::path artifact_dir;
  PackageResult package;
  VerifyReport tarball_report;
  SizeReport sizes;
};

// Progress of a matrix run: the builder's (BuildSink) plus an event per entry.
class MatrixSink : public BuildSink {
 public:
  virtual void entryStarted(const MatrixEntry& /*entry*/, int /*index*/, int /*total*/) {}
  virtual void entryFinished(const EntryOutcome& /*outcome*/) {}
};

// For each selected entry in order: build it clean into <output_dir>/<arch>/<tag> exactly as
// `kiln build --clean` would (skipped with no_build), apply the coverage gate to its metadata,
// package it into dist, verify the tarball, and compute its sizes. An entry's failure is recorded
// in its outcome and the next entry still runs; the Result fails only for a matrix, filter or
// registry problem found before anything is built.
Result<std::vector<EntryOutcome>> runMatrix(const MatrixOptions& options, io::ProcessRunner& runner,
                                            MatrixSink& sink);

// One line per entry (entry, variants, cubins, library, tarball, result), for the end of a run.
std::string matrixSummaryTable(const std::vector<EntryOutcome>& outcomes);

}  // namespace kiln::core
