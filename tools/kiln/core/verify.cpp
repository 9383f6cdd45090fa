// The artifact rules, applied to one in-memory view of an artifact (ArtifactTree) whichever way it
// arrived: a directory is read into a tree, a tarball's entries are checked and become one. So a
// directory and a tarball can never be held to different rules. Problems are collected, not
// returned at the first, so one run of `kiln verify` shows everything that is wrong; only the
// checks that make the rest meaningless (checksum, entry paths, unreadable metadata) stop early.
#include "core/verify.h"

#include <algorithm>
#include <cctype>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/ar_archive.h"
#include "core/cubin.h"
#include "core/elf.h"
#include "core/naming.h"
#include "core/ptx.h"
#include "core/tarball.h"
#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

using Problems = std::vector<std::string>;

Error problemsError(const std::string& source, const Problems& problems) {
  return makeError(fmt::format("{}: verification failed ({} problem{}):\n  {}", source,
                               problems.size(), problems.size() == 1 ? "" : "s",
                               fmt::join(problems, "\n  ")));
}

int expectedMachine(const std::string& arch) {
  if (arch == "x86_64") return kElfMachineX86_64;
  if (arch == "aarch64") return kElfMachineAarch64;
  return 0;
}

const char* machineName(int machine) {
  switch (machine) {
    case kElfMachineX86_64:
      return "x86_64";
    case kElfMachineAarch64:
      return "aarch64";
    case kElfMachineCuda:
      return "CUDA";
    default:
      return "other";
  }
}

bool startsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The gpu_archs as the tag spells them: {87, 90} -> "sm_87_sm_90"; {compute_80} -> "compute_80".
std::string joinTag(const std::vector<GpuArch>& archs) {
  std::vector<std::string> names;
  for (const GpuArch& arch : archs) names.push_back(gpuArchName(arch));
  return fmt::format("{}", fmt::join(names, "_"));
}

// Checks the images (cubins and PTX) of every variant against metadata.json, and that no other
// file is present under cubins/.
void checkCubins(const ArtifactMetadata& m, const ArtifactTree& tree, const std::string& at,
                 Problems& problems, VerifyReport& report) {
  std::set<std::string> listed;
  for (const auto& [name, v] : m.variants) {
    if (v.images.empty())
      problems.push_back(fmt::format("{}metadata.json: variant {} lists no SM", at, name));
    for (const auto& [sm, image] : v.images) {
      const bool ptx = image.isPtx();
      const std::string expected_path = imagePath(name, sm, ptx);
      listed.insert(image.cubin);
      const auto& archs = m.provenance.gpu_archs;
      const int image_sm =
          sm;  // clang before 16 cannot capture a structured binding (the fuzz build)
      const auto arch = std::find_if(archs.begin(), archs.end(),
                                     [&](const GpuArch& a) { return a.sm == image_sm; });
      if (arch == archs.end()) {
        problems.push_back(
            fmt::format("{}metadata.json: variant {} has an image for sm_{}, which is not in "
                        "gpu_archs ({})",
                        at, name, sm, m.provenance.tag));
      } else if (arch->ptx != ptx) {
        problems.push_back(
            fmt::format("{}metadata.json: variant {} SM {} has a {} image, but gpu_archs lists {}",
                        at, name, sm, image.format, gpuArchName(*arch)));
      }
      if (ptx && image.target != ptxTarget(sm)) {
        problems.push_back(
            fmt::format("{}metadata.json: variant {} SM {} is PTX with target '{}', expected '{}'",
                        at, name, sm, image.target, ptxTarget(sm)));
      }
      if (image.cubin != expected_path) {
        problems.push_back(
            fmt::format("{}metadata.json: variant {} sm_{} records cubin '{}', expected '{}'", at,
                        name, sm, image.cubin, expected_path));
      }
      if (image.symbol != imageSymbol(name, sm)) {
        problems.push_back(
            fmt::format("{}metadata.json: variant {} sm_{} records symbol '{}', expected '{}'", at,
                        name, sm, image.symbol, imageSymbol(name, sm)));
      }
      const auto file = tree.files.find(image.cubin);
      if (file == tree.files.end()) {
        problems.push_back(fmt::format("{}{}: missing (variant {} sm_{} in metadata.json)", at,
                                       image.cubin, name, sm));
        continue;
      }
      const std::string& bytes = file->second;
      const std::string what = at + image.cubin;
      if (bytes.size() != image.size) {
        problems.push_back(
            fmt::format("{}: {} bytes, metadata.json records {}", what, bytes.size(), image.size));
      }
      const std::string sha = io::sha256Hex(bytes);
      if (sha != image.sha256) {
        problems.push_back(
            fmt::format("{}: sha256 {}, metadata.json records {}", what, sha, image.sha256));
      }
      if (ptx) {
        // PTX is text, not ELF: the SM it was generated for is its `.target` directive.
        ++report.ptx_images;
        const int target = ptxTargetSm(bytes);
        if (bytes.find('\0') != std::string::npos) {
          problems.push_back(
              fmt::format("{}: PTX holds a NUL byte (the driver would load it truncated)", what));
        } else if (target != sm) {
          problems.push_back(
              target == 0 ? fmt::format("{}: not PTX (no .target sm_NN directive)", what)
                          : fmt::format("{}: PTX is for .target sm_{}, metadata.json says {}", what,
                                        target, image.target));
        }
        continue;
      }
      ++report.cubins;
      auto cubin = readCubin(bytes, what);
      if (!cubin) {
        problems.push_back(cubin.error());
        continue;
      }
      if (cubin->sm != sm) {
        problems.push_back(
            fmt::format("{}: cubin is for sm_{} (ELF e_flags {:#010x}), metadata.json says sm_{}",
                        what, cubin->sm, cubin->flags, sm));
      }
      if (!cubin->ptxas_target.empty() && cubin->ptxas_target != image.target) {
        problems.push_back(
            fmt::format("{}: compiled by ptxas for {}, metadata.json records target {}", what,
                        cubin->ptxas_target, image.target));
      }
    }
  }
  for (const auto& [path, bytes] : tree.files) {
    if (startsWith(path, "cubins/") && !listed.count(path)) {
      problems.push_back(fmt::format(
          "{}{}: not listed in metadata.json (an artifact holds no extra objects)", at, path));
    }
  }
}

