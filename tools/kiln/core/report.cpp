// list / inspect. A PTX image has no ptxas report (the driver compiles it at load), so its
// resource columns say "ptx (JIT)" and "-" rather than zeros that would read as measurements.
#include "core/report.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/naming.h"
#include "core/table.h"
#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::core {

std::string listTable(const Registry& registry) {
  TextTable table({"group", "kind", "variants", "SMs", "constants"});
  for (const auto& g : registry.groups) {
    std::vector<std::string> constants;
    for (const auto& c : g.constants)
      constants.push_back(fmt::format("{}:{}", c.name, constantTypeName(c.type)));
    table.add({g.name, sourceKindName(g.kind), std::to_string(g.variants.size()),
               fmt::format("{}", fmt::join(g.supported_sms, ",")),
               fmt::format("{}", fmt::join(constants, " "))});
  }
  std::string out = table.render();
  for (const auto& g : registry.groups) {
    out += fmt::format("\n{}{}\n", g.name, g.description.empty() ? "" : ": " + g.description);
    // One line per variant, its name and constants in columns as wide as the group's widest.
    std::vector<std::string> values(g.variants.size());
    std::size_t name_width = 0, values_width = 0;
    for (std::size_t i = 0; i < g.variants.size(); ++i) {
      const auto& v = g.variants[i];
      for (const auto& c : v.constants) {
        values[i] +=
            fmt::format("{}{}={}", values[i].empty() ? "" : " ", c.name, constantLiteral(c));
      }
      name_width = std::max(name_width, v.name.size());
      values_width = std::max(values_width, values[i].size());
    }
    for (std::size_t i = 0; i < g.variants.size(); ++i) {
      const auto& v = g.variants[i];
      out +=
          fmt::format("  {:<{}}  {:<{}}  sm [{}]{}\n", v.name, name_width, values[i], values_width,
                      fmt::join(v.supported_sms, ","), v.arch_specific ? " (arch-specific)" : "");
    }
  }
  return out;
}

Result<ArtifactMetadata> loadArtifactMetadata(const fs::path& dir) {
  // A regular file of bounded size, not followed through a link: never a FIFO or /dev/zero.
  auto text = io::readRegularFile(dir / kMetadataFile, kMaxMetadataBytes, io::Links::kRefuse);
  if (!text) {
    return makeError(fmt::format("{}: not a kiln artifact ({})", dir.string(), text.error()),
                     ErrorKind::kUsage);
  }
  auto metadata = parseMetadata(*text);
  if (!metadata)
    return makeError(fmt::format("{}: {}", dir.string(), metadata.error()), ErrorKind::kUsage);
  return metadata;
}

namespace {

// The registers, smem and spills cells of one image: the worst entry of the ptxas report.
std::vector<std::string> resourceCells(const ImageRecord& image) {
  if (image.isPtx()) return {"ptx (JIT)", "-", "-"};
  int registers = 0;
  long smem = 0, stores = 0, loads = 0;
  for (const auto& [entry, k] : image.kernels) {
    registers = std::max(registers, k.registers);
    smem = std::max(smem, k.shared_bytes);
    stores += k.spill_store_bytes;
    loads += k.spill_load_bytes;
  }
  return {std::to_string(registers), humanBytes(static_cast<unsigned long long>(smem)),
          fmt::format("{}/{}", stores, loads)};
}

}  // namespace

std::string resourceTable(const ArtifactMetadata& m) {
  TextTable table({"variant", "SM", "registers", "smem", "spills (st/ld)", "image", "compile"});
  for (const auto& [name, v] : m.variants) {
    for (const auto& [sm, image] : v.images) {
      const auto cells = resourceCells(image);
      table.add({name, image.target, cells[0], cells[1], cells[2], humanBytes(image.size),
                 fmt::format("{:.1f}s", image.compile_seconds)});
    }
  }
  return table.render();
}

std::string inspectTable(const ArtifactMetadata& m) {
  const Provenance& p = m.provenance;
  std::string out;
  out += fmt::format("tag            {}\n", p.tag);
  out += fmt::format("arch           {} ({})\n", p.arch, p.host_target);
  out += fmt::format("compile        {}\n", fmt::join(p.compile_targets, ", "));
  out += fmt::format("cuda           {}{}\n", p.cuda_version,
                     p.cuda_frontend_version
                         ? fmt::format(" (ptxas; PTX from nvcc {})", *p.cuda_frontend_version)
                         : "");
  out += fmt::format("host compiler  {} ({})\n", p.host_compiler_command, p.host_compiler_version);
  out += fmt::format("cutlass        {}\n", p.cutlass_version.value_or("-"));
  out += fmt::format("cute dsl       {}\n", cuteDslProvenance(p));
  out += fmt::format("kiln           {}\n", p.kiln_version);
  out += fmt::format("built          {}\n", m.build_date);
  out += fmt::format("library        {} ({}, sha256 {})\n", m.library.path,
                     humanBytes(m.library.size), m.library.sha256);
  out += fmt::format("fingerprint    {}\n", m.fingerprint);
  out += m.runtime_inputs.empty()
             ? "runtime        inputs not recorded (metadata of an older kiln)\n"
             : fmt::format("runtime        {} input files (runtime_inputs)\n",
                           m.runtime_inputs.size());
  std::vector<std::string> groups;
  for (const auto& [name, g] : m.groups)
    groups.push_back(fmt::format("{} ({})", name, g.variants.size()));
  out += fmt::format("groups         {}\n\n", fmt::join(groups, ", "));
  TextTable table({"variant", "SM", "constants", "registers", "smem", "spills (st/ld)", "image"});
  for (const auto& [name, v] : m.variants) {
    std::vector<std::string> values;
    for (const auto& c : v.constants)
      values.push_back(fmt::format("{}={}", c.name, constantLiteral(c)));
    for (const auto& [sm, image] : v.images) {
      const auto cells = resourceCells(image);
      table.add({name, image.target, fmt::format("{}", fmt::join(values, " ")), cells[0], cells[1],
                 cells[2], humanBytes(image.size)});
    }
  }
  return out + table.render();
}

}  // namespace kiln::core
