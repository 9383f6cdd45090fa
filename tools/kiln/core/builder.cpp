// The build pipeline (see builder.h). The order matters and is the contract:
//   1. parse options, find the tools, load the registry, plan, check an existing artifact can be
//      merged: everything that can fail for a reason the user must fix happens before any file
//      is written or deleted;
//   2. everything is written into a staging directory next to the artifact;
//   3. the staging directory replaces the artifact by rename, so a failed or killed build leaves
//      the previous artifact as it was (a killed build's staging directory is removed by the
//      next build once its pid is gone).
#include "core/builder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <set>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/codegen.h"
#include "core/cubin_abi.h"
#include "core/cute_dsl_frontend.h"
#include "core/frontend.h"
#include "core/inputs.h"
#include "core/naming.h"
#include "core/parallel.h"
#include "core/plan.h"
#include "core/registry.h"
#include "core/toolchain.h"
#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::core {

fs::path stagingDir(const fs::path& artifact_dir, int pid) {
  return artifact_dir.parent_path() /
         fmt::format(".{}.staging-{}", artifact_dir.filename().string(), pid);
}

namespace {

Error usage(std::string message) {
  return makeError(std::move(message), ErrorKind::kUsage);
}

// Removes the staging directory unless the build published it.
class StagingGuard {
 public:
  explicit StagingGuard(fs::path dir) : dir_(std::move(dir)) {}
  ~StagingGuard() {
    if (!dir_.empty()) {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  StagingGuard(const StagingGuard&) = delete;
  StagingGuard& operator=(const StagingGuard&) = delete;
  void release() { dir_.clear(); }

 private:
  fs::path dir_;
};

// Staging / set-aside directories of builds whose process is gone (killed mid-build).
void removeAbandoned(const fs::path& artifact_dir) {
  std::error_code ec;
  const std::string tag = artifact_dir.filename().string();
  for (const auto& entry : fs::directory_iterator(artifact_dir.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    for (const std::string& prefix : {"." + tag + ".staging-", "." + tag + ".old-"}) {
      if (name.rfind(prefix, 0) != 0) continue;
      const std::string pid_text = name.substr(prefix.size());
      if (pid_text.empty() || pid_text.find_first_not_of("0123456789") != std::string::npos)
        continue;
      const long pid = std::stol(pid_text);
      if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
      fs::remove_all(entry.path(), ec);
    }
  }
}

// Serialises sink calls from worker threads.
class LockedSink {
 public:
  explicit LockedSink(BuildSink& sink) : sink_(sink) {}
  template <typename F>
  void with(F&& f) {
    std::lock_guard<std::mutex> lock(mutex_);
    f(sink_);
  }

 private:
  BuildSink& sink_;
  std::mutex mutex_;
};

struct HostCompile {
  fs::path source;
  fs::path object;
  std::vector<fs::path> extra_includes;
};

class Builder {
 public:
  Builder(const BuildOptions& options, io::ProcessRunner& runner, BuildSink& sink)
      : options_(options), runner_(runner), sink_(sink) {}

  Result<BuildSummary> run() {
    if (auto r = checkEnvironment(); !r) return r.failure();
    if (auto r = prepareStaging(); !r) return r.failure();
    StagingGuard guard(staging_);
    if (auto r = compileCubins(); !r) return r.failure();
    if (auto r = mergeOld(); !r) return r.failure();
    if (auto r = generate(); !r) return r.failure();
    if (auto r = buildLibrary(); !r) return r.failure();
    if (auto r = writeMetadata(); !r) return r.failure();
    if (auto r = publish(); !r) return r.failure();
    guard.release();
    summary_.artifact_dir = artifact_dir_;
    summary_.metadata = metadata_;
    return std::move(summary_);
  }

 private:
  // ---- 1. checks, before anything is written --------------------------------------------
  Result<void> checkEnvironment() {
    auto sms = parseGpuArchs(options_.gpu_arch);
    if (!sms) return sms.failure();
    sms_ = *sms;
    root_ = fs::absolute(options_.root).lexically_normal();
    if (!fs::is_directory(root_ / "kernels")) {
      return usage(fmt::format("--root {}: no kernels/ directory there", root_.string()));
    }
    runtime_ = options_.runtime_dir.empty() ? root_ / "runtime"
                                            : fs::absolute(options_.runtime_dir).lexically_normal();
    for (const char* dir : {"include/kiln", "src"}) {
      if (!fs::is_directory(runtime_ / dir)) {
        return usage(fmt::format("runtime directory {}: no {}/ there (see --runtime-dir)",
                                 runtime_.string(), dir));
      }
    }
    const std::string arch = options_.arch.empty() ? hostArch() : options_.arch;

    auto cuda = detectCuda(runner_, options_.nvcc, options_.cuda_home);
    if (!cuda) return cuda.failure();
    cuda_ = *cuda;
    for (const GpuArch& target : sms_) {
      // compute_NN is checked against `--list-gpu-code` too: every nvcc lists compute_NN for each
      // sm_NN it can compile (CUDA 13.0: the same twelve numbers), and a virtual architecture
      // without a real one is of no use to kiln.
      if (std::find(cuda_.sms.begin(), cuda_.sms.end(), target.sm) == cuda_.sms.end()) {
        return makeError(
            fmt::format("--gpu-arch {}: nvcc {} cannot target it (it targets sm_{})",
                        gpuArchName(target), cuda_.version, fmt::join(cuda_.sms, ", sm_")),
            ErrorKind::kEnvironment);
      }
    }
    auto host = detectHost(runner_, arch, options_.cxx);
    if (!host) return host.failure();
    host_ = *host;

    auto registry = loadRegistry(root_, cuda_.sms);
    if (!registry) return usage(registry.error());
    registry_ = std::move(registry).value();
    auto plan = planBuild(registry_, parseGroupList(options_.kernels), sms_);
    if (!plan) return plan.failure();
    plan_ = std::move(plan).value();
    for (const auto& note : plan_.notes) sink_.note(note);

    for (const Variant* v : plan_.variants) {
      auto front_end = frontEndFor(v->kind);
      if (!front_end)
        return makeError(fmt::format("{}: {}", v->name, front_end.error()), front_end.errorKind());
      if (std::find(v->uses.begin(), v->uses.end(), "cutlass") != v->uses.end() &&
          cutlass_.include_dir.empty()) {
        auto cutlass = detectCutlass(root_, options_.cutlass_include);
        if (!cutlass)
          return makeError(fmt::format("group {} uses cutlass: {}", v->group, cutlass.error()),
                           cutlass.errorKind());
        cutlass_ = *cutlass;
      }
      // The DSL pins (version, CUDA major) are checked here, before anything is deleted.
      if (v->kind == SourceKind::kCuteDsl && cute_dsl_.version.empty()) {
        auto dsl = detectCuteDsl(runner_, root_, options_.python, cudaMajorOf(cuda_.version));
        if (!dsl)
          return makeError(fmt::format("group {} is cute_dsl: {}", v->group, dsl.error()),
                           dsl.errorKind());
        cute_dsl_ = *dsl;
      }
    }

    Provenance& p = metadata_.provenance;
    p.kiln_version = options_.kiln_version;
    p.arch = arch;
    p.host_target = host_.target;
    p.tag = artifactTag(sms_);
    p.gpu_archs = sms_;
    std::set<std::string> targets;
    for (const auto& job : plan_.jobs)
      targets.insert(nvccTarget(job.sm, job.variant->arch_specific, job.ptx));
    p.compile_targets.assign(targets.begin(), targets.end());
    p.cuda_version = cuda_.version;
    p.host_compiler_command = host_.cxx;
    p.host_compiler_version = host_.version;
    p.cutlass_version = cutlass_.version;

    const fs::path output =
        options_.output_dir.empty() ? root_ / "artifacts" : fs::absolute(options_.output_dir);
    artifact_dir_ = (output / arch / p.tag).lexically_normal();
    std::error_code ec;
    if (fs::exists(artifact_dir_, ec) && !options_.clean) {
      if (sms_.size() > 1) {
        // Contract 6: which SMs a merged variant would need is ambiguous (a variant rebuilt for
        // some SMs only, an old one missing an SM), so a multi-SM artifact is always whole.
        return usage(
            fmt::format("{} exists and multi-SM builds ({}) never merge into an existing "
                        "artifact; re-run with --clean to replace it",
                        artifact_dir_.string(), p.tag));
      }
      auto text = io::readFile(artifact_dir_ / kMetadataFile);
      if (!text) {
        return usage(fmt::format("{} exists but has no readable metadata.json; re-run with --clean",
                                 artifact_dir_.string()));
      }
      auto old = parseMetadata(*text);
      if (!old)
        return usage(
            fmt::format("{}: {}; re-run with --clean", artifact_dir_.string(), old.error()));
      if (auto ok = checkTag(old->provenance); !ok) {
        return usage(fmt::format("{}: metadata.json: {}; re-run with --clean",
                                 artifact_dir_.string(), ok.error()));
      }
      if (auto ok = checkMergeable(old->provenance, p); !ok) {
        return usage(fmt::format("cannot merge into {}: {}", artifact_dir_.string(), ok.error()));
      }
      old_ = std::move(old).value();
      merging_ = true;
    }
    return {};
  }

  // ---- 2. staging ------------------------------------------------------------------------
  Result<void> prepareStaging() {
    std::error_code ec;
    fs::create_directories(artifact_dir_.parent_path(), ec);
    if (ec) {
      return makeError(
          fmt::format("cannot create {}: {}", artifact_dir_.parent_path().string(), ec.message()));
    }
    removeAbandoned(artifact_dir_);
    staging_ = stagingDir(artifact_dir_, static_cast<int>(::getpid()));
    fs::remove_all(staging_, ec);
    for (const char* sub : {"cubins", "lib", "include/kiln", ".src", ".obj"}) {
      fs::create_directories(staging_ / sub, ec);
      if (ec)
        return makeError(
            fmt::format("cannot create {}: {}", (staging_ / sub).string(), ec.message()));
    }
    return {};
  }

  int jobs() const {
    if (options_.jobs > 0) return options_.jobs;
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }

  // The input files (core/inputs.h) of the group directory and of kernels/common/.
  Result<InputMap> groupInputs(const Group& group) {
    InputMap inputs;
    if (auto r = addInputs(group.dir, "kernels/" + group.name + "/", inputs, kNonKernelDirs); !r)
      return r.failure();
    if (auto r = addInputs(root_ / "kernels" / "common", "kernels/common/", inputs); !r)
      return r.failure();
    return inputs;
  }

  // A group's runner: kernels/<group>/runner/ (core/inputs.h), absent for a group without one.
  fs::path runnerDir(const std::string& group) const {
    return root_ / "kernels" / group / kRunnerDir;
  }

  // The runtime and runner sources compiled into lib/libkiln.a (generate()), keyed as in a kiln
  // checkout ("runtime/src/loader.cpp") wherever --runtime-dir points: the artifact's
  // `runtime_inputs`, which its fingerprint covers.
  Result<InputMap> runtimeInputs() const {
    InputMap inputs;
    for (const char* dir : {"include", "src"}) {
      if (auto r = addInputs(runtime_ / dir, fmt::format("runtime/{}/", dir), inputs); !r)
        return r.failure();
    }
    for (const auto& [group, g] : metadata_.groups) {
      auto r =
          addInputs(runnerDir(group), fmt::format("kernels/{}/{}/", group, kRunnerDir), inputs);
      if (!r) return r.failure();
    }
    return inputs;
  }

  // nvcc compiles a staged copy of the inputs (core/inputs.h), so that the path and the file
  // times of this checkout never reach an image's line table: per group with CUDA variants, and
  // the CUTLASS headers (pip writes them with the install's time, under the checkout's .venv).
  Result<void> stageSources(const std::map<std::string, InputMap>& group_inputs) {
    const fs::path stage_dir =
        fs::absolute(options_.stage_dir.empty() ? kDefaultStageDir : options_.stage_dir);
    for (const Group* group : plan_.groups) {
      if (group->kind != SourceKind::kCuda) continue;
      auto staged = stageInputs(root_, group_inputs.at(group->name), stage_dir);
      if (!staged) return staged.failure();
      staged_sources_[group->name] = *staged;
    }
    if (!cutlass_.include_dir.empty()) {
      InputMap headers;
      if (auto r = addInputs(cutlass_.include_dir, "", headers); !r) return r;
      auto staged = stageInputs(cutlass_.include_dir, headers, stage_dir);
      if (!staged) return staged.failure();
      staged_cutlass_include_ = *staged;
    }
    return {};
  }

  Result<void> compileCubins() {
    // Records first (inputs hashed once per group), so workers only fill in their own image.
    std::map<std::string, InputMap> group_inputs;
    for (const Group* group : plan_.groups) {
      auto inputs = groupInputs(*group);
      if (!inputs) return inputs.failure();
      group_inputs[group->name] = *inputs;
      for (const Variant* v : plan_.variants) {
        if (v->group != group->name) continue;
        VariantRecord& record = metadata_.variants[v->name];
        record.name = v->name;
        record.group = v->group;
        record.kind = sourceKindName(v->kind);
        record.entries = v->entries;
        record.constants = v->constants;
        record.inputs = *inputs;
      }
    }
    for (const auto& job : plan_.jobs) {
      ImageRecord& image = metadata_.variants[job.variant->name].images[job.sm];
      image.sm = job.sm;
      image.target = nvccTarget(job.sm, job.variant->arch_specific, job.ptx);
      image.format = job.ptx ? kFormatPtx : kFormatCubin;
      image.symbol = imageSymbol(job.variant->name, job.sm);
      image.cubin = imagePath(job.variant->name, job.sm, job.ptx);
    }
    for (const Variant* v : plan_.variants) {
      VariantRecord& record = metadata_.variants[v->name];
      record.fingerprint = variantFingerprint(record, *v, metadata_.provenance);
      if (v->kind == SourceKind::kCuteDsl)
        record.fingerprint = cuteDslFingerprint(record.fingerprint, cute_dsl_);
    }
    if (auto staged = stageSources(group_inputs); !staged) return staged;

    LockedSink sink(sink_);
    int done = 0;
    std::string slowest;
    double slowest_seconds = -1;
    const int total = static_cast<int>(plan_.jobs.size());
    auto compiled = parallelFor(plan_.jobs.size(), jobs(), [&](std::size_t i) -> Result<void> {
      const CompileJob& job = plan_.jobs[i];
      CompileRequest request;
      request.variant = job.variant;
      request.sm = job.sm;
      request.ptx = job.ptx;
      request.root = root_;
      if (auto staged = staged_sources_.find(job.variant->group); staged != staged_sources_.end()) {
        request.sources = staged->second;
      }
      request.cuda = &cuda_;
      request.cubin = staging_ / imagePath(job.variant->name, job.sm, job.ptx);
      request.cute_dsl = &cute_dsl_;
      request.scratch = staging_ / ".obj";
      if (std::find(job.variant->uses.begin(), job.variant->uses.end(), "cutlass") !=
          job.variant->uses.end()) {
        request.cutlass_include = staged_cutlass_include_;
      }
      const FrontEnd* front_end = *frontEndFor(job.variant->kind);
      const auto commands = front_end->commands(request);
      sink.with([&](BuildSink& s) {
        for (const auto& c : commands) s.command(c);
      });
      auto output = front_end->compile(request, runner_);
      if (!output) return output.failure();
      ImageAbi abi;
      abi.sm = job.sm;
      abi.ptx = job.ptx;
      auto bytes = io::readFile(request.cubin);
      if (!bytes)
        return makeError(fmt::format("{}: the compiler reported success but {}", job.variant->name,
                                     bytes.error()));
      if (job.ptx) {
        // cuModuleLoadData reads PTX up to its first NUL, so one inside the text would load a
        // truncated module; the shim appends the terminating NUL itself (codegen.cpp). Not ELF,
        // so no cubin ABI to read (cubin_abi.h): the entries of the text stand in for ptxas's.
        if (bytes->find('\0') != std::string::npos) {
          return makeError(
              fmt::format("{}: the PTX holds a NUL byte; the driver would load it truncated",
                          request.cubin.string()));
        }
        abi.ptxas_entries = output->ptx_entries;
      } else {
        auto machine = io::elfMachine(request.cubin);
        if (!machine)
          return makeError(fmt::format("{}: the compiler reported success but {}",
                                       job.variant->name, machine.error()));
        if (*machine != io::kElfMachineCuda) {
          return makeError(fmt::format("{}: ELF machine {} is not a CUDA cubin ({})",
                                       request.cubin.string(), *machine, io::kElfMachineCuda));
        }
        for (const auto& [entry, resources] : output->kernels) abi.ptxas_entries.push_back(entry);
        auto elf_abi = readCubinAbi(*bytes, request.cubin.string());
        if (!elf_abi) return elf_abi.failure();
        abi.elf = std::move(elf_abi).value();
      }
      sink.with([&](BuildSink& s) {
        abis_[job.variant->name].push_back(std::move(abi));
        // The record map is only read/written here under the sink lock once workers run.
        ImageRecord& image = metadata_.variants[job.variant->name].images[job.sm];
        image.sha256 = io::sha256Hex(*bytes);
        image.size = bytes->size();
        image.compile_seconds = output->seconds;
        // Recorded with the published path, not the staging one that is gone after the rename.
        image.command = output->commands.back();
        const std::string staged = staging_.string();
        for (auto& arg : image.command) {
          if (arg.rfind(staged, 0) == 0) arg = artifact_dir_.string() + arg.substr(staged.size());
        }
        image.kernels = output->kernels;
        summary_.built.emplace_back(job.variant->name, job.sm);
        ++done;
        if (output->seconds > slowest_seconds) {
          slowest_seconds = output->seconds;
          slowest = job.variant->name;
        }
        s.toolOutput(output->log);
        s.compiled({done, total, job.variant->name, output->target, output->seconds, slowest,
                    slowest_seconds});
      });
      return {};
    });
    if (!compiled) return compiled;
    return checkAbis();
  }

  // One header and one kiln_variant serve every SM image of a variant, so the images must agree
  // on their entry kernels and parameter layouts (contract 4); checked before anything is
  // generated, naming the variant and the two SMs.
  Result<void> checkAbis() {
    for (auto& [variant, images] : abis_) {
      std::sort(images.begin(), images.end(),
                [](const ImageAbi& a, const ImageAbi& b) { return a.sm < b.sm; });
      for (auto& image : images) std::sort(image.ptxas_entries.begin(), image.ptxas_entries.end());
      if (std::string why = compareImageAbis(variant, images); !why.empty())
        return makeError(std::move(why));
    }
    return {};
  }

  // ---- merge with the previous artifact ---------------------------------------------------
  Result<void> mergeOld() {
    if (merging_) {
      std::set<std::string> targets(metadata_.provenance.compile_targets.begin(),
                                    metadata_.provenance.compile_targets.end());
      for (const auto& [name, record] : old_.variants) {
        if (metadata_.variants.count(name) != 0) continue;  // rebuilt: the new one replaces it
        for (const auto& [sm, image] : record.images) {
          const fs::path from = artifact_dir_ / image.cubin;
          auto sha = io::sha256File(from);
          if (!sha) return sha.failure();
          if (*sha != image.sha256) {
            return usage(fmt::format(
                "{}: sha256 {} differs from its metadata.json ({}); the old artifact was "
                "modified; re-run with --clean",
                from.string(), *sha, image.sha256));
          }
          if (auto copied = io::copyFile(from, staging_ / image.cubin); !copied) return copied;
          targets.insert(image.target);
        }
        metadata_.variants[name] = record;
        summary_.kept.push_back(name);
      }
      metadata_.provenance.compile_targets.assign(targets.begin(), targets.end());
      if (!metadata_.provenance.cutlass_version)
        metadata_.provenance.cutlass_version = old_.provenance.cutlass_version;
      metadata_.groups = old_.groups;
    }
    for (const Group* group : plan_.groups) {
      GroupRecord& g = metadata_.groups[group->name];
      g.kind = sourceKindName(group->kind);
      g.supported_sms = group->supported_sms;
    }
    for (auto& [name, g] : metadata_.groups) g.variants.clear();
    for (const auto& [name, v] : metadata_.variants)
      metadata_.groups[v.group].variants.push_back(name);
    // Duplicate C symbols fail the build (contract 4); names are unique by the registry, but a
    // merged old variant could collide with a renamed new one.
    std::map<std::string, std::string> owners;
    for (const auto& [name, v] : metadata_.variants) {
      std::vector<std::string> symbols = {variantSymbol(name)};
      for (const auto& [sm, image] : v.images) symbols.push_back(image.symbol);
      for (const auto& symbol : symbols) {
        auto [it, inserted] = owners.emplace(symbol, name);
        if (!inserted) {
          return makeError(fmt::format("duplicate global symbol {} (variants {} and {})", symbol,
                                       it->second, name));
        }
      }
    }
    auto runtime = runtimeInputs();
    if (!runtime) return runtime.failure();
    metadata_.runtime_inputs = std::move(runtime).value();
    metadata_.fingerprint = artifactFingerprint(metadata_);
    return {};
  }

  // ---- generated sources and headers ------------------------------------------------------
  Result<void> generate() {
    auto write = [&](const std::string& rel, const std::string& text) {
      return io::writeFile(staging_ / rel, text);
    };
    for (const auto& [name, v] : metadata_.variants) {
      if (auto r = write(variantHeaderPath(name), variantHeader(v)); !r) return r;
      for (const auto& [sm, image] : v.images) {
        auto bytes = io::readFile(staging_ / image.cubin);
        if (!bytes) return bytes.failure();
        const std::string stem = imageStem(name, sm, image.isPtx());
        const std::string rel = ".src/" + stem + ".cpp";
        if (auto r = write(rel, imageShimSource(v, image, *bytes)); !r) return r;
        host_compiles_.push_back({staging_ / rel, staging_ / (".obj/" + stem + ".o"), {}});
      }
      const std::string rel = fmt::format(".src/{}.cpp", name);
      if (auto r = write(rel, variantShimSource(v)); !r) return r;
      host_compiles_.push_back({staging_ / rel, staging_ / fmt::format(".obj/{}.o", name), {}});
    }
    for (const auto& [group, g] : metadata_.groups) {
      std::vector<const VariantRecord*> records;
      for (const auto& name : g.variants) records.push_back(&metadata_.variants.at(name));
      const bool runner_types =
          fs::exists(runnerDir(group) / "include/kiln/runners" / (group + ".h"));
      if (auto r = write(groupHeaderPath(group), groupHeader(group, g, records, runner_types)); !r)
        return r;
    }
    if (auto r = write(kAllHeaderPath, allHeader(metadata_)); !r) return r;
    if (auto r = write(".src/kiln_artifact.cpp", artifactTableSource(metadata_)); !r) return r;
    host_compiles_.push_back(
        {staging_ / ".src/kiln_artifact.cpp", staging_ / ".obj/kiln_artifact.o", {}});

    // The runtime and the runners of the artifact's groups, headers and sources.
    if (auto r = io::copyTree(runtime_ / "include/kiln", staging_ / "include/kiln"); !r) return r;
    for (const auto& file : io::listFiles(runtime_ / "src")) {
      if (file.extension() != ".cpp" || file.parent_path() != runtime_ / "src") continue;
      host_compiles_.push_back(
          {file, staging_ / ".obj" / ("runtime_" + file.stem().string() + ".o"), {}});
    }
    for (const auto& [group, g] : metadata_.groups) {
      const fs::path dir = runnerDir(group);
      if (!fs::is_directory(dir)) continue;
      if (auto r = io::copyTree(dir / "include/kiln", staging_ / "include/kiln"); !r) return r;
      // Sorted (listFiles), so the library's members are in the same order in every checkout.
      for (const auto& file : io::listFiles(dir)) {
        if (file.extension() != ".cpp" || file.parent_path() != dir) continue;
        host_compiles_.push_back(
            {file,
             staging_ / ".obj" / fmt::format("runner_{}_{}.o", group, file.stem().string()),
             {dir / "include"}});
      }
    }
    return {};
  }

  // ---- host library -----------------------------------------------------------------------
  std::vector<std::string> hostCommand(const HostCompile& c) const {
    // The runtime's __FILE__ (KILN_CU_CHECK) is recorded as runtime/..., not this checkout's path,
    // so that the library's bytes do not depend on where the checkout is.
    std::vector<std::string> argv = {
        host_.cxx,
        "-std=c++20",
        "-O2",
        "-fPIC",
        "-ffile-prefix-map=" + runtime_.string() + "=runtime",
        "-ffile-prefix-map=" + (root_ / "kernels").string() + "=kernels",
        "-I",
        (staging_ / "include").string(),
        "-I",
        (runtime_ / "include").string(),
        "-I",
        (runtime_ / "src").string(),
        "-I",
        (root_ / "kernels").string()};
    for (const auto& dir : c.extra_includes) {
      argv.push_back("-I");
      argv.push_back(dir.string());
    }
    argv.push_back("-I");
    argv.push_back(cuda_.include_dir.string());
    argv.push_back("-c");
    argv.push_back(c.source.string());
    argv.push_back("-o");
    argv.push_back(c.object.string());
    return argv;
  }

  Result<void> buildLibrary() {
    LockedSink sink(sink_);
    auto compiled = parallelFor(host_compiles_.size(), jobs(), [&](std::size_t i) -> Result<void> {
      const auto argv = hostCommand(host_compiles_[i]);
      sink.with([&](BuildSink& s) { s.command(argv); });
      auto result = runner_.run(argv);
      if (!result) return result.failure();
      if (result->exit_code != 0) {
        return makeError(fmt::format("{} failed compiling {} (exit code {}):\n{}{}", host_.cxx,
                                     host_compiles_[i].source.string(), result->exit_code,
                                     result->stdout_text, result->stderr_text));
      }
      return {};
    });
    if (!compiled) return compiled;

    const int expected = host_.arch == "aarch64" ? io::kElfMachineAarch64 : io::kElfMachineX86_64;
    std::map<std::string, fs::path> owners;
    // D: every member with time, uid and gid 0 (GNU ar's default on Debian, not everywhere).
    std::vector<std::string> ar = {host_.ar, "rcsD", (staging_ / kLibraryPath).string()};
    for (const auto& c : host_compiles_) {
      auto machine = io::elfMachine(c.object);
      if (!machine) return machine.failure();
      if (*machine != expected) {
        return makeError(fmt::format("{}: ELF machine {} but --arch {} needs {}", c.object.string(),
                                     *machine, host_.arch, expected));
      }
      auto symbols = io::elfGlobalSymbols(c.object);
      if (!symbols) return symbols.failure();
      for (const auto& symbol : *symbols) {
        auto [it, inserted] = owners.emplace(symbol, c.source);
        if (!inserted) {
          return makeError(fmt::format("duplicate global symbol {}: defined by {} and {}", symbol,
                                       it->second.string(), c.source.string()));
        }
      }
      ar.push_back(c.object.string());
    }
    sink_.command(ar);
    auto archived = runner_.run(ar);
    if (!archived) return archived.failure();
    if (archived->exit_code != 0) {
      return makeError(fmt::format("{} failed (exit code {}): {}", host_.ar, archived->exit_code,
                                   archived->stderr_text));
    }
    auto bytes = io::readFile(staging_ / kLibraryPath);
    if (!bytes) return bytes.failure();
    metadata_.library.path = kLibraryPath;
    metadata_.library.sha256 = io::sha256Hex(*bytes);
    metadata_.library.size = bytes->size();
    return {};
  }

  Result<void> writeMetadata() {
    metadata_.build_date = utcNow();
    std::error_code ec;
    fs::remove_all(staging_ / ".src", ec);
    fs::remove_all(staging_ / ".obj", ec);
    return io::writeFile(staging_ / kMetadataFile, toJson(metadata_));
  }

  // ---- 3. publish ----------------------------------------------------------------------
  Result<void> publish() {
    std::error_code ec;
    const fs::path aside = artifact_dir_.parent_path() /
                           fmt::format(".{}.old-{}", artifact_dir_.filename().string(), ::getpid());
    const bool had_old = fs::exists(artifact_dir_, ec);
    if (had_old) {
      fs::rename(artifact_dir_, aside, ec);
      if (ec)
        return makeError(
            fmt::format("cannot move {} aside: {}", artifact_dir_.string(), ec.message()));
    }
    fs::rename(staging_, artifact_dir_, ec);
    if (ec) {
      std::error_code restore;
      if (had_old) fs::rename(aside, artifact_dir_, restore);
      return makeError(fmt::format("cannot rename {} to {}: {}", staging_.string(),
                                   artifact_dir_.string(), ec.message()));
    }
    if (had_old) fs::remove_all(aside, ec);
    return {};
  }

  const BuildOptions& options_;
  io::ProcessRunner& runner_;
  BuildSink& sink_;

  std::vector<GpuArch> sms_;
  fs::path root_;
  fs::path runtime_;
  CudaToolchain cuda_;
  HostToolchain host_;
  CutlassHeaders cutlass_;
  CuteDslToolchain cute_dsl_;  // detected only when a cute_dsl variant is planned
  std::map<std::string, fs::path>
      staged_sources_;               // CUDA group -> its staged inputs (stageSources)
  fs::path staged_cutlass_include_;  // the staged CUTLASS headers, when a group uses them
  Registry registry_;
  BuildPlan plan_;
  fs::path artifact_dir_;
  fs::path staging_;
  bool merging_ = false;
  ArtifactMetadata old_;
  ArtifactMetadata metadata_;
  std::vector<HostCompile> host_compiles_;
  std::map<std::string, std::vector<ImageAbi>> abis_;  // variant -> its images compiled now
  BuildSummary summary_;
};

}  // namespace

Result<BuildSummary> runBuild(const BuildOptions& options, io::ProcessRunner& runner,
                              BuildSink& sink) {
  return Builder(options, runner, sink).run();
}

}  // namespace kiln::core