// Checks lib/libkiln.a: checksum, every member's ELF machine, and the symbols metadata promises.
void checkLibrary(const ArtifactMetadata& m, const ArtifactTree& tree, const std::string& at,
                  Problems& problems, VerifyReport& report) {
  if (m.library.path != kLibraryPath) {
    problems.push_back(fmt::format("{}metadata.json: library path is '{}', expected '{}'", at,
                                   m.library.path, kLibraryPath));
    return;
  }
  const auto file = tree.files.find(kLibraryPath);
  if (file == tree.files.end()) {
    problems.push_back(fmt::format("{}{}: missing (metadata.json lists it)", at, kLibraryPath));
    return;
  }
  const std::string what = at + kLibraryPath;
  const std::string& bytes = file->second;
  if (bytes.size() != m.library.size) {
    problems.push_back(
        fmt::format("{}: {} bytes, metadata.json records {}", what, bytes.size(), m.library.size));
  }
  const std::string sha = io::sha256Hex(bytes);
  if (sha != m.library.sha256) {
    problems.push_back(
        fmt::format("{}: sha256 {}, metadata.json records {}", what, sha, m.library.sha256));
  }
  auto members = readArArchive(bytes, what);
  if (!members) {
    problems.push_back(members.error());
    return;
  }
  if (members->empty()) problems.push_back(fmt::format("{}: holds no object", what));
  const int machine = expectedMachine(m.provenance.arch);
  std::map<std::string, std::string> defined_by;  // symbol -> member
  for (const ArMember& member : *members) {
    ++report.library_members;
    const std::string member_what = fmt::format("{}({})", what, member.name);
    auto header = readElfHeader(member.data, member_what);
    if (!header) {
      problems.push_back(header.error());
      continue;
    }
    if (machine != 0 && header->machine != machine) {
      problems.push_back(fmt::format("{}: ELF machine {} ({}), expected {} ({}) for arch {}",
                                     member_what, header->machine, machineName(header->machine),
                                     machine, m.provenance.arch, m.provenance.arch));
    }
    auto symbols = elfGlobalSymbolsOf(member.data, member_what);
    if (!symbols) {
      problems.push_back(symbols.error());
      continue;
    }
    for (const std::string& symbol : *symbols) {
      auto [it, inserted] = defined_by.emplace(symbol, member.name);
      if (!inserted) {
        problems.push_back(fmt::format("{}: global symbol {} is defined by both {} and {}", what,
                                       symbol, it->second, member.name));
      }
    }
  }
  for (const auto& [name, v] : m.variants) {
    const std::string variant_symbol = variantSymbol(name);
    if (!defined_by.count(variant_symbol)) {
      problems.push_back(
          fmt::format("{}: no member defines {} (variant {} is listed in metadata.json)", what,
                      variant_symbol, name));
    }
    for (const auto& [sm, image] : v.images) {
      if (!defined_by.count(image.symbol)) {
        problems.push_back(
            fmt::format("{}: no member defines {} (variant {} sm_{} in metadata.json)", what,
                        image.symbol, name, sm));
      }
    }
  }
}

