// Read (see build_inputs.h): each step below reads one kind of thing and fails with the message
// the user needs, in the order of docs/cli.md.
#include "core/build_inputs.h"

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/frontend.h"
#include "core/naming.h"

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

Error usage(std::string message) {
  return makeError(std::move(message), ErrorKind::kUsage);
}

// --root must hold kernels/, the runtime directory include/kiln/, src/ and doctor/.
Result<void> resolvePaths(const BuildOptions& options, BuildInputs& in) {
  in.root = fs::absolute(options.root).lexically_normal();
  if (!fs::is_directory(in.root / "kernels")) {
    return usage(fmt::format("--root {}: no kernels/ directory there", in.root.string()));
  }
  in.runtime_dir = options.runtime_dir.empty()
                       ? in.root / "runtime"
                       : fs::absolute(options.runtime_dir).lexically_normal();
  for (const char* dir : {"include/kiln", "src", "doctor"}) {
    if (!fs::is_directory(in.runtime_dir / dir)) {
      return usage(fmt::format("runtime directory {}: no {}/ there (see --runtime-dir)",
                               in.runtime_dir.string(), dir));
    }
  }
  in.stage_dir = fs::absolute(options.stage_dir.empty() ? kDefaultStageDir : options.stage_dir);
  in.jobs = options.jobs > 0 ? options.jobs
                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  in.kiln_version = options.kiln_version;
  in.arch = options.arch.empty() ? hostArch() : options.arch;
  return {};
}

// The compiler launcher, when there is one; nvcc, which must target every --gpu-arch entry;
// and the host compiler of the arch.
Result<void> detectCompilers(const BuildOptions& options, const std::vector<GpuArch>& sms,
                             io::ProcessRunner& runner, BuildInputs& in) {
  if (!options.compiler_launcher.empty()) {
    auto launcher = checkLauncher(runner, options.compiler_launcher);
    if (!launcher) return launcher.failure();
    in.tools.launcher = *launcher;
  }
  auto cuda = selectCuda(runner, {options.nvcc, options.cuda_home, options.cuda12_home}, in.root,
                         options.cuda_major);
  if (!cuda) return cuda.failure();
  in.tools.cuda = *cuda;
  const CudaToolchain& nvcc = in.tools.cuda;
  for (const GpuArch& target : sms) {
    // compute_NN is checked against `--list-gpu-code` too: every nvcc lists compute_NN for each
    // sm_NN it can compile (CUDA 13.0: the same twelve numbers), and a virtual architecture
    // without a real one is of no use to kiln.
    if (std::find(nvcc.sms.begin(), nvcc.sms.end(), target.sm) == nvcc.sms.end()) {
      if (nvcc.split()) {
        return makeError(
            fmt::format("--gpu-arch {}: CUDA {} (ptxas {}) cannot target it (it targets sm_{})",
                        gpuArchName(target), nvcc.version, nvcc.ptxas,
                        fmt::join(nvcc.sms, ", sm_")),
            ErrorKind::kEnvironment);
      }
      return makeError(fmt::format("--gpu-arch {}: nvcc {} cannot target it (it targets sm_{})",
                                   gpuArchName(target), nvcc.version, fmt::join(nvcc.sms, ", sm_")),
                       ErrorKind::kEnvironment);
    }
  }
  auto host = detectHost(runner, in.arch, options.cxx);
  if (!host) return host.failure();
  in.tools.host = *host;
  return {};
}

