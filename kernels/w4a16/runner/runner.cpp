// The w4a16 runner (kiln/runners/w4a16.h) over the artifact's generated variant table. Compiled by
// `kiln build` into the artifact's library, next to the generated headers; kiln's own CMake builds
// only selector.cpp. Every decision is the selector's; the entry points are the common ones
// (kiln/runner_entry.h), and this file adds the launches: the GEMM, then, when K is split, the
// reduction as its programmatic dependent; the repack's two kernels.
#include "kiln/runners/w4a16.h"

#include <cstddef>
#include <span>

#include "kiln/groups/w4a16.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::w4a16 {
namespace {

namespace generated = ::kiln::generated::w4a16;
constexpr std::span<const VariantInfo> kTable = generated::kVariants;

// Without a device, the split count (and so the workspace) is planned for
// problem.multiprocessors, or for the most SMs any device has: enough for every device.
int hostMultiprocessors(const Problem& problem) {
  return problem.multiprocessors > 0 ? problem.multiprocessors : kMaxMultiprocessors;
}

struct Traits {
  using Problem = w4a16::Problem;
  using Plan = w4a16::Plan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       PointerChecks pointers) {
    return w4a16::select(kTable, problem, hostMultiprocessors(problem), device, plan, pointers);
  }

  // Planned again for the stream's device: the split count follows its SM count unless the
  // problem fixes one (the count its workspace was sized for).
  static Status launch(const Problem& problem, Plan& plan, const StreamTarget& target,
                       const DeviceQuery& device, void* workspace, std::size_t workspace_bytes) {
    const int multiprocessors =
        problem.multiprocessors > 0 ? problem.multiprocessors : target.device->multiprocessors;
    KILN_RETURN_IF_ERROR(w4a16::select(kTable, problem, multiprocessors, &device, &plan));
    KILN_RETURN_IF_ERROR(checkWorkspace(plan, workspace, workspace_bytes));
    if (plan.split.splits > 1) plan.params.partials = static_cast<float*>(workspace);
    void* args[] = {&plan.params};
    KILN_RETURN_IF_ERROR(kiln::launch(target, *plan.variant, plan.gemm_entry, plan.gemm, args));
    if (plan.split.splits > 1) {
      KILN_RETURN_IF_ERROR(
          kiln::launch(target, *plan.variant, plan.reduce_entry, plan.reduce, args));
    }
    return Status::Ok();
  }
};
using Entry = runner::Entry<Traits>;

struct RepackTraits {
  using Problem = RepackProblem;
  using Plan = RepackPlan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       PointerChecks pointers) {
    return selectRepack(kTable, problem, device, plan, pointers);
  }

  static Status launch(const Problem&, Plan& plan, const StreamTarget& target, const DeviceQuery&,
                       void*, std::size_t) {
    void* args[] = {&plan.params};
    KILN_RETURN_IF_ERROR(
        kiln::launch(target, *plan.variant, plan.weights_entry, plan.weights, args));
    return kiln::launch(target, *plan.variant, plan.scales_entry, plan.scales, args);
  }
};
using RepackEntry = runner::Entry<RepackTraits>;

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
Status canRepack(const RepackProblem& problem) {
  return RepackEntry::canImplement(problem);
}
Status repack(const RepackProblem& problem, Stream stream) {
  return RepackEntry::run(problem, nullptr, 0, stream);
}

}  // namespace kiln::w4a16