// Checks bin/kiln-doctor: checksum, and an executable ELF file of the library's arch.
void checkDoctor(const ArtifactMetadata& m, const ArtifactTree& tree, const std::string& at,
                 Problems& problems) {
  if (m.doctor.path.empty()) {
    problems.push_back(
        fmt::format("{}metadata.json: no doctor record; an artifact carries {} (one built "
                    "before it existed must be rebuilt)",
                    at, kDoctorPath));
    return;
  }
  if (m.doctor.path != kDoctorPath) {
    problems.push_back(fmt::format("{}metadata.json: doctor path is '{}', expected '{}'", at,
                                   m.doctor.path, kDoctorPath));
    return;
  }
  const auto file = tree.files.find(kDoctorPath);
  if (file == tree.files.end()) {
    problems.push_back(fmt::format("{}{}: missing (metadata.json lists it)", at, kDoctorPath));
    return;
  }
  const std::string what = at + kDoctorPath;
  const std::string& bytes = file->second;
  if (bytes.size() != m.doctor.size) {
    problems.push_back(
        fmt::format("{}: {} bytes, metadata.json records {}", what, bytes.size(), m.doctor.size));
  }
  const std::string sha = io::sha256Hex(bytes);
  if (sha != m.doctor.sha256) {
    problems.push_back(
        fmt::format("{}: sha256 {}, metadata.json records {}", what, sha, m.doctor.sha256));
  }
  auto header = readElfHeader(bytes, what);
  if (!header) {
    problems.push_back(header.error());
    return;
  }
  const int machine = expectedMachine(m.provenance.arch);
  if (machine != 0 && header->machine != machine) {
    problems.push_back(fmt::format("{}: ELF machine {} ({}), expected {} ({}) for arch {}", what,
                                   header->machine, machineName(header->machine), machine,
                                   m.provenance.arch, m.provenance.arch));
  }
  if (header->type != kElfTypeExecutable && header->type != kElfTypeShared) {
    problems.push_back(fmt::format("{}: ELF type {} is not an executable (2, or 3 for a PIE)", what,
                                   header->type));
  }
}

// Every file under include/ has its sha256 in metadata.json's headers, and every header listed
// there is present with that sha256: a consumer compiles against exactly what was built.
void checkHeaders(const ArtifactMetadata& m, const ArtifactTree& tree, const std::string& at,
                  Problems& problems) {
  if (m.headers.empty()) {
    problems.push_back(
        fmt::format("{}metadata.json: no headers record; every file under include/ has its "
                    "sha256 there (an artifact built before it existed must be rebuilt)",
                    at));
    return;
  }
  for (const auto& [path, sha256] : m.headers) {
    if (!startsWith(path, "include/")) {
      problems.push_back(fmt::format(
          "{}metadata.json: headers lists '{}', which is not under include/", at, path));
      continue;
    }
    const auto file = tree.files.find(path);
    if (file == tree.files.end()) {
      problems.push_back(fmt::format("{}{}: missing (metadata.json's headers list it)", at, path));
      continue;
    }
    const std::string sha = io::sha256Hex(file->second);
    if (sha != sha256) {
      problems.push_back(
          fmt::format("{}{}: sha256 {}, metadata.json records {}", at, path, sha, sha256));
    }
  }
  for (const auto& [path, bytes] : tree.files) {
    if (startsWith(path, "include/") && !m.headers.count(path)) {
      problems.push_back(fmt::format(
          "{}{}: not listed in metadata.json's headers (an artifact holds no extra headers)", at,
          path));
    }
  }
}

