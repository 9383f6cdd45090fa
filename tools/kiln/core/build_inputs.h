// Read: everything a build reads and checks before it writes or deletes anything (docs/cli.md,
// `kiln build`, step 1), in this order: the options' paths; nvcc, which must target every
// --gpu-arch entry, and the host compiler; the registry and the selection (core/plan.h; its
// notes go to the sink); what the selected variants need besides (a front end for their kind,
// the CUTLASS headers, the pinned CuTe DSL); the existing artifact when the build merges into it;
// and the inputs by content: every selected group's files, the runtime's and the runners'
// sources. Every error a user must fix comes from here or from the plan, which is a pure
// function of what is read here (artifact_plan.h). The one write puts back an artifact that a
// killed build left set aside (publish.h), before that artifact is read.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/builder.h"
#include "core/cute_dsl_frontend.h"
#include "core/inputs.h"
#include "core/metadata.h"
#include "core/plan.h"
#include "core/publish.h"
#include "core/registry.h"
#include "core/result.h"
#include "core/toolchain.h"
#include "io/fs.h"
#include "io/process.h"

namespace kiln::core {

struct BuildTools {
  CudaToolchain cuda;
  HostToolchain host;
  CutlassHeaders cutlass;     // empty include_dir unless a selected variant uses cutlass
  CuteDslToolchain cute_dsl;  // empty version unless a cute_dsl variant is selected
  std::string launcher;       // BuildOptions::compiler_launcher, checked to be runnable
};

// A group's runner, kernels/<group>/runner/ (core/inputs.h), compiled into the library of every
// artifact that holds the group.
struct RunnerSources {
  std::filesystem::path dir;
  std::vector<ArtifactFile> headers;           // its include/kiln/, as the artifact's include/kiln/
  std::vector<std::filesystem::path> sources;  // its *.cpp (not those of subfolders), sorted
};

// The doctor's source, relative to the runtime directory.
inline constexpr char kDoctorSource[] = "doctor/kiln_doctor.cpp";

// What the library is compiled from besides the generated sources.
struct RuntimeSources {
  InputMap inputs;                    // the artifact's runtime_inputs
  std::vector<ArtifactFile> headers;  // runtime/include/kiln/, as the artifact's include/kiln/
  std::vector<std::filesystem::path> sources;    // runtime/src/*.cpp, sorted
  std::filesystem::path doctor;                  // runtime/doctor/kiln_doctor.cpp: bin/kiln-doctor
  std::map<std::string, RunnerSources> runners;  // group -> its runner, for the artifact's groups
                                                 // (built now or merged in) that have one
};

struct BuildInputs {
  BuildInputs() = default;
  // Moves only: `selection` points into `registry`.
  BuildInputs(BuildInputs&&) = default;
  BuildInputs(const BuildInputs&) = delete;

  std::filesystem::path root;          // absolute; holds kernels/
  std::filesystem::path runtime_dir;   // absolute; holds include/kiln/, src/ and doctor/
  std::filesystem::path stage_dir;     // absolute; where nvcc's sources are staged (inputs.h)
  int jobs = 1;                        // parallel compiles
  std::string kiln_version;            // as BuildOptions
  std::string arch;                    // the library's host arch: x86_64 | aarch64
  std::filesystem::path artifact_dir;  // <output-dir>/<arch>/<tag>
  BuildTools tools;
  Registry registry;
  BuildPlan selection;
  // The existing artifact, read and checked (checkTag) when this build merges into it: a
  // single-SM build without --clean where an artifact exists.
  std::optional<ArtifactMetadata> old;
  std::map<std::string, InputMap> group_inputs;  // selected group -> its files and kernels/common/
  RuntimeSources runtime;
};

Result<BuildInputs> readBuildInputs(const BuildOptions& options, io::ProcessRunner& runner,
                                    io::FileSystem& files, const BuildProcess& process,
                                    BuildSink& sink);

}  // namespace kiln::core
