// The artifact's metadata.json (docs/artifact-format.md, schema_version 1) as plain structs, with
// the JSON mapping, the fingerprints and the merge rule. The builder fills this model for a
// fresh build, loads it from an old artifact to merge, and the generators read only this model,
// so a merged-in old variant and a freshly compiled one go through the same code.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/naming.h"
#include "core/ptxas.h"
#include "core/registry.h"
#include "core/result.h"

namespace kiln::core {

inline constexpr int kSchemaVersion = 1;

inline constexpr char kFormatCubin[] = "cubin";
inline constexpr char kFormatPtx[] = "ptx";

struct ImageRecord {
  int sm = 0;
  std::string target;  // "sm_90" | "sm_90a" | "compute_80"
  std::string format =
      kFormatCubin;    // "cubin" | "ptx"; absent in metadata written before PTX: "cubin"
  std::string symbol;  // kiln_<name>__arch<NN>_image
  std::string
      cubin;  // the image file: cubins/<name>.sm_<NN>.cubin | cubins/<name>.compute_<NN>.ptx
  std::string sha256;  // of the file's bytes (for PTX: the text, without the NUL the shim appends)
  std::uint64_t size = 0;  // likewise
  double compile_seconds = 0;
  std::vector<std::string> command;
  std::map<std::string, KernelResources> kernels;  // from ptxas; empty for PTX (no ptxas ran)

  bool archSpecific() const { return !target.empty() && target.back() == 'a'; }
  bool isPtx() const { return format == kFormatPtx; }
};

struct VariantRecord {
  std::string name;
  std::string group;
  std::string kind;  // "cuda" | "cute_dsl"
  std::vector<std::string> entries;
  std::vector<Constant> constants;            // kiln.toml order
  std::map<std::string, std::string> inputs;  // repo-relative path -> sha256
  std::string fingerprint;
  std::map<int, ImageRecord> images;  // by SM
};

struct GroupRecord {
  std::string kind;
  std::vector<int> supported_sms;
  std::vector<std::string> variants;  // sorted
};

// The fields that must agree for two builds to share one artifact directory.
struct Provenance {
  std::string kiln_version;
  std::string arch;
  std::string host_target;
  std::string tag;
  std::vector<GpuArch> gpu_archs;            // sm_NN and compute_NN entries, ascending by SM
  std::vector<std::string> compile_targets;  // sorted, unique
  std::string cuda_version;  // the toolkit that made the images: nvcc's, or the split ptxas'
  // The split CUDA 12 toolchain's front end (core/toolchain.h): the nvcc that wrote the PTX the
  // cuda_version ptxas assembled; absent (and in no fingerprint) when nvcc made the images.
  std::optional<std::string> cuda_frontend_version;
  std::string host_compiler_command;
  std::string host_compiler_version;
  std::optional<std::string> cutlass_version;
  // The CuTe DSL that compiled the cute_dsl variants: nvidia-cutlass-dsl's version ("4.8.1") and
  // the CUDA flavour of its libraries ("cu13", "cu12"); both absent, and in no fingerprint, in an
  // artifact without DSL variants (and in metadata written before the fields existed).
  std::optional<std::string> cute_dsl_version;
  std::optional<std::string> cute_dsl_cuda;
};

struct LibraryRecord {
  std::string path = "lib/libkiln.a";
  std::string sha256;
  std::uint64_t size = 0;
};

// bin/kiln-doctor (runtime/doctor/kiln_doctor.cpp linked with lib/libkiln.a). An empty path in
// metadata written before the doctor existed, which verify refuses.
struct DoctorRecord {
  std::string path;  // "bin/kiln-doctor"
  std::string sha256;
  std::uint64_t size = 0;
};

struct ArtifactMetadata {
  int schema_version = kSchemaVersion;
  Provenance provenance;
  std::string build_date;
  LibraryRecord library;
  DoctorRecord doctor;
  // Every file under include/, by its path in the artifact ("include/kiln/runtime.h") -> sha256,
  // so verify covers the headers a consumer compiles against as it covers the library. Empty in
  // metadata written before the field existed, which verify refuses.
  std::map<std::string, std::string> headers;
  std::string fingerprint;
  // Path as in a kiln checkout ("runtime/src/loader.cpp") -> sha256 of every runtime and runner
  // source compiled into the library; empty in metadata written before the field existed.
  std::map<std::string, std::string> runtime_inputs;
  std::map<std::string, GroupRecord> groups;
  std::map<std::string, VariantRecord> variants;
};

// Bounds on a metadata.json read from outside (docs/packaging.md, "Threats and limits"). Real
// metadata nests 6 levels deep and weighs kilobytes to a few megabytes.
inline constexpr int kMaxJsonDepth = 64;
inline constexpr std::uint64_t kMaxMetadataBytes = std::uint64_t{64} << 20;  // 64 MiB

std::string toJson(const ArtifactMetadata& metadata);
// Rejects other schema versions and missing fields, naming the field. A document nested deeper
// than kMaxJsonDepth is refused by a streaming (non-recursive) pass before any tree is built, so
// no recursive copy or destructor ever sees it; so is one larger than kMaxMetadataBytes.
Result<ArtifactMetadata> parseMetadata(const std::string& json_text);

// The tag is the gpu_archs joined ("sm_87_sm_90", "compute_80"), and gpu_archs are ascending
// and unique by SM. The
// builder writes them so; this rejects metadata (an old artifact to merge into) that disagrees.
// parseMetadata does not apply it, so `kiln verify` can report the disagreement in its own words.
Result<void> checkTag(const Provenance& provenance);

// A single-SM build may merge into `old` only if every provenance field matches; else the error
// names the field and both values and says to re-run with --clean. compile_targets may differ
// (the merged artifact records their union); the cutlass version and the CuTe DSL's (version and
// CUDA flavour together) may be absent on one side.
Result<void> checkMergeable(const Provenance& old_provenance, const Provenance& now);

// The CuTe DSL of an artifact as kiln inspect and the merge rule say it: "4.8.1 (cu13)", "-" when
// it has none.
std::string cuteDslProvenance(const Provenance& provenance);

// A constant's value as it appears in a header or a table: 4096, true, "bf16".
std::string constantLiteral(const Constant& constant);

// UTC now, ISO 8601: "2025-01-31T12:00:00Z".
std::string utcNow();

}  // namespace kiln::core