// A tar entry path, split into components, if it is relative and has no "..", "." or empty
// component (a directory's trailing '/' excepted) and no component longer than NAME_MAX; else
// the reason it is refused.
std::string checkEntryPath(const std::string& path, bool is_dir, std::vector<std::string>& parts,
                           const TarLimits& limits) {
  if (path.empty()) return "empty path";
  if (path.front() == '/') return "absolute path";
  std::string_view rest = path;
  if (is_dir && rest.back() == '/') rest.remove_suffix(1);
  size_t start = 0;
  for (;;) {
    const size_t slash = rest.find('/', start);
    const std::string_view part =
        rest.substr(start, slash == std::string_view::npos ? rest.npos : slash - start);
    if (part == "..") return "'..' component";
    if (part.empty()) return "empty path component ('//' or a trailing '/')";
    if (part == ".") return "'.' component";
    if (part.size() > limits.max_name) {
      return fmt::format("a {}-byte name component (the limit is {} bytes)", part.size(),
                         limits.max_name);
    }
    parts.emplace_back(part);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return {};
}

bool isSha256Hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The source paths metadata records (a variant's `inputs`, the artifact's `runtime_inputs`) are
// what kiln_import_artifacts hashes again in the consumer's checkout, so each must be a clean
// relative path inside what kiln records: a variant's under kernels/<group>/ or kernels/common/,
// the runtime's under runtime/ or kernels/<group>/runner/ of one of its groups; with a sha256.
void checkRecordedInputs(const std::map<std::string, std::string>& inputs,
                         const std::vector<std::string>& allowed, const std::string& field,
                         const std::string& meta, Problems& problems) {
  const TarLimits limits;
  for (const auto& [path, sha256] : inputs) {
    std::vector<std::string> parts;
    std::string reason = checkEntryPath(path, false, parts, limits);
    const std::string_view recorded = path;  // clang before 16 cannot capture a structured binding
    if (reason.empty() && std::none_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
          return startsWith(recorded, a);
        })) {
      reason = fmt::format("not under {}", fmt::join(allowed, " or "));
    }
    if (!reason.empty()) {
      problems.push_back(fmt::format("{}: {} path '{}': {}; expected a path in a kiln checkout",
                                     meta, field, path.substr(0, 200), reason));
    } else if (!isSha256Hex(sha256)) {
      problems.push_back(fmt::format("{}: {} '{}': '{}' is not a sha256 (64 lower-case hex digits)",
                                     meta, field, path, sha256.substr(0, 80)));
    }
  }
}

// Group and variant names become paths, symbols and defines (the consumer's KILN_<NAME>_ENABLED,
// its staleness check's kernels/<group>/): each follows the grammar of docs/naming.md, and every
// recorded input lies where kiln records it.
void checkNames(const ArtifactMetadata& m, const std::string& meta, Problems& problems) {
  std::vector<std::string> runtime_dirs = {"runtime/"};
  for (const auto& [name, group] : m.groups) {
    if (const std::string rule = checkGroupName(name); !rule.empty()) {
      problems.push_back(fmt::format("{}: group name '{}' {}", meta, name.substr(0, 200), rule));
      continue;
    }
    runtime_dirs.push_back(fmt::format("kernels/{}/runner/", name));
  }
  for (const auto& [name, v] : m.variants) {
    if (!checkGroupName(v.group).empty()) continue;  // reported with the groups, or unlisted
    if (const std::string rule = checkVariantName(name, v.group); !rule.empty()) {
      problems.push_back(fmt::format("{}: variant name '{}' {}", meta, name.substr(0, 200), rule));
      continue;
    }
    checkRecordedInputs(v.inputs, {fmt::format("kernels/{}/", v.group), "kernels/common/"},
                        fmt::format("variants.{}.inputs", name), meta, problems);
  }
  checkRecordedInputs(m.runtime_inputs, runtime_dirs, "runtime_inputs", meta, problems);
  if (!isSha256Hex(m.fingerprint)) {
    problems.push_back(
        fmt::format("{}: fingerprint '{}' is not a sha256 (64 lower-case hex digits)", meta,
                    m.fingerprint.substr(0, 80)));
  }
}

