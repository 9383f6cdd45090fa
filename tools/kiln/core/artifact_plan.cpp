// Plan (see artifact_plan.h). The order of the steps matters: a variant's fingerprint covers
// this build's provenance, before a merge adds the old artifact's compile targets, CUTLASS
// version and CuTe DSL to it; the artifact's fingerprint covers the merged one.
#include "core/artifact_plan.h"

#include <map>
#include <set>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "core/cute_dsl_frontend.h"
#include "core/fingerprint.h"
#include "core/naming.h"

namespace kiln::core {

namespace {

Provenance provenanceOf(const BuildInputs& in) {
  Provenance p;
  p.kiln_version = in.kiln_version;
  p.arch = in.arch;
  p.host_target = in.tools.host.target;
  p.tag = artifactTag(in.selection.sms);
  p.gpu_archs = in.selection.sms;
  std::set<std::string> targets;
  for (const auto& job : in.selection.jobs)
    targets.insert(nvccTarget(job.sm, job.variant->arch_specific, job.ptx));
  p.compile_targets.assign(targets.begin(), targets.end());
  p.cuda_version = in.tools.cuda.version;
  if (in.tools.cuda.split()) p.cuda_frontend_version = in.tools.cuda.frontend_version;
  p.host_compiler_command = in.tools.host.cxx;
  p.host_compiler_version = in.tools.host.version;
  p.cutlass_version = in.tools.cutlass.version;
  for (const Variant* v : in.selection.variants) {
    if (v->kind != SourceKind::kCuteDsl) continue;
    p.cute_dsl_version = in.tools.cute_dsl.version;
    p.cute_dsl_cuda = fmt::format("cu{}", in.tools.cute_dsl.cuda_major);
    break;
  }
  return p;
}

// A record per selected variant, an image per job, and the variants' fingerprints.
void addSelectedVariants(const BuildInputs& in, ArtifactMetadata& m) {
  for (const Variant* v : in.selection.variants) {
    VariantRecord& record = m.variants[v->name];
    record.name = v->name;
    record.group = v->group;
    record.kind = sourceKindName(v->kind);
    record.entries = v->entries;
    record.constants = v->constants;
    record.inputs = in.group_inputs.at(v->group);
  }
  for (const auto& job : in.selection.jobs) {
    ImageRecord& image = m.variants[job.variant->name].images[job.sm];
    image.sm = job.sm;
    image.target = nvccTarget(job.sm, job.variant->arch_specific, job.ptx);
    image.format = job.ptx ? kFormatPtx : kFormatCubin;
    image.symbol = imageSymbol(job.variant->name, job.sm);
    image.cubin = imagePath(job.variant->name, job.sm, job.ptx);
  }
  for (const Variant* v : in.selection.variants) {
    VariantRecord& record = m.variants[v->name];
    record.fingerprint = variantFingerprint(record, *v, m.provenance);
    if (v->kind == SourceKind::kCuteDsl)
      record.fingerprint = cuteDslFingerprint(record.fingerprint, in.tools.cute_dsl);
  }
}

// metadata.json records a dtype or enum constant as its value alone (the same JSON string), so
// a kept variant read back from it knows only "a string". Its group's runner, compiled from this
// checkout, reads the generated table in its own types (DType, the group's enums): take each
// constant's declared type from the group's kiln.toml here, when the checkout still has the group.
void retypeConstants(const Registry& registry, VariantRecord& record) {
  const Group* group = registry.findGroup(record.group);
  if (group == nullptr) return;
  for (Constant& c : record.constants) {
    for (const ConstantDecl& decl : group->constants) {
      if (decl.name == c.name && std::holds_alternative<std::string>(c.value) &&
          (decl.type == ConstantType::kDtype || decl.type == ConstantType::kEnum))
        c.type = decl.type;
    }
  }
}

// Keeps the old artifact's variants that this build does not rebuild, as they are (but for the
// constants' types, retypeConstants), and returns their names. The compile targets become the
// union of both builds'; a CUTLASS version or CuTe DSL the old artifact recorded stays when this
// build has none; its groups stay.
std::vector<std::string> mergeOld(const ArtifactMetadata& old, const Registry& registry,
                                  ArtifactMetadata& m) {
  std::vector<std::string> kept;
  std::set<std::string> targets(m.provenance.compile_targets.begin(),
                                m.provenance.compile_targets.end());
  for (const auto& [name, record] : old.variants) {
    if (m.variants.count(name) != 0) continue;  // rebuilt: the new one replaces it
    for (const auto& [sm, image] : record.images) targets.insert(image.target);
    m.variants[name] = record;
    retypeConstants(registry, m.variants[name]);
    kept.push_back(name);
  }
  m.provenance.compile_targets.assign(targets.begin(), targets.end());
  if (!m.provenance.cutlass_version) m.provenance.cutlass_version = old.provenance.cutlass_version;
  if (!m.provenance.cute_dsl_version) {
    m.provenance.cute_dsl_version = old.provenance.cute_dsl_version;
    m.provenance.cute_dsl_cuda = old.provenance.cute_dsl_cuda;
  }
  m.groups = old.groups;
  return kept;
}

// A record per selected group (the old artifact's others are already there), each listing the
// artifact's variants of the group.
void setGroups(const BuildPlan& selection, ArtifactMetadata& m) {
  for (const Group* group : selection.groups) {
    GroupRecord& g = m.groups[group->name];
    g.kind = sourceKindName(group->kind);
    g.supported_sms = group->supported_sms;
  }
  for (auto& [name, g] : m.groups) g.variants.clear();
  for (const auto& [name, v] : m.variants) m.groups[v.group].variants.push_back(name);
}

// Duplicate C symbols fail the build (contract 4); names are unique by the registry, but a
// merged old variant could collide with a renamed new one.
Result<void> checkSymbols(const ArtifactMetadata& m) {
  std::map<std::string, std::string> owners;
  for (const auto& [name, v] : m.variants) {
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
  return {};
}

}  // namespace

Result<ArtifactPlan> planArtifact(const BuildInputs& in) {
  ArtifactPlan plan;
  plan.artifact_dir = in.artifact_dir;
  ArtifactMetadata& m = plan.metadata;
  m.provenance = provenanceOf(in);
  if (in.old) {
    if (auto ok = checkMergeable(in.old->provenance, m.provenance); !ok) {
      return makeError(
          fmt::format("cannot merge into {}: {}", in.artifact_dir.string(), ok.error()),
          ErrorKind::kUsage);
    }
  }
  addSelectedVariants(in, m);
  if (in.old) plan.kept = mergeOld(*in.old, in.registry, m);
  setGroups(in.selection, m);
  if (auto ok = checkSymbols(m); !ok) return ok.failure();
  m.runtime_inputs = in.runtime.inputs;
  m.fingerprint = artifactFingerprint(m);
  return plan;
}

}  // namespace kiln::core
