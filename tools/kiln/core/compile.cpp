// Compile (see compile.h). Workers write only their own slot of the results; the sink, the
// progress count and the slowest image are shared, behind one lock.
#include "core/compile.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "core/cubin_abi.h"
#include "core/elf.h"
#include "core/frontend.h"
#include "core/inputs.h"
#include "core/library_recipe.h"
#include "core/naming.h"
#include "core/parallel.h"
#include "core/publish.h"
#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

// The compiler launcher (BuildOptions::compiler_launcher) goes in front of a command whose
// program is nvcc or the host compiler, and of no other (ar, a cute_dsl script). Only the
// commands as run carry it: the metadata records them without it, so the artifact does not
// depend on whether or how the compiles were cached.
std::vector<std::string> launched(const BuildTools& tools, const std::vector<std::string>& argv) {
  if (tools.launcher.empty() || argv.empty() ||
      (argv[0] != tools.cuda.nvcc && argv[0] != tools.host.cxx))
    return argv;
  std::vector<std::string> with = {tools.launcher};
  with.insert(with.end(), argv.begin(), argv.end());
  return with;
}

// The runner the compiles go through: `runner` with the launcher put in front (launched()).
class LaunchingRunner final : public io::ProcessRunner {
 public:
  LaunchingRunner(const BuildTools& tools, io::ProcessRunner& runner)
      : tools_(tools), runner_(runner) {}
  Result<io::ProcessResult> run(const std::vector<std::string>& argv) override {
    return runner_.run(launched(tools_, argv));
  }
  bool available(const std::string& program) override { return runner_.available(program); }

 private:
  const BuildTools& tools_;
  io::ProcessRunner& runner_;
};

// The sink as the workers share it: its calls serialised, and the count of compiled images and
// the slowest so far for the progress lines. Commands reach it as they run (with the launcher).
class SharedSink {
 public:
  // `images`: how many compiled() counts to.
  SharedSink(BuildSink& sink, const BuildTools& tools, int images = 0)
      : sink_(sink), tools_(tools), total_(images) {}

  void commands(const std::vector<std::vector<std::string>>& argvs) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& argv : argvs) sink_.command(launched(tools_, argv));
  }
  void compiled(const std::string& variant, const CompileOutput& output) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    if (output.seconds > slowest_seconds_) {
      slowest_seconds_ = output.seconds;
      slowest_ = variant;
    }
    sink_.toolOutput(output.log);
    sink_.compiled(
        {done_, total_, variant, output.target, output.seconds, slowest_, slowest_seconds_});
  }

 private:
  BuildSink& sink_;
  const BuildTools& tools_;
  std::mutex mutex_;
  const int total_;
  int done_ = 0;
  std::string slowest_;
  double slowest_seconds_ = -1;
};

// Where nvcc reads the sources: a staged copy (core/inputs.h) per CUDA group, so that the path
// and the file times of this checkout never reach an image's line table, and one of the CUTLASS
// headers (pip writes them with the install's time, under the checkout's .venv).
struct StagedSources {
  std::map<std::string, fs::path> groups;
  fs::path cutlass_include;  // empty unless a selected group uses CUTLASS
};

Result<StagedSources> stageSources(const BuildInputs& in) {
  StagedSources staged;
  for (const Group* group : in.selection.groups) {
    if (group->kind != SourceKind::kCuda) continue;
    auto dir = stageInputs(in.root, in.group_inputs.at(group->name), in.stage_dir);
    if (!dir) return dir.failure();
    staged.groups[group->name] = *dir;
  }
  const fs::path& cutlass = in.tools.cutlass.include_dir;
  if (!cutlass.empty()) {
    InputMap headers;
    if (auto r = addInputs(cutlass, "", headers); !r) return r.failure();
    auto dir = stageInputs(cutlass, headers, in.stage_dir);
    if (!dir) return dir.failure();
    staged.cutlass_include = *dir;
  }
  return staged;
}