// Every rule on an artifact's contents. `dir_name` is the directory (or the tarball's top-level
// directory) the tag must equal; `at` prefixes every file name in messages.
bool checkArtifact(const ArtifactTree& tree, const std::string& dir_name, const std::string& at,
                   Problems& problems, VerifyReport& report, ArtifactMetadata& metadata) {
  const auto metadata_file = tree.files.find(kMetadataFile);
  if (metadata_file == tree.files.end()) {
    problems.push_back(fmt::format("{}{}: missing; every artifact has one", at, kMetadataFile));
    return false;
  }
  auto parsed = parseMetadata(metadata_file->second);
  if (!parsed) {
    problems.push_back(fmt::format("{}{}", at, parsed.error()));
    return false;
  }
  metadata = std::move(*parsed);
  const ArtifactMetadata& m = metadata;
  const Provenance& p = m.provenance;
  const std::string meta = at + kMetadataFile;
  report.arch = p.arch;
  report.tag = p.tag;
  for (const GpuArch& arch : p.gpu_archs) report.sms.push_back(arch.sm);
  report.cuda_version = p.cuda_version;
  report.fingerprint = m.fingerprint;
  report.build_date = m.build_date;
  report.variants = static_cast<int>(m.variants.size());

  if (expectedMachine(p.arch) == 0) {
    problems.push_back(fmt::format("{}: arch '{}', expected x86_64 or aarch64", meta, p.arch));
  }
  bool sms_valid = !p.gpu_archs.empty();
  std::vector<std::string> arch_names;
  for (size_t i = 0; i < p.gpu_archs.size(); ++i) {
    const int sm = p.gpu_archs[i].sm;
    arch_names.push_back(sm > 0 ? gpuArchName(p.gpu_archs[i]) : "?");
    if (sm <= 0 || (i > 0 && sm <= p.gpu_archs[i - 1].sm)) sms_valid = false;
  }
  if (!sms_valid) {
    problems.push_back(fmt::format(
        "{}: gpu_archs [{}] must be valid SMs (sm_NN or compute_NN), ascending and unique", meta,
        fmt::join(arch_names, ", ")));
  } else if (p.tag != joinTag(p.gpu_archs)) {
    problems.push_back(fmt::format("{}: tag '{}' disagrees with gpu_archs (expected '{}')", meta,
                                   p.tag, joinTag(p.gpu_archs)));
  }
  if (p.tag != dir_name) {
    problems.push_back(
        fmt::format("{}: tag '{}' disagrees with its directory '{}'", meta, p.tag, dir_name));
  }
  auto major = cudaMajor(p.cuda_version);
  if (major) {
    report.cuda_major = *major;
  } else {
    problems.push_back(fmt::format("{}: {}", meta, major.error()));
  }

  for (const auto& [group_name, group] : m.groups) {
    for (const std::string& variant : group.variants) {
      const auto it = m.variants.find(variant);
      if (it == m.variants.end()) {
        problems.push_back(
            fmt::format("{}: group {} lists variant {}, which has no entry in variants", meta,
                        group_name, variant));
      } else if (it->second.group != group_name) {
        problems.push_back(fmt::format("{}: group {} lists variant {}, whose group is '{}'", meta,
                                       group_name, variant, it->second.group));
      }
    }
  }
  for (const auto& [name, v] : m.variants) {
    const auto group = m.groups.find(v.group);
    if (group == m.groups.end() ||
        std::find(group->second.variants.begin(), group->second.variants.end(), name) ==
            group->second.variants.end()) {
      problems.push_back(
          fmt::format("{}: variant {} is not listed by its group '{}'", meta, name, v.group));
    }
    if (!tree.files.count(variantHeaderPath(name))) {
      problems.push_back(fmt::format("{}{}: missing (variant {} in metadata.json)", at,
                                     variantHeaderPath(name), name));
    }
  }

  checkNames(m, meta, problems);
  checkCubins(m, tree, at, problems, report);
  checkLibrary(m, tree, at, problems, report);
  checkDoctor(m, tree, at, problems);
  checkHeaders(m, tree, at, problems);

  for (const auto& [path, bytes] : tree.files) {
    const bool known = path == kMetadataFile || path == kLibraryPath || path == kDoctorPath ||
                       startsWith(path, "include/") || startsWith(path, "cubins/");
    if (!known) {
      problems.push_back(
          fmt::format("{}{}: unexpected file (an artifact holds metadata.json, {}, {}, include/ "
                      "and cubins/ only)",
                      at, path, kLibraryPath, kDoctorPath));
    }
  }
  return true;
}

// The directory's own name, also for "artifacts/x86_64/sm_90/".
std::string dirName(const fs::path& dir) {
  fs::path normal = dir.lexically_normal();
  if (normal.filename().empty()) normal = normal.parent_path();
  if (normal.filename().empty() || normal.filename() == "." || normal.filename() == "..") {
    std::error_code ec;
    normal = fs::weakly_canonical(fs::absolute(dir), ec);
  }
  return normal.filename().string();
}

}  // namespace