// What the selected variants need besides nvcc: a front end for their kind, the CUTLASS headers
// when they use them, and the CuTe DSL at its pins (version, CUDA major).
Result<void> detectVariantTools(const BuildOptions& options, io::ProcessRunner& runner,
                                BuildInputs& in) {
  BuildTools& tools = in.tools;
  for (const Variant* v : in.selection.variants) {
    auto front_end = frontEndFor(v->kind);
    if (!front_end)
      return makeError(fmt::format("{}: {}", v->name, front_end.error()), front_end.errorKind());
    if (std::find(v->uses.begin(), v->uses.end(), "cutlass") != v->uses.end() &&
        tools.cutlass.include_dir.empty()) {
      auto cutlass = detectCutlass(in.root, options.cutlass_include);
      if (!cutlass)
        return makeError(fmt::format("group {} uses cutlass: {}", v->group, cutlass.error()),
                         cutlass.errorKind());
      tools.cutlass = *cutlass;
    }
    if (v->kind == SourceKind::kCuteDsl && tools.cute_dsl.version.empty()) {
      auto dsl = detectCuteDsl(runner, in.root, options.python, cudaMajorOf(tools.cuda.version));
      if (!dsl)
        return makeError(fmt::format("group {} is cute_dsl: {}", v->group, dsl.error()),
                         dsl.errorKind());
      tools.cute_dsl = *dsl;
    }
  }
  return {};
}

// The existing artifact when the build merges into it: none with --clean or where there is none.
// Its metadata must be readable and its tag consistent; whether its provenance matches this
// build's is the plan's check (checkMergeable).
Result<std::optional<ArtifactMetadata>> readOldArtifact(io::FileSystem& files,
                                                        const fs::path& artifact_dir,
                                                        const std::vector<GpuArch>& sms,
                                                        bool clean) {
  if (clean || !files.exists(artifact_dir)) return std::optional<ArtifactMetadata>();
  if (sms.size() > 1) {
    // Which SMs a merged variant would need is ambiguous (a variant rebuilt for some SMs only,
    // an old one missing an SM), so a multi-SM artifact is always whole.
    return usage(
        fmt::format("{} exists and multi-SM builds ({}) never merge into an existing "
                    "artifact; re-run with --clean to replace it",
                    artifact_dir.string(), artifactTag(sms)));
  }
  auto text = files.readFile(artifact_dir / kMetadataFile);
  if (!text) {
    return usage(fmt::format("{} exists but has no readable metadata.json; re-run with --clean",
                             artifact_dir.string()));
  }
  auto old = parseMetadata(*text);
  if (!old)
    return usage(fmt::format("{}: {}; re-run with --clean", artifact_dir.string(), old.error()));
  if (auto ok = checkTag(old->provenance); !ok) {
    return usage(fmt::format("{}: metadata.json: {}; re-run with --clean", artifact_dir.string(),
                             ok.error()));
  }
  return std::optional<ArtifactMetadata>(std::move(old).value());
}

// The input files of each selected group: its folder (core/inputs.h) and kernels/common/.
Result<void> readGroupInputs(BuildInputs& in) {
  for (const Group* group : in.selection.groups) {
    InputMap& inputs = in.group_inputs[group->name];
    if (auto r = addInputs(group->dir, "kernels/" + group->name + "/", inputs, kNonKernelDirs); !r)
      return r;
    if (auto r = addInputs(in.root / "kernels" / "common", "kernels/common/", inputs); !r) return r;
  }
  return {};
}

// Every file under `dir`, as `under` followed by its path relative to `dir`.
Result<void> readTree(const fs::path& dir, const std::string& under,
                      std::vector<ArtifactFile>& files) {
  for (const auto& file : io::listFiles(dir)) {
    auto bytes = io::readFile(file);
    if (!bytes) return bytes.failure();
    files.push_back({under + fs::relative(file, dir).generic_string(), std::move(bytes).value()});
  }
  return {};
}

// The *.cpp files directly in `dir`, sorted (listFiles), so that the library's members are in the
// same order in every checkout.
std::vector<fs::path> cppFiles(const fs::path& dir) {
  std::vector<fs::path> sources;
  for (const auto& file : io::listFiles(dir)) {
    if (file.extension() == ".cpp" && file.parent_path() == dir) sources.push_back(file);
  }
  return sources;
}

