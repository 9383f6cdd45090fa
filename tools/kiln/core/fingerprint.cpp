// The fingerprints; see fingerprint.h.
#include "core/fingerprint.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/library_recipe.h"
#include "core/naming.h"
#include "io/fs.h"

namespace kiln::core {

std::string variantFingerprint(const VariantRecord& record, const Variant& variant,
                               const Provenance& provenance) {
  // One canonical text, then its hash: every line names what it is, so two inputs cannot
  // collide by concatenation.
  std::string text =
      fmt::format("variant {}\ngroup {}\nkind {}\n", record.name, record.group, record.kind);
  for (const auto& [path, sha] : record.inputs) text += fmt::format("input {} {}\n", path, sha);
  for (const auto& c : record.constants)
    text += fmt::format("constant {} {}\n", c.name, constantLiteral(c));
  text += fmt::format("entries {}\n", fmt::join(record.entries, ","));
  for (const auto& [sm, image] : record.images) text += fmt::format("target {}\n", image.target);
  text +=
      fmt::format("arch_specific {}\nsm_constant {}\n", variant.arch_specific, variant.sm_constant);
  text += fmt::format("uses {}\nnvcc_flags {}\n", fmt::join(variant.uses, ","),
                      fmt::join(variant.nvcc_flags, " "));
  text +=
      fmt::format("cuda {}\nhost_compiler {}\ncutlass {}\n", provenance.cuda_version,
                  provenance.host_compiler_version, provenance.cutlass_version.value_or("none"));
  if (provenance.cuda_frontend_version)
    text += fmt::format("cuda_frontend {}\n", *provenance.cuda_frontend_version);
  return io::sha256Hex(text);
}

std::string artifactFingerprint(const ArtifactMetadata& m) {
  const Provenance& p = m.provenance;
  // An sm_NN entry is written as its number, as before compute_NN entries existed, so adding
  // them changed no fingerprint of an artifact without PTX.
  std::vector<std::string> archs;
  for (const GpuArch& arch : p.gpu_archs)
    archs.push_back(arch.ptx ? gpuArchName(arch) : std::to_string(arch.sm));
  std::string text = fmt::format(
      "kiln {}\narch {}\nhost_target {}\ntag {}\ngpu_archs {}\ncompile_targets {}\ncuda {}\n"
      "host_compiler {} {}\ncutlass {}\n",
      p.kiln_version, p.arch, p.host_target, p.tag, fmt::join(archs, ","),
      fmt::join(p.compile_targets, ","), p.cuda_version, p.host_compiler_command,
      p.host_compiler_version, p.cutlass_version.value_or("none"));
  if (p.cuda_frontend_version) text += fmt::format("cuda_frontend {}\n", *p.cuda_frontend_version);
  if (p.cute_dsl_version) text += fmt::format("cute_dsl {}\n", cuteDslProvenance(p));
  for (const auto& [path, sha] : m.runtime_inputs)
    text += fmt::format("runtime_input {} {}\n", path, sha);
  for (const auto& [name, v] : m.variants)
    text += fmt::format("variant {} {}\n", name, v.fingerprint);
  // The rest of what lib/libkiln.a is made from: this kiln's host compile and archive flags and
  // its code generator (library_recipe.h), which no file of the checkout records.
  text += libraryRecipe();
  return io::sha256Hex(text);
}

}  // namespace kiln::core
