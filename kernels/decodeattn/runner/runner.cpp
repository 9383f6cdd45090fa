// The decodeattn runner (kiln/runners/decodeattn.h) over the artifact's generated variant table.
// Compiled by `kiln build` into the artifact's library, next to the generated headers; kiln's own
// CMake builds only selector.cpp. Every decision is the selector's; this file adds the device
// (from the caller's stream: its SM picks the image, its SM count the split count), places the
// partials in the caller's workspace, and launches.
#include "kiln/runners/decodeattn.h"

#include <cstddef>
#include <span>

#include "kiln/groups/decodeattn.h"
#include "kiln/runner_support.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::decodeattn {
namespace {

namespace generated = ::kiln::generated::decodeattn;
// The artifact's variants, in the runner's own VariantInfo (kiln build generates the table).
constexpr std::span<const VariantInfo> kTable = generated::kVariants;

// Admission does not depend on the SM count; any positive value plans the same checks.
int hostMultiprocessors(const Problem& problem) {
  return problem.multiprocessors > 0 ? problem.multiprocessors : kMaxMultiprocessors;
}

}  // namespace

Status canImplement(const Problem& problem) {
  Plan plan;
  return select(kTable, problem, hostMultiprocessors(problem), nullptr, &plan);
}

Status canImplement(const Problem& problem, int device_sm) {
  const DeviceQuery device = runner::deviceQuery(device_sm, generated::kSupportedSms);
  Plan plan;
  return select(kTable, problem, hostMultiprocessors(problem), &device, &plan);
}

// Shapes only: a caller sizes the workspace before it has (or without passing) its tensors.
std::size_t workspaceSize(const Problem& problem) {
  Plan plan;
  if (!select(kTable, problem, hostMultiprocessors(problem), nullptr, &plan, PointerChecks::kSkip)
           .ok()) {
    return 0;
  }
  return plan.workspace_bytes;
}

int numSplits(const Problem& problem, int multiprocessors) {
  Plan plan;
  if (!select(kTable, problem, multiprocessors, nullptr, &plan, PointerChecks::kSkip).ok() ||
      plan.no_op) {
    return 0;
  }
  return plan.num_splits;
}

Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream) {
  Plan plan;
  KILN_RETURN_IF_ERROR(select(kTable, problem, hostMultiprocessors(problem), nullptr, &plan));
  if (plan.no_op) return Status::Ok();
  DeviceInfo info;
  KILN_RETURN_IF_ERROR(deviceForStream(stream, &info));
  const int multiprocessors =
      problem.multiprocessors > 0 ? problem.multiprocessors : info.multiprocessors;
  KILN_RETURN_IF_ERROR(select(kTable, problem, multiprocessors, nullptr, &plan));
  KILN_RETURN_IF_ERROR(checkDevice(plan, runner::deviceQuery(info.sm, generated::kSupportedSms)));
  KILN_RETURN_IF_ERROR(checkWorkspace(plan, workspace, workspace_bytes));
  if (plan.num_splits > 1) {
    auto* base = static_cast<unsigned char*>(workspace);
    plan.params.partial_out = reinterpret_cast<float*>(base);
    plan.params.partial_lse = reinterpret_cast<float*>(base + plan.lse_offset);
  }
  void* args[] = {&plan.params};
  KILN_RETURN_IF_ERROR(launch(*plan.variant, plan.attention_entry, plan.attention, stream, args));
  if (plan.num_splits > 1) {
    KILN_RETURN_IF_ERROR(launch(*plan.variant, plan.merge_entry, plan.merge, stream, args));
  }
  return Status::Ok();
}

}  // namespace kiln::decodeattn