std::string summarize(const VerifyReport& r) {
  const std::string ptx = r.ptx_images == 0 ? ""
                                            : fmt::format(", {} PTX image{}", r.ptx_images,
                                                          r.ptx_images == 1 ? "" : "s");
  return fmt::format("{} {} (CUDA {}): {} variant{}, {} cubin{}{}, {} library object{} verified",
                     r.arch, r.tag, r.cuda_version, r.variants, r.variants == 1 ? "" : "s",
                     r.cubins, r.cubins == 1 ? "" : "s", ptx, r.library_members,
                     r.library_members == 1 ? "" : "s");
}

Result<VerifyReport> verifyPath(const fs::path& target) {
  std::error_code ec;
  if (fs::is_regular_file(target, ec) && target.filename().string().ends_with(".tar.gz"))
    return verifyTarball(target);
  if (fs::is_directory(target, ec)) return verifyArtifactDir(target);
  return makeError(
      fmt::format("{} is neither a .tar.gz file nor an artifact directory", target.string()),
      ErrorKind::kUsage);
}

std::string verifiedLine(const std::string& target, const VerifyReport& r) {
  return fmt::format("ok: {}: {}, fingerprint {}, built {}{}", target, summarize(r), r.fingerprint,
                     r.build_date, r.tarball_sha256.empty() ? "" : ", sha256 " + r.tarball_sha256);
}

std::string tarballFileName(const std::string& arch, const std::string& tag, int cuda_major) {
  return fmt::format("kiln_{}_{}_cuda{}.tar.gz", arch, tag, cuda_major);
}

Result<TarballName> parseTarballFileName(const std::string& file_name) {
  auto bad = [&] {
    return makeError(
        fmt::format("tarball name '{}' does not follow kiln_<arch>_<tag>_cuda<major>.tar.gz "
                    "(e.g. kiln_x86_64_sm_90_cuda13.tar.gz, kiln_x86_64_compute_80_cuda13.tar.gz)",
                    file_name));
  };
  constexpr std::string_view kPrefix = "kiln_";
  constexpr std::string_view kSuffix = ".tar.gz";
  std::string_view s = file_name;
  if (s.size() <= kPrefix.size() + kSuffix.size() || !startsWith(s, kPrefix) ||
      s.substr(s.size() - kSuffix.size()) != kSuffix) {
    return bad();
  }
  s = s.substr(kPrefix.size(), s.size() - kPrefix.size() - kSuffix.size());
  const size_t cuda = s.rfind("_cuda");
  // The tag starts at its first entry, sm_NN or compute_NN, whichever comes first.
  const size_t tag = std::min(s.find("_sm_"), s.find("_compute_"));
  if (cuda == std::string_view::npos || tag == std::string_view::npos || tag == 0 || tag >= cuda)
    return bad();
  TarballName name;
  name.arch = std::string(s.substr(0, tag));
  name.tag = std::string(s.substr(tag + 1, cuda - tag - 1));
  const std::string_view major = s.substr(cuda + 5);
  if (major.empty() || major.size() > 3 || !std::all_of(major.begin(), major.end(), ::isdigit))
    return bad();
  name.cuda_major = std::stoi(std::string(major));
  return name;
}

Result<int> cudaMajor(const std::string& cuda_version) {
  const std::string major = cuda_version.substr(0, cuda_version.find('.'));
  if (major.empty() || major.size() > 3 || !std::all_of(major.begin(), major.end(), ::isdigit)) {
    return makeError(fmt::format("cuda_version '{}' is not a version like 13.0.88", cuda_version));
  }
  return std::stoi(major);
}

Result<ArtifactTree> readArtifactTree(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) {
    return makeError(fmt::format("{}: not a directory", dir.string()));
  }
  ArtifactTree tree;
  Problems problems;
  const TarLimits limits;  // a directory is held to the tarball's bounds
  std::uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    const std::string rel = path.lexically_relative(dir).generic_string();
    const fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_directory(status)) {
      tree.dirs.insert(rel);
    } else if (fs::is_regular_file(status)) {
      if (tree.files.size() + tree.dirs.size() >= limits.max_entries) {
        return makeError(fmt::format("{}: holds more than {} files and directories (the limit)",
                                     dir.string(), limits.max_entries));
      }
      // Opened without following links and fstat-checked, so a file swapped for a FIFO or a
      // link to a device since the listing is refused, not read.
      auto bytes = io::readRegularFile(path, limits.max_entry_bytes, io::Links::kRefuse);
      if (!bytes) return bytes.failure();
      total += bytes->size();
      if (total > limits.max_total_bytes) {
        return makeError(fmt::format("{}: holds more than {} bytes of file data (the limit)",
                                     dir.string(), limits.max_total_bytes));
      }
      tree.files.emplace(rel, std::move(*bytes));
    } else {
      problems.push_back(
          fmt::format("{}: is a {}; an artifact holds regular files and directories only",
                      path.string(), fs::is_symlink(status) ? "symlink" : "special file"));
    }
  }
  if (ec) return makeError(fmt::format("{}: cannot list: {}", dir.string(), ec.message()));
  if (!problems.empty()) return problemsError(dir.string(), problems);
  return tree;
}

