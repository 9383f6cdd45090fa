// Real, small artifacts for the package and verify tests: cubins (and, for the SMs a spec lists
// as PTX, PTX text) compiled by nvcc and host
// objects compiled by g++ (or the aarch64 cross g++) and archived by ar, at test time, so no
// binary is checked in and the checks run against what the real tools write. Each tool runs once
// per test binary per distinct input (results are cached); a test then assembles an artifact
// directory, with metadata.json written by the builder's own core::toJson, and breaks it on
// purpose. When a tool is missing the tests that need it are skipped with the reason.
#pragma once

#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/fingerprint.h"
#include "core/metadata.h"
#include "core/naming.h"
#include "io/fs.h"

namespace kiln::testing {

namespace fs = std::filesystem;

// A scratch directory removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("kiln-pkg-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline bool runQuiet(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str()) == 0;
}

inline std::string nvccPath() {
  if (const char* env = std::getenv("KILN_TEST_NVCC")) return env;
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return "nvcc";
}

inline std::string cxxFor(const std::string& arch) {
  return arch == "x86_64" ? "g++" : "aarch64-linux-gnu-g++";
}

// Compiles and caches the inputs an artifact is made of.
class Toolbox {
 public:
  static Toolbox& get() {
    static Toolbox box;
    return box;
  }

  // Why a test needing `arch` host objects and cubins cannot run here; empty when it can.
  std::string missing(const std::string& arch) {
    if (!runQuiet(nvccPath() + " --version")) return "nvcc not found (set KILN_TEST_NVCC)";
    if (!runQuiet(cxxFor(arch) + " --version")) return cxxFor(arch) + " not found";
    return {};
  }

  // A cubin of a one-line kernel for sm_<sm>, compiled by nvcc.
  std::string cubin(int sm) {
    auto& cached = cubins_[sm];
    if (cached.empty()) {
      const fs::path source = dir_.path() / "k.cu";
      io::writeFile(source, "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n")
          .ok();
      const fs::path out = dir_.path() / ("k.sm_" + std::to_string(sm) + ".cubin");
      if (runQuiet(nvccPath() + " -cubin -arch=sm_" + std::to_string(sm) + " " + source.string() +
                   " -o " + out.string())) {
        cached = io::readFile(out).value();
      }
    }
    return cached;
  }

  // The PTX of the same kernel for compute_<sm> (`nvcc -ptx`), as a compute_NN build writes it.
  std::string ptx(int sm) {
    auto& cached = ptxs_[sm];
    if (cached.empty()) {
      const fs::path source = dir_.path() / "k.cu";
      io::writeFile(source, "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] = 1.0f; }\n")
          .ok();
      const fs::path out = dir_.path() / ("k.compute_" + std::to_string(sm) + ".ptx");
      if (runQuiet(nvccPath() + " -ptx -arch=compute_" + std::to_string(sm) + " " +
                   source.string() + " -o " + out.string())) {
        cached = io::readFile(out).value();
      }
    }
    return cached;
  }

  // An object for `arch` defining kiln_<variant>_variant and kiln_<variant>__arch<NN>_image.
  fs::path variantObject(const std::string& arch, const std::string& variant,
                         const std::vector<int>& sms) {
    std::string source =
        "extern \"C\" {\nint " + core::variantSymbol(variant) + "(void) { return 1; }\n";
    for (int sm : sms)
      source += "int " + core::imageSymbol(variant, sm) + "(void) { return " + std::to_string(sm) +
                "; }\n";
    source += "}\n";
    return object(arch, variant, source);
  }

  // An object for `arch` with the artifact table's symbols, as the builder's kiln_artifact.o.
  fs::path artifactObject(const std::string& arch) {
    return object(arch, "kiln_artifact",
                  "extern \"C\" const char* kiln_artifact_tag(void) { return \"t\"; }\n");
  }

  // bin/kiln-doctor for `arch`: a linked executable (an empty main), by g++.
  std::string executable(const std::string& arch) {
    auto& cached = executables_[arch];
    if (cached.empty()) {
      const fs::path dir = dir_.path() / arch / "doctor";
      fs::create_directories(dir);
      io::writeFile(dir / "main.cpp", "int main() { return 0; }\n").ok();
      if (runQuiet(cxxFor(arch) + " " + (dir / "main.cpp").string() + " -o " +
                   (dir / "kiln-doctor").string())) {
        cached = io::readFile(dir / "kiln-doctor").value();
      }
    }
    return cached;
  }

