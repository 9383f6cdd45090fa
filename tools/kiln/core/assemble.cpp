// Assemble (see assemble.h): the text of every generated file comes from core/codegen.h; this
// decides their paths, their order and the library member that compiles each source.
#include "core/assemble.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include <fmt/format.h>

#include "core/codegen.h"
#include "core/naming.h"
#include "io/fs.h"

namespace kiln::core {

namespace {

void recordCompiled(const std::vector<CompiledImage>& compiled, ArtifactMetadata& m) {
  for (const CompiledImage& c : compiled) {
    ImageRecord& image = m.variants.at(c.variant).images.at(c.sm);
    image.sha256 = io::sha256Hex(c.bytes);
    image.size = c.bytes.size();
    image.compile_seconds = c.seconds;
    image.command = c.command;
    image.kernels = c.kernels;
  }
}

// The group's runner declares the rows of the group's table, ::kiln::<group>::VariantInfo, in
// kiln/runners/<group>.h (codegen.h, groupHeader).
bool hasRunnerTypes(const RuntimeSources& runtime, const std::string& group) {
  const auto runner = runtime.runners.find(group);
  if (runner == runtime.runners.end()) return false;
  const std::string header = fmt::format("include/kiln/runners/{}.h", group);
  const auto& headers = runner->second.headers;
  return std::any_of(headers.begin(), headers.end(),
                     [&](const ArtifactFile& file) { return file.path == header; });
}

class Assembler {
 public:
  explicit Assembler(AssembledArtifact& out) : out_(out) {}

  void header(std::string path, std::string text) {
    out_.files.push_back({std::move(path), std::move(text)});
  }
  // A generated source, <kSourceScratch>/<stem>.cpp, and its member <kObjectScratch>/<stem>.o.
  void source(const std::string& stem, std::string text) {
    const std::string path = fmt::format("{}/{}.cpp", kSourceScratch, stem);
    out_.files.push_back({path, std::move(text)});
    out_.members.push_back({path, fmt::format("{}/{}.o", kObjectScratch, stem), {}});
  }
  // A source of the runtime or a runner, compiled where it is into <kObjectScratch>/<stem>.o.
  void member(const std::filesystem::path& source, const std::string& stem,
              std::vector<std::filesystem::path> includes = {}) {
    out_.members.push_back(
        {source, fmt::format("{}/{}.o", kObjectScratch, stem), std::move(includes)});
  }
  void copy(const std::vector<ArtifactFile>& files) {
    out_.files.insert(out_.files.end(), files.begin(), files.end());
  }

 private:
  AssembledArtifact& out_;
};

}  // namespace

AssembledArtifact assembleArtifact(const ArtifactPlan& plan,
                                   const std::vector<CompiledImage>& compiled,
                                   const std::map<std::string, std::string>& kept,
                                   const RuntimeSources& runtime) {
  AssembledArtifact out;
  out.metadata = plan.metadata;
  recordCompiled(compiled, out.metadata);
  const ArtifactMetadata& m = out.metadata;
  std::map<std::string, const std::string*> image_bytes;  // image path -> its bytes
  for (const CompiledImage& c : compiled) {
    image_bytes[m.variants.at(c.variant).images.at(c.sm).cubin] = &c.bytes;
  }
  for (const auto& [path, bytes] : kept) image_bytes[path] = &bytes;

  Assembler add(out);
  for (const auto& [name, v] : m.variants) {
    add.header(variantHeaderPath(name), variantHeader(v));
    for (const auto& [sm, image] : v.images) {
      add.source(imageStem(name, sm, image.isPtx()),
                 imageShimSource(v, image, *image_bytes.at(image.cubin)));
    }
    add.source(name, variantShimSource(v, m.provenance.cuda_version));
  }
  for (const auto& [group, g] : m.groups) {
    std::vector<const VariantRecord*> records;
    for (const auto& name : g.variants) records.push_back(&m.variants.at(name));
    add.header(groupHeaderPath(group),
               groupHeader(group, g, records, hasRunnerTypes(runtime, group)));
  }
  add.header(kAllHeaderPath, allHeader(m));
  add.source("kiln_artifact", artifactTableSource(m));

  // The runtime and the runners of the artifact's groups, headers and sources.
  add.copy(runtime.headers);
  for (const auto& file : runtime.sources) add.member(file, "runtime_" + file.stem().string());
  for (const auto& [group, runner] : runtime.runners) {
    add.copy(runner.headers);
    for (const auto& file : runner.sources) {
      add.member(file, fmt::format("runner_{}_{}", group, file.stem().string()),
                 {runner.dir / "include"});
    }
  }
  // Every header's sha256, as written (a later file replaces an earlier one of the same path).
  for (const ArtifactFile& file : out.files) {
    if (file.path.rfind("include/", 0) == 0)
      out.metadata.headers[file.path] = io::sha256Hex(file.bytes);
  }
  return out;
}

}  // namespace kiln::core
