// The decodeattn runner (kiln/runners/decodeattn.h) over the artifact's generated variant table.
// Compiled by `kiln build` into the artifact's library, next to the generated headers; kiln's own
// CMake builds only selector.cpp. Every decision is the selector's; the entry points are the common
// ones (kiln/runner_entry.h), and this file adds the device's part (its SM picks the image, its SM
// count the split count), places the partials in the caller's workspace, and launches.
#include "kiln/runners/decodeattn.h"

#include <cstddef>
#include <span>

#include "kiln/groups/decodeattn.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::decodeattn {
namespace {

namespace generated = ::kiln::generated::decodeattn;
constexpr std::span<const VariantInfo> kTable = generated::kVariants;

// Admission does not depend on the SM count; any positive value plans the same checks.
int hostMultiprocessors(const Problem& problem) {
  return problem.multiprocessors > 0 ? problem.multiprocessors : kMaxMultiprocessors;
}

struct Traits {
  using Problem = decodeattn::Problem;
  using Plan = decodeattn::Plan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  // Without a device, the split count (and so the workspace) is planned for
  // problem.multiprocessors, or for the most SMs any device has: enough for every device.
  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks pointers) {
    return decodeattn::select(kTable, problem, hostMultiprocessors(problem), device, plan,
                              pointers);
  }

  // Planned again for the stream's device: the split count follows its SM count unless the
  // problem fixes one (the count its workspace was sized for).
  static Status launch(const Problem& problem, Plan& plan, const StreamTarget& target,
                       const DeviceQuery& device, void* workspace, std::size_t workspace_bytes) {
    const int multiprocessors =
        problem.multiprocessors > 0 ? problem.multiprocessors : target.device->multiprocessors;
    KILN_RETURN_IF_ERROR(decodeattn::select(kTable, problem, multiprocessors, &device, &plan));
    KILN_RETURN_IF_ERROR(checkWorkspace(plan, workspace, workspace_bytes));
    if (plan.num_splits > 1) {
      auto* base = static_cast<unsigned char*>(workspace);
      plan.params.partial_out = reinterpret_cast<float*>(base);
      plan.params.partial_lse = reinterpret_cast<float*>(base + plan.lse_offset);
    }
    void* args[] = {&plan.params};
    KILN_RETURN_IF_ERROR(
        kiln::launch(target, *plan.variant, plan.attention_entry, plan.attention, args));
    if (plan.num_splits > 1) {
      KILN_RETURN_IF_ERROR(kiln::launch(target, *plan.variant, plan.merge_entry, plan.merge, args));
    }
    return Status::Ok();
  }
};
using Entry = runner::Entry<Traits>;

}  // namespace

Status canImplement(const Problem& problem) {
  return Entry::canImplement(problem);
}
Status canImplement(const Problem& problem, int device_sm) {
  return Entry::canImplement(problem, device_sm);
}
// Shapes only: a caller sizes the workspace before it has (or without passing) its tensors.
std::size_t workspaceSize(const Problem& problem) {
  return Entry::workspaceSize(problem);
}
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return Entry::run(problem, workspace, workspace_bytes, stream);
}

int numSplits(const Problem& problem, int multiprocessors) {
  Plan plan;
  if (!select(kTable, problem, multiprocessors, nullptr, &plan, PointerChecks::kSkip).ok() ||
      plan.no_op) {
    return 0;
  }
  return plan.num_splits;
}

}  // namespace kiln::decodeattn
