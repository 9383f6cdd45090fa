// Build selection; see plan.h. Unknown groups and empty selections are usage errors (exit 2)
// that list what exists, so the fix is visible in the message.
#include "core/plan.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/naming.h"

namespace kiln::core {

namespace {

std::vector<std::string> splitComma(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) items.push_back(item);
  }
  return items;
}

}  // namespace

Result<std::vector<GpuArch>> parseGpuArchs(const std::string& text) {
  // Not splitComma: an empty entry ("sm_87,,sm_90") is more likely a typo than intent, and a
  // duplicate would silently change nothing while the user thinks they asked for two SMs.
  std::vector<std::string> items;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    items.push_back(item);
  }
  if (!text.empty() && text.back() == ',') items.emplace_back();
  if (items.empty() || (items.size() == 1 && items[0].empty())) {
    return makeError(
        "--gpu-arch: no SM given (e.g. --gpu-arch sm_90, or sm_87,sm_90, or compute_80)",
        ErrorKind::kUsage);
  }
  std::map<int, std::string> by_sm;  // SM -> the entry that named it
  std::vector<GpuArch> archs;
  for (const auto& entry : items) {
    if (entry.empty()) {
      return makeError(fmt::format("--gpu-arch {}: empty entry in the comma list", text),
                       ErrorKind::kUsage);
    }
    const GpuArch arch = parseGpuArch(entry);
    if (arch.sm <= 0) {
      return makeError(
          fmt::format("--gpu-arch: '{}' is not an SM; write sm_NN (sm_90, sm_87) for a cubin "
                      "or compute_NN (compute_80) for PTX that the driver JIT-compiles; "
                      "arch-specific 'a' targets come from kiln.toml",
                      entry),
          ErrorKind::kUsage);
    }
    auto [it, inserted] = by_sm.emplace(arch.sm, entry);
    if (!inserted) {
      if (it->second == entry) {
        return makeError(fmt::format("--gpu-arch {}: '{}' is listed twice", text, entry),
                         ErrorKind::kUsage);
      }
      // metadata.json and the variant table key a variant's images by SM, and the image symbol
      // is kiln_<variant>__arch<NN>_image: one image per (variant, SM).
      return makeError(
          fmt::format("--gpu-arch {}: '{}' and '{}' are both for SM {}; an artifact holds one "
                      "image per variant and SM, a cubin or PTX; list one of them",
                      text, it->second, entry, arch.sm),
          ErrorKind::kUsage);
    }
    archs.push_back(arch);
  }
  // Ascending whatever the input order: the tag, the job order and the generated tables follow it.
  std::sort(archs.begin(), archs.end());
  return archs;
}

std::vector<std::string> parseGroupList(const std::string& text) {
  if (text.empty() || text == "ALL" || text == "all") return {};
  return splitComma(text);
}

Result<BuildPlan> planBuild(const Registry& registry, const std::vector<std::string>& groups,
                            const std::vector<GpuArch>& sms) {
  std::vector<std::string> known;
  for (const auto& g : registry.groups) known.push_back(g.name);
  std::vector<const Group*> selected;
  if (groups.empty()) {
    for (const auto& g : registry.groups) selected.push_back(&g);
  } else {
    for (const auto& name : groups) {
      const Group* group = registry.findGroup(name);
      if (group == nullptr) {
        return makeError(
            fmt::format("--kernels: unknown group '{}'; known groups: {}", name,
                        known.empty() ? "(none)" : fmt::format("{}", fmt::join(known, ", "))),
            ErrorKind::kUsage);
      }
      if (std::find(selected.begin(), selected.end(), group) == selected.end())
        selected.push_back(group);
    }
  }
  std::sort(selected.begin(), selected.end(),
            [](const Group* a, const Group* b) { return a->name < b->name; });

  BuildPlan plan;
  plan.sms = sms;
  for (const Group* group : selected) {
    std::vector<const Variant*> variants;
    for (const auto& v : group->variants) variants.push_back(&v);
    std::sort(variants.begin(), variants.end(),
              [](const Variant* a, const Variant* b) { return a->name < b->name; });
    bool any = false;
    for (const Variant* v : variants) {
      bool variant_any = false;
      for (const GpuArch& arch : sms) {
        const int sm = arch.sm;
        if (std::find(v->supported_sms.begin(), v->supported_sms.end(), sm) ==
            v->supported_sms.end()) {
          plan.notes.push_back(fmt::format("skipped {} for {}: its supported_sms are [{}]", v->name,
                                           gpuArchName(arch), fmt::join(v->supported_sms, ", ")));
          continue;
        }
        if (arch.ptx && v->arch_specific) {
          return makeError(
              fmt::format("--gpu-arch {}: group {} is arch_specific: variant {} needs {} SASS, and "
                          "PTX for {} cannot hold its arch-specific instructions; build it for "
                          "{}, or leave the group out with --kernels",
                          gpuArchName(arch), v->group, v->name, nvccTarget(sm, true),
                          gpuArchName(arch), smName(sm)),
              ErrorKind::kUsage);
        }
        if (arch.ptx && v->kind == SourceKind::kCuteDsl) {
          return makeError(
              fmt::format("--gpu-arch {}: group {} is cute_dsl, whose front end (the DSL's AOT "
                          "export) emits cubins only, no PTX; build it for {}, or leave the group "
                          "out with --kernels",
                          gpuArchName(arch), v->group, smName(sm)),
              ErrorKind::kUsage);
        }
        plan.jobs.push_back({v, sm, arch.ptx});
        variant_any = true;
      }
      if (variant_any) {
        plan.variants.push_back(v);
      } else if (sms.size() > 1) {
        // The per-SM notes above say why; this one says the variant is absent from the artifact.
        plan.notes.push_back(
            fmt::format("skipped {}: none of the requested SMs is in its supported_sms", v->name));
      }
      any = any || variant_any;
    }
    if (any) plan.groups.push_back(group);
  }
  if (plan.jobs.empty()) {
    std::vector<std::string> names;
    for (const Group* g : selected) names.push_back(g->name);
    std::vector<std::string> sm_names;
    for (const GpuArch& arch : sms) sm_names.push_back(gpuArchName(arch));
    return makeError(
        fmt::format("nothing to build: no variant of [{}] lists {} in its supported_sms",
                    fmt::join(names, ", "), fmt::join(sm_names, " or ")),
        ErrorKind::kUsage);
  }
  return plan;
}

}  // namespace kiln::core