  // lib/libkiln.a from `objects`, by ar.
  std::string library(const std::vector<fs::path>& objects) {
    const fs::path out = dir_.path() / ("lib" + std::to_string(libraries_++) + ".a");
    std::string command = "ar rcs " + out.string();
    for (const auto& o : objects) command += " " + o.string();
    if (!runQuiet(command)) return {};
    return io::readFile(out).value();
  }

 private:
  fs::path object(const std::string& arch, const std::string& stem, const std::string& source) {
    const std::string key = arch + "/" + stem + "/" + source;
    auto it = objects_.find(key);
    if (it != objects_.end()) return it->second;
    const fs::path dir = dir_.path() / arch / std::to_string(objects_.size());
    fs::create_directories(dir);
    io::writeFile(dir / (stem + ".cpp"), source).ok();
    const fs::path out = dir / (stem + ".o");
    runQuiet(cxxFor(arch) + " -c -O1 " + (dir / (stem + ".cpp")).string() + " -o " + out.string());
    objects_[key] = out;
    return out;
  }

  ScratchDir dir_;
  std::map<int, std::string> cubins_;
  std::map<int, std::string> ptxs_;
  std::map<std::string, fs::path> objects_;
  std::map<std::string, std::string> executables_;
  int libraries_ = 0;
};

struct ArtifactSpec {
  std::string arch = "x86_64";
  std::vector<int> sms = {90};
  std::vector<std::string> variants = {"rmsnorm_h4096_bf16", "rmsnorm_h1024_fp16"};
  std::string cuda_version = "13.0.88";
  // Those of `sms` built as compute_NN: PTX images, gpu_archs entries compute_NN.
  std::vector<int> ptx_sms = {};

  bool isPtx(int sm) const {
    return std::find(ptx_sms.begin(), ptx_sms.end(), sm) != ptx_sms.end();
  }
  std::vector<core::GpuArch> gpuArchs() const {
    std::vector<core::GpuArch> archs;
    for (int sm : sms) archs.emplace_back(sm, isPtx(sm));
    return archs;
  }
};

inline std::string tagOf(const std::vector<int>& sms) {
  return core::artifactTag(std::vector<core::GpuArch>(sms.begin(), sms.end()));
}

