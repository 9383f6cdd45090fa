// Selection: which (variant, SM) pairs a build compiles, from --gpu-arch and --kernels and each
// variant's supported_sms whitelist. Pure logic over the registry, with the notes (skips) and
// errors (unknown group, nothing left) a user needs to correct the command line.
#pragma once

#include <string>
#include <vector>

#include "core/naming.h"
#include "core/registry.h"
#include "core/result.h"

namespace kiln::core {

struct CompileJob {
  const Variant* variant = nullptr;
  int sm = 0;
  bool ptx = false;  // a compute_NN entry: PTX, not a cubin
};

struct BuildPlan {
  std::vector<GpuArch> sms;              // ascending
  std::vector<const Group*> groups;      // groups with at least one job
  std::vector<const Variant*> variants;  // variants with at least one job, by name
  std::vector<CompileJob> jobs;          // by variant name, then SM
  std::vector<std::string> notes;        // "skipped ..." lines, per (variant, SM); plus one per
                                         // variant left with no SM in a multi-SM build
};

// "sm_90" -> {90}; "sm_90,sm_87" -> {87, 90} (ascending, whatever the input order);
// "compute_80" -> {80 as PTX}. A malformed, empty or repeated entry, and sm_NN and compute_NN of
// one SM together, are usage errors naming the entry.
Result<std::vector<GpuArch>> parseGpuArchs(const std::string& text);
// "ALL" (or empty) -> {}; "g1,g2" -> {"g1", "g2"}.
std::vector<std::string> parseGroupList(const std::string& text);

// `groups` empty selects every group. A compute_NN entry that would compile an arch_specific
// variant or a cute_dsl one is a usage error naming the group (neither can be PTX).
Result<BuildPlan> planBuild(const Registry& registry, const std::vector<std::string>& groups,
                            const std::vector<GpuArch>& sms);

}  // namespace kiln::core