// The runtime and the runners of `groups`. The inputs are keyed as in a kiln checkout
// ("runtime/src/loader.cpp") wherever --runtime-dir points.
Result<RuntimeSources> readRuntimeSources(const BuildInputs& in,
                                          const std::set<std::string>& groups) {
  RuntimeSources runtime;
  for (const char* dir : {"include", "src", "doctor"}) {
    if (auto r = addInputs(in.runtime_dir / dir, fmt::format("runtime/{}/", dir), runtime.inputs);
        !r)
      return r.failure();
  }
  if (auto r = readTree(in.runtime_dir / "include/kiln", "include/kiln/", runtime.headers); !r)
    return r.failure();
  runtime.sources = cppFiles(in.runtime_dir / "src");
  runtime.doctor = in.runtime_dir / kDoctorSource;
  if (!fs::is_regular_file(runtime.doctor)) {
    return usage(fmt::format("runtime directory {}: no {} there (see --runtime-dir)",
                             in.runtime_dir.string(), kDoctorSource));
  }
  for (const std::string& group : groups) {
    const fs::path dir = in.root / "kernels" / group / kRunnerDir;
    auto r = addInputs(dir, fmt::format("kernels/{}/{}/", group, kRunnerDir), runtime.inputs);
    if (!r) return r.failure();
    if (!fs::is_directory(dir)) continue;
    RunnerSources& runner = runtime.runners[group];
    runner.dir = dir;
    if (auto read = readTree(dir / "include/kiln", "include/kiln/", runner.headers); !read)
      return read.failure();
    runner.sources = cppFiles(dir);
  }
  return runtime;
}

}  // namespace

Result<BuildInputs> readBuildInputs(const BuildOptions& options, io::ProcessRunner& runner,
                                    io::FileSystem& files, const BuildProcess& process,
                                    BuildSink& sink) {
  auto sms = parseGpuArchs(options.gpu_arch);
  if (!sms) return sms.failure();
  BuildInputs in;
  if (auto r = resolvePaths(options, in); !r) return r.failure();
  if (auto r = detectCompilers(options, *sms, runner, in); !r) return r.failure();

  // kiln.toml's supported_sms are checked against CUDA 13's nvcc (a typo check); an older toolkit
  // knows fewer SMs (CUDA 12.6: none past sm_90), which is no fault of the registry: its
  // --gpu-arch entries were checked above, and a variant's other SMs are not built.
  auto registry = loadRegistry(
      in.root, in.tools.cuda.major() == kDefaultCudaMajor ? in.tools.cuda.sms : std::vector<int>{});
  if (!registry) return usage(registry.error());
  in.registry = std::move(registry).value();
  auto selection = planBuild(in.registry, parseGroupList(options.kernels), *sms);
  if (!selection) return selection.failure();
  in.selection = std::move(selection).value();
  for (const auto& note : in.selection.notes) sink.note(note);
  if (auto r = detectVariantTools(options, runner, in); !r) return r.failure();

  const fs::path output =
      options.output_dir.empty() ? in.root / "artifacts" : fs::absolute(options.output_dir);
  in.artifact_dir = (output / in.arch / artifactTag(*sms)).lexically_normal();
  if (auto r = restoreSetAside(files, in.artifact_dir, process); !r) return r.failure();
  auto old = readOldArtifact(files, in.artifact_dir, *sms, options.clean);
  if (!old) return old.failure();
  in.old = std::move(old).value();

  if (auto r = readGroupInputs(in); !r) return r.failure();
  // The artifact's groups: those built now and, in a merge, the existing artifact's.
  std::set<std::string> groups;
  for (const Group* group : in.selection.groups) groups.insert(group->name);
  if (in.old) {
    for (const auto& [name, group] : in.old->groups) groups.insert(name);
  }
  auto runtime = readRuntimeSources(in, groups);
  if (!runtime) return runtime.failure();
  in.runtime = std::move(runtime).value();
  return in;
}

}  // namespace kiln::core