CompileRequest requestFor(const BuildInputs& in, const StagedSources& staged,
                          const fs::path& staging, const CompileJob& job) {
  CompileRequest request;
  request.variant = job.variant;
  request.sm = job.sm;
  request.ptx = job.ptx;
  request.root = in.root;
  if (auto sources = staged.groups.find(job.variant->group); sources != staged.groups.end())
    request.sources = sources->second;
  request.cuda = &in.tools.cuda;
  request.cubin = staging / imagePath(job.variant->name, job.sm, job.ptx);
  request.cute_dsl = &in.tools.cute_dsl;
  request.scratch = staging / kObjectScratch;
  const auto& uses = job.variant->uses;
  if (std::find(uses.begin(), uses.end(), "cutlass") != uses.end())
    request.cutlass_include = staged.cutlass_include;
  return request;
}

// Checks the image the front end wrote (`bytes`, read from request.cubin) and returns its ABI.
Result<ImageAbi> checkImage(const CompileRequest& request, const CompileOutput& output,
                            const std::string& bytes) {
  ImageAbi abi;
  abi.sm = request.sm;
  abi.ptx = request.ptx;
  if (request.ptx) {
    // cuModuleLoadData reads PTX up to its first NUL, so one inside the text would load a
    // truncated module; the shim appends the terminating NUL itself (codegen.cpp). Not ELF,
    // so no cubin ABI to read (cubin_abi.h): the entries of the text stand in for ptxas's.
    if (bytes.find('\0') != std::string::npos) {
      return makeError(
          fmt::format("{}: the PTX holds a NUL byte; the driver would load it truncated",
                      request.cubin.string()));
    }
    abi.ptxas_entries = output.ptx_entries;
    return abi;
  }
  auto header = readElfHeader(bytes, request.cubin.string());
  if (!header)
    return makeError(fmt::format("{}: the compiler reported success but {}", request.variant->name,
                                 header.error()));
  if (header->machine != kElfMachineCuda) {
    return makeError(fmt::format("{}: ELF machine {} is not a CUDA cubin ({})",
                                 request.cubin.string(), header->machine, kElfMachineCuda));
  }
  for (const auto& [entry, resources] : output.kernels) abi.ptxas_entries.push_back(entry);
  auto elf = readCubinAbi(bytes, request.cubin.string());
  if (!elf) return elf.failure();
  abi.elf = std::move(elf).value();
  return abi;
}

// Runs `request`'s front end, fills in `image` and returns the image's ABI.
Result<ImageAbi> compileImage(const CompileRequest& request, const fs::path& artifact_dir,
                              const fs::path& staging, io::ProcessRunner& runner, SharedSink& sink,
                              CompiledImage& image) {
  const FrontEnd* front_end = *frontEndFor(request.variant->kind);
  sink.commands(front_end->commands(request));
  auto output = front_end->compile(request, runner);
  if (!output) return output.failure();
  auto bytes = io::readFile(request.cubin);
  if (!bytes) {
    return makeError(fmt::format("{}: the compiler reported success but {}", request.variant->name,
                                 bytes.error()));
  }
  auto abi = checkImage(request, *output, *bytes);
  if (!abi) return abi.failure();
  image.variant = request.variant->name;
  image.sm = request.sm;
  image.bytes = std::move(bytes).value();
  image.seconds = output->seconds;
  image.kernels = output->kernels;
  // Recorded with the published path, not the staging one that is gone after the rename.
  image.command = output->commands.back();
  for (auto& arg : image.command) {
    if (arg.rfind(staging.string(), 0) == 0)
      arg = artifact_dir.string() + arg.substr(staging.string().size());
  }
  sink.compiled(image.variant, *output);
  return abi;
}

// One header and one kiln_variant serve every SM image of a variant, so the images must agree
// on their entry kernels and parameter layouts (contract 4); checked before anything is
// generated, naming the variant and the two SMs. `abis` are in the jobs' order, so each
// variant's images come by SM, and their entries are sorted (ptxas's report is a map, the PTX's
// entries a sorted list).
Result<void> checkAbis(const std::vector<CompiledImage>& images, std::vector<ImageAbi> abis) {
  std::map<std::string, std::vector<ImageAbi>> by_variant;
  for (std::size_t i = 0; i < images.size(); ++i)
    by_variant[images[i].variant].push_back(std::move(abis[i]));
  for (const auto& [variant, variant_abis] : by_variant) {
    if (std::string why = compareImageAbis(variant, variant_abis); !why.empty())
      return makeError(std::move(why));
  }
  return {};
}

