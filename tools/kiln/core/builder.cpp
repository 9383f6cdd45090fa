// The build pipeline (see builder.h). The order matters and is the contract:
//   1. read (build_inputs.h): parse options, find the tools, load the registry, select, read an
//      existing artifact to merge into, hash the inputs; then plan (artifact_plan.h), a pure
//      function of what was read, which checks that the artifact can be merged into: everything
//      that can fail for a reason the user must fix happens before any file is written or
//      deleted;
//   2. everything is written into a staging directory next to the artifact (publish.h): the
//      images (compile.h), the images a merge keeps, the generated headers and sources
//      (assemble.h), the library and bin/kiln-doctor (compile.h) and metadata.json, last;
//   3. the staging directory replaces the artifact by rename, so a failed or killed build leaves
//      the previous artifact as it was (a killed build's staging directory is removed by the
//      next build once its pid is gone).
#include "core/builder.h"

#include <map>
#include <string>
#include <utility>

#include "core/artifact_plan.h"
#include "core/assemble.h"
#include "core/build_inputs.h"
#include "core/compile.h"
#include "core/publish.h"
#include "io/fs.h"

namespace kiln::core {

namespace {

// The kept variants' images, copied from the old artifact: image path -> bytes.
Result<std::map<std::string, std::string>> keepOldImages(const ArtifactPlan& plan,
                                                         StagedArtifact& staged) {
  std::map<std::string, std::string> kept;
  for (const std::string& name : plan.kept) {
    for (const auto& [sm, image] : plan.metadata.variants.at(name).images) {
      auto bytes = staged.keep(image);
      if (!bytes) return bytes.failure();
      kept[image.cubin] = std::move(bytes).value();
    }
  }
  return kept;
}

}  // namespace

Result<BuildSummary> runBuild(const BuildOptions& options, io::ProcessRunner& runner,
                              BuildSink& sink) {
  io::RealFileSystem files;
  const BuildProcess process = thisProcess();
  auto inputs = readBuildInputs(options, runner, files, process, sink);
  if (!inputs) return inputs.failure();
  auto plan = planArtifact(*inputs);
  if (!plan) return plan.failure();

  StagedArtifact staged(files, plan->artifact_dir, process);
  if (auto r = staged.open(); !r) return r.failure();
  auto compiled = compileImages(*inputs, staged.dir(), runner, sink);
  if (!compiled) return compiled.failure();
  auto kept = keepOldImages(*plan, staged);
  if (!kept) return kept.failure();
  AssembledArtifact artifact = assembleArtifact(*plan, *compiled, *kept, inputs->runtime);
  if (auto r = staged.write(artifact.files); !r) return r.failure();
  auto library = compileLibrary(*inputs, artifact.members, staged.dir(), runner, sink);
  if (!library) return library.failure();
  artifact.metadata.library = *library;
  auto doctor = compileDoctor(*inputs, staged.dir(), runner, sink);
  if (!doctor) return doctor.failure();
  artifact.metadata.doctor = *doctor;
  artifact.metadata.build_date = utcNow();
  if (auto r = staged.complete(toJson(artifact.metadata)); !r) return r.failure();
  if (auto r = staged.publish(); !r) return r.failure();

  BuildSummary summary;
  summary.artifact_dir = plan->artifact_dir;
  summary.metadata = std::move(artifact.metadata);
  for (const CompiledImage& image : *compiled) summary.built.emplace_back(image.variant, image.sm);
  summary.kept = plan->kept;
  return summary;
}

}  // namespace kiln::core