// Writes a complete artifact to <root>/<arch>/<tag> and returns that directory.
inline fs::path makeArtifact(const fs::path& root, const ArtifactSpec& spec) {
  Toolbox& box = Toolbox::get();
  const std::string tag = core::artifactTag(spec.gpuArchs());
  const fs::path dir = root / spec.arch / tag;
  core::ArtifactMetadata m;
  core::Provenance& p = m.provenance;
  p.kiln_version = "0.1.0";
  p.arch = spec.arch;
  p.host_target = spec.arch + "-linux-gnu";
  p.tag = tag;
  p.gpu_archs = spec.gpuArchs();
  for (int sm : spec.sms) p.compile_targets.push_back(core::nvccTarget(sm, false, spec.isPtx(sm)));
  std::sort(p.compile_targets.begin(), p.compile_targets.end());
  p.cuda_version = spec.cuda_version;
  p.host_compiler_command = cxxFor(spec.arch);
  p.host_compiler_version = "g++ 12.2.0";
  m.build_date = "2025-01-01T00:00:00Z";
  std::vector<fs::path> objects = {box.artifactObject(spec.arch)};
  core::GroupRecord group{"cuda", {80, 87, 90}, {}};
  for (const std::string& name : spec.variants) {
    core::VariantRecord v;
    v.name = name;
    v.group = "rmsnorm";
    v.kind = "cuda";
    v.entries = {"kiln_rmsnorm"};
    v.constants = {{"hidden", core::ConstantType::kInt, std::int64_t{4096}}};
    v.inputs = {{"kernels/rmsnorm/kiln.toml", std::string(64, 'a')}};
    v.fingerprint = std::string(64, 'f');
    for (int sm : spec.sms) {
      const bool ptx = spec.isPtx(sm);
      const std::string cubin = ptx ? box.ptx(sm) : box.cubin(sm);
      core::ImageRecord image;
      image.sm = sm;
      image.target = core::nvccTarget(sm, false, ptx);
      image.format = ptx ? core::kFormatPtx : core::kFormatCubin;
      image.symbol = core::imageSymbol(name, sm);
      image.cubin = core::imagePath(name, sm, ptx);
      image.sha256 = io::sha256Hex(cubin);
      image.size = cubin.size();
      image.command = {"nvcc", ptx ? "-ptx" : "-cubin"};
      v.images[sm] = image;
      io::writeFile(dir / image.cubin, cubin).ok();
    }
    m.variants[name] = v;
    group.variants.push_back(name);
    io::writeFile(dir / core::variantHeaderPath(name), "#pragma once\n").ok();
    objects.push_back(box.variantObject(spec.arch, name, spec.sms));
  }
  std::sort(group.variants.begin(), group.variants.end());
  m.groups["rmsnorm"] = group;
  const std::string library = box.library(objects);
  m.library = {core::kLibraryPath, io::sha256Hex(library), library.size()};
  io::writeFile(dir / core::kLibraryPath, library).ok();
  io::writeFile(dir / core::kAllHeaderPath, "#pragma once\n").ok();
  const std::string doctor = box.executable(spec.arch);
  m.doctor = {core::kDoctorPath, io::sha256Hex(doctor), doctor.size()};
  io::writeFile(dir / core::kDoctorPath, doctor).ok();
  for (const auto& file : io::listFiles(dir / "include")) {
    m.headers[fs::relative(file, dir).generic_string()] = io::sha256Hex(io::readFile(file).value());
  }
  m.fingerprint = core::artifactFingerprint(m);
  io::writeFile(dir / core::kMetadataFile, core::toJson(m)).ok();
  return dir;
}

// Rewrites metadata.json of `dir` through `edit`.
template <typename Edit>
void editMetadata(const fs::path& dir, Edit edit) {
  auto m = core::parseMetadata(io::readFile(dir / core::kMetadataFile).value());
  edit(*m);
  io::writeFile(dir / core::kMetadataFile, core::toJson(*m)).ok();
}

// One entry of a hand-made tarball; `type` is AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR...
struct RawEntry {
  std::string path;
  unsigned int type = AE_IFREG;
  std::string data;
  std::string link;      // symlink target
  std::string hardlink;  // hardlink target
  unsigned int perm = 0644;
};

// Writes a .tar.gz with exactly these entries (no safety checks: this is how an attacker would
// write one) and its correct .sha256 sidecar, so that only the entries themselves are at fault.
inline void writeRawTarball(const fs::path& path, const std::vector<RawEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_gzip(a);
  archive_write_open_filename(a, path.c_str());
  for (const RawEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.path.c_str());
    archive_entry_set_filetype(entry, e.type);
    archive_entry_set_perm(entry, e.perm);
    if (!e.link.empty()) archive_entry_set_symlink(entry, e.link.c_str());
    if (!e.hardlink.empty()) archive_entry_set_hardlink(entry, e.hardlink.c_str());
    archive_entry_set_size(entry, e.type == AE_IFREG && e.hardlink.empty()
                                      ? static_cast<la_int64_t>(e.data.size())
                                      : 0);
    archive_write_header(a, entry);
    if (e.type == AE_IFREG && !e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  const std::string sha = io::sha256Hex(io::readFile(path).value());
  io::writeFile(fs::path(path.string() + ".sha256"), sha + "  " + path.filename().string() + "\n")
      .ok();
}

// The entries of an artifact directory as RawEntry list under `<top>/`, in sorted order.
inline std::vector<RawEntry> entriesOf(const fs::path& dir, const std::string& top) {
  std::vector<RawEntry> entries = {{top, AE_IFDIR, {}, {}, {}}};
  for (const auto& file : io::listFiles(dir)) {
    entries.push_back({top + "/" + fs::relative(file, dir).generic_string(),
                       AE_IFREG,
                       io::readFile(file).value(),
                       {},
                       {}});
  }
  return entries;
}

}  // namespace kiln::testing