std::vector<std::string> hostCommand(const BuildInputs& in, const fs::path& staging,
                                     const LibraryMember& member) {
  std::vector<std::string> argv = {in.tools.host.cxx};
  argv.insert(argv.end(), kHostCompileFlags.begin(), kHostCompileFlags.end());
  // The runtime's __FILE__ (KILN_CU_CHECK) is recorded as runtime/..., not this checkout's path,
  // so that the library's bytes do not depend on where the checkout is.
  argv.push_back("-ffile-prefix-map=" + in.runtime_dir.string() + "=runtime");
  argv.push_back("-ffile-prefix-map=" + (in.root / "kernels").string() + "=kernels");
  std::vector<fs::path> includes = {staging / "include", in.runtime_dir / "include",
                                    in.runtime_dir / "src", in.root / "kernels"};
  includes.insert(includes.end(), member.includes.begin(), member.includes.end());
  includes.push_back(in.tools.cuda.include_dir);
  for (const auto& dir : includes) {
    argv.push_back("-I");
    argv.push_back(dir.string());
  }
  argv.insert(argv.end(),
              {"-c", (staging / member.source).string(), "-o", (staging / member.object).string()});
  return argv;
}

// Every object must be for the library's arch, and no global symbol may be defined twice.
Result<void> checkObjects(const BuildInputs& in, const std::vector<LibraryMember>& members,
                          const fs::path& staging) {
  const HostToolchain& host = in.tools.host;
  const int expected = host.arch == "aarch64" ? kElfMachineAarch64 : kElfMachineX86_64;
  std::map<std::string, fs::path> owners;
  for (const LibraryMember& member : members) {
    const fs::path object = staging / member.object;
    auto bytes = io::readFile(object);
    if (!bytes) return bytes.failure();
    auto header = readElfHeader(*bytes, object.string());
    if (!header) return header.failure();
    if (header->machine != expected) {
      return makeError(fmt::format("{}: ELF machine {} but --arch {} needs {}", object.string(),
                                   header->machine, host.arch, expected));
    }
    auto symbols = elfGlobalSymbolsOf(*bytes, object.string());
    if (!symbols) return symbols.failure();
    const fs::path source = staging / member.source;
    for (const auto& symbol : *symbols) {
      auto [it, inserted] = owners.emplace(symbol, source);
      if (!inserted) {
        return makeError(fmt::format("duplicate global symbol {}: defined by {} and {}", symbol,
                                     it->second.string(), source.string()));
      }
    }
  }
  return {};
}

}  // namespace

Result<std::vector<CompiledImage>> compileImages(const BuildInputs& in, const fs::path& staging,
                                                 io::ProcessRunner& runner, BuildSink& sink) {
  auto staged = stageSources(in);
  if (!staged) return staged.failure();
  const std::vector<CompileJob>& jobs = in.selection.jobs;
  std::vector<CompiledImage> images(jobs.size());
  std::vector<ImageAbi> abis(jobs.size());
  SharedSink shared(sink, in.tools, static_cast<int>(jobs.size()));
  LaunchingRunner launching(in.tools, runner);
  auto compiled = parallelFor(jobs.size(), in.jobs, [&](std::size_t i) -> Result<void> {
    const CompileRequest request = requestFor(in, *staged, staging, jobs[i]);
    auto abi = compileImage(request, in.artifact_dir, staging, launching, shared, images[i]);
    if (!abi) return abi.failure();
    abis[i] = std::move(abi).value();
    return {};
  });
  if (!compiled) return compiled.failure();
  if (auto same = checkAbis(images, std::move(abis)); !same) return same.failure();
  return images;
}