Result<VerifiedArtifact> loadVerifiedDir(const fs::path& dir) {
  auto tree = readArtifactTree(dir);
  if (!tree) return tree.failure();
  VerifiedArtifact out;
  out.tree = std::move(*tree);
  out.report.source = dir.string();
  Problems problems;
  std::string at = dir.string();
  if (!at.empty() && at.back() != '/') at += '/';
  checkArtifact(out.tree, dirName(dir), at, problems, out.report, out.metadata);
  if (!problems.empty()) return problemsError(dir.string(), problems);
  return out;
}

Result<VerifiedArtifact> loadVerifiedTarballBytes(std::string_view bytes,
                                                  const std::string& file_name) {
  Problems problems;
  auto name = parseTarballFileName(file_name);
  if (!name) problems.push_back(name.error());

  const TarLimits limits;
  auto entries = readTarGz(bytes, file_name, limits);
  if (!entries) return entries.failure();

  // Headers first: nothing about the contents is believed until every path and type is safe.
  std::string top;
  std::set<std::string> seen;
  std::set<std::string> file_paths;
  VerifiedArtifact out;
  out.report.source = file_name;
  for (TarEntry& e : *entries) {
    const std::string where = fmt::format("{}: entry '{}'", file_name, e.path);
    if (e.type != TarEntryType::kFile && e.type != TarEntryType::kDirectory) {
      problems.push_back(fmt::format("{} is a {}{}; expected a regular file or directory", where,
                                     e.type_name,
                                     e.link_target.empty() ? "" : " to '" + e.link_target + "'"));
      continue;
    }
    std::vector<std::string> parts;
    const std::string reason =
        checkEntryPath(e.path, e.type == TarEntryType::kDirectory, parts, limits);
    if (!reason.empty()) {
      problems.push_back(
          fmt::format("{}: {}; expected a relative path under <tag>/", where, reason));
      continue;
    }
    if (top.empty()) top = parts.front();
    if (parts.front() != top) {
      problems.push_back(
          fmt::format("{} lies outside '{}/', the tarball's top-level directory", where, top));
      continue;
    }
    std::string normal = parts.front();
    for (size_t i = 1; i < parts.size(); ++i) normal += "/" + parts[i];
    if (!seen.insert(normal).second) {
      problems.push_back(fmt::format("{} appears more than once", where));
      continue;
    }
    if (parts.size() == 1) {
      if (e.type != TarEntryType::kDirectory) {
        problems.push_back(
            fmt::format("{} is a file at the top level; expected everything under <tag>/", where));
      }
      continue;
    }
    const std::string rel = normal.substr(top.size() + 1);
    if (e.type == TarEntryType::kFile && e.executable && rel != kDoctorPath) {
      problems.push_back(
          fmt::format("{} is executable; only {}/{} may be", where, top, kDoctorPath));
    }
    if (e.type == TarEntryType::kDirectory) {
      out.tree.dirs.insert(rel);
    } else {
      file_paths.insert(rel);
      out.tree.files.emplace(rel, std::move(e.data));  // moved: a tarball's data is held once
    }
  }
  // A file that is also used as a directory ("lib" the file and "lib/libkiln.a", or the
  // directory entry "lib/x/") cannot be extracted; refuse it here rather than half way through
  // writing.
  auto checkParents = [&](const std::string& path) {
    for (size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      if (file_paths.count(path.substr(0, slash))) {
        problems.push_back(fmt::format("{}: entry '{}/{}' is a file but also the parent of '{}'",
                                       file_name, top, path.substr(0, slash), path));
        return;
      }
    }
  };
  for (const std::string& path : file_paths) checkParents(path);
  for (const std::string& path : out.tree.dirs) {
    if (file_paths.count(path)) {
      problems.push_back(
          fmt::format("{}: entry '{}/{}' is both a file and a directory", file_name, top, path));
    }
    checkParents(path);
  }
  if (top.empty())
    problems.push_back(
        fmt::format("{}: holds no entry; expected <tag>/metadata.json and the rest", file_name));
  if (!problems.empty()) return problemsError(file_name, problems);

  checkArtifact(out.tree, top, fmt::format("{}:{}/", file_name, top), problems, out.report,
                out.metadata);
  if (name && !out.report.arch.empty()) {
    if (name->arch != out.report.arch) {
      problems.push_back(fmt::format("{}: file name says arch {}, metadata.json says {}", file_name,
                                     name->arch, out.report.arch));
    }
    if (name->tag != out.report.tag) {
      problems.push_back(fmt::format("{}: file name says tag {}, metadata.json says {}", file_name,
                                     name->tag, out.report.tag));
    }
    if (out.report.cuda_major != 0 && name->cuda_major != out.report.cuda_major) {
      problems.push_back(
          fmt::format("{}: file name says cuda{}, metadata.json's cuda_version is {}", file_name,
                      name->cuda_major, out.report.cuda_version));
    }
  }
  if (!problems.empty()) return problemsError(file_name, problems);
  out.report.tarball_sha256 = io::sha256Hex(bytes);
  return out;
}