Result<LibraryRecord> compileLibrary(const BuildInputs& in,
                                     const std::vector<LibraryMember>& members,
                                     const fs::path& staging, io::ProcessRunner& runner,
                                     BuildSink& sink) {
  const HostToolchain& host = in.tools.host;
  SharedSink shared(sink, in.tools);
  auto compiled = parallelFor(members.size(), in.jobs, [&](std::size_t i) -> Result<void> {
    const auto argv = hostCommand(in, staging, members[i]);
    shared.commands({argv});
    auto result = runner.run(launched(in.tools, argv));
    if (!result) return result.failure();
    if (result->exit_code != 0) {
      return makeError(fmt::format("{} failed compiling {} (exit code {}):\n{}{}", host.cxx,
                                   (staging / members[i].source).string(), result->exit_code,
                                   result->stdout_text, result->stderr_text));
    }
    return {};
  });
  if (!compiled) return compiled.failure();
  if (auto checked = checkObjects(in, members, staging); !checked) return checked.failure();

  // D: every member with time, uid and gid 0 (GNU ar's default on Debian, not everywhere).
  std::vector<std::string> ar = {host.ar, kArchiveFlags, (staging / kLibraryPath).string()};
  for (const LibraryMember& member : members) ar.push_back((staging / member.object).string());
  sink.command(ar);
  auto archived = runner.run(ar);
  if (!archived) return archived.failure();
  if (archived->exit_code != 0) {
    return makeError(fmt::format("{} failed (exit code {}): {}", host.ar, archived->exit_code,
                                 archived->stderr_text));
  }
  auto bytes = io::readFile(staging / kLibraryPath);
  if (!bytes) return bytes.failure();
  LibraryRecord library;
  library.path = kLibraryPath;
  library.sha256 = io::sha256Hex(*bytes);
  library.size = bytes->size();
  return library;
}

Result<DoctorRecord> compileDoctor(const BuildInputs& in, const fs::path& staging,
                                   io::ProcessRunner& runner, BuildSink& sink) {
  const HostToolchain& host = in.tools.host;
  const LibraryMember main = {
      in.runtime.doctor, fmt::format("{}/kiln_doctor.o", kObjectScratch), {}};
  const auto compile = hostCommand(in, staging, main);
  sink.command(launched(in.tools, compile));
  auto compiled = runner.run(launched(in.tools, compile));
  if (!compiled) return compiled.failure();
  if (compiled->exit_code != 0) {
    return makeError(fmt::format("{} failed compiling {} (exit code {}):\n{}{}", host.cxx,
                                 main.source.string(), compiled->exit_code, compiled->stdout_text,
                                 compiled->stderr_text));
  }
  // The link runs without the compiler launcher: ccache and sccache do not cache links.
  std::vector<std::string> link = {host.cxx, "-o", (staging / kDoctorPath).string(),
                                   (staging / main.object).string(),
                                   (staging / kLibraryPath).string()};
  link.insert(link.end(), kDoctorLinkFlags.begin(), kDoctorLinkFlags.end());
  sink.command(link);
  auto linked = runner.run(link);
  if (!linked) return linked.failure();
  if (linked->exit_code != 0) {
    return makeError(fmt::format("{} failed linking {} (exit code {}):\n{}{}", host.cxx,
                                 kDoctorPath, linked->exit_code, linked->stdout_text,
                                 linked->stderr_text));
  }
  const fs::path out = staging / kDoctorPath;
  auto bytes = io::readFile(out);
  if (!bytes) return bytes.failure();
  auto header = readElfHeader(*bytes, out.string());
  if (!header) return header.failure();
  const int expected = host.arch == "aarch64" ? kElfMachineAarch64 : kElfMachineX86_64;
  if (header->machine != expected) {
    return makeError(fmt::format("{}: ELF machine {} but --arch {} needs {}", out.string(),
                                 header->machine, host.arch, expected));
  }
  DoctorRecord doctor;
  doctor.path = kDoctorPath;
  doctor.sha256 = io::sha256Hex(*bytes);
  doctor.size = bytes->size();
  return doctor;
}

}  // namespace kiln::core