Result<VerifiedArtifact> loadVerifiedTarball(const fs::path& tarball) {
  // The tarball and its sidecar are named by hand, so a link is followed, but what it reaches must
  // be a regular file within the size bound: never a FIFO (which would hang) or a device.
  auto bytes = io::readRegularFile(tarball, TarLimits{}.max_archive_bytes, io::Links::kFollow);
  if (!bytes) return bytes.failure();
  const std::string file_name = tarball.filename().string();
  // The checksum before anything else: a tarball whose bytes are not the published ones is not
  // parsed at all.
  fs::path sidecar = tarball;
  sidecar += ".sha256";
  std::error_code ec;
  if (!fs::exists(sidecar, ec) && !fs::is_symlink(sidecar, ec)) {
    return makeError(fmt::format("{}: checksum file {} is missing; expected '<sha256>  {}'",
                                 tarball.string(), sidecar.string(), file_name));
  }
  auto text = io::readRegularFile(sidecar, kMaxSidecarBytes, io::Links::kFollow);
  if (!text) return text.failure();
  const std::string line = text->substr(0, text->find('\n'));
  const std::string recorded = line.substr(0, std::min<size_t>(line.size(), 64));
  // sha256sum writes "<hash>  <name>" (text mode) or "<hash> *<name>" (-b, binary mode); both
  // name the same bytes on Linux.
  const bool well_formed =
      line.size() > 66 && line[64] == ' ' && (line[65] == ' ' || line[65] == '*') &&
      std::all_of(recorded.begin(), recorded.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'f');
      });
  if (!well_formed) {
    return makeError(
        fmt::format("{}: first line is '{}'; expected the sha256sum format '<64 hex digits>  {}'",
                    sidecar.string(), line.substr(0, 200), file_name));
  }
  const std::string recorded_name = line.substr(66);
  if (recorded_name != file_name) {
    return makeError(fmt::format("{}: names '{}', expected '{}'", sidecar.string(),
                                 recorded_name.substr(0, 200), file_name));
  }
  const std::string actual = io::sha256Hex(*bytes);
  if (actual != recorded) {
    return makeError(
        fmt::format("{}: sha256 {}, but {} records {}; the tarball is corrupt or was modified",
                    tarball.string(), actual, sidecar.filename().string(), recorded));
  }
  auto verified = loadVerifiedTarballBytes(*bytes, file_name);
  if (!verified) return verified.failure();
  verified->report.source = tarball.string();
  return verified;
}

Result<VerifyReport> verifyArtifactDir(const fs::path& dir) {
  auto verified = loadVerifiedDir(dir);
  if (!verified) return verified.failure();
  return verified->report;
}

Result<VerifyReport> verifyTarball(const fs::path& tarball) {
  auto verified = loadVerifiedTarball(tarball);
  if (!verified) return verified.failure();
  return verified->report;
}

Result<VerifyReport> verifyTarballBytes(std::string_view bytes, const std::string& file_name) {
  auto verified = loadVerifiedTarballBytes(bytes, file_name);
  if (!verified) return verified.failure();
  return verified->report;
}

}  // namespace kiln::core
