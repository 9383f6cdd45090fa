// The entry points every group's runner offers (kiln/runners/<group>.h), written once over the
// group's selector, so that they are the same contract in every group and cannot disagree with it:
//
//   canImplement(problem)              host-only admission: the selector with no device
//   canImplement(problem, device_sm)   the same for a device of that SM: its image check comes last
//   workspaceSize(problem)             the plan's workspace bytes, from the shapes alone (pointer
//                                      checks skipped); 0 for a problem the selector refuses
//   run(problem, workspace, bytes, stream)
//       host admission first (a refused problem or a no-op makes no driver call and touches
//       neither device nor stream), then one resolve of the stream (resolveStream: its context,
//       device, SM and multiprocessor count), then the group's launch with that target, which
//       launches without looking anything up again
//
// A group adapts its selector to this contract with one traits struct in its runner.cpp:
//
//   struct Traits {
//     using Problem = ...;  using Plan = ...;  // Plan has `bool no_op`, `std::size_t
//     workspace_bytes`
//     // The selector over the generated table (kiln/groups/<group>.h).
//     static Status select(const Problem&, const DeviceQuery* device, Plan*, PointerChecks);
//     // What run() adds once the stream is resolved: the device's checks and planning (its SM,
//     // its multiprocessor count), the workspace, tensor maps, then kiln::launch(target, ...).
//     static Status launch(const Problem&, Plan&, const StreamTarget&, const DeviceQuery& device,
//                          void* workspace, std::size_t workspace_bytes);
//     static constexpr std::span<const int> kSupportedSms = ...;  // the generated kSupportedSms
//   };
//
// and each public entry point is one line: `return runner::Entry<Traits>::run(...)`.
#pragma once

#include <cstddef>

#include "kiln/runner_support.h"
#include "kiln/runtime.h"
#include "kiln/status.h"

namespace kiln::runner {

template <typename Traits>
struct Entry {
  using Problem = typename Traits::Problem;
  using Plan = typename Traits::Plan;

  static Status canImplement(const Problem& problem) {
    Plan plan;
    return Traits::select(problem, nullptr, &plan, PointerChecks::kCheck);
  }

  static Status canImplement(const Problem& problem, int device_sm) {
    const DeviceQuery device = deviceQuery(device_sm, Traits::kSupportedSms);
    Plan plan;
    return Traits::select(problem, &device, &plan, PointerChecks::kCheck);
  }

  static std::size_t workspaceSize(const Problem& problem) {
    Plan plan;
    if (!Traits::select(problem, nullptr, &plan, PointerChecks::kSkip).ok()) return 0;
    return plan.workspace_bytes;
  }

  static Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes,
                    Stream stream) {
    Plan plan;
    KILN_RETURN_IF_ERROR(Traits::select(problem, nullptr, &plan, PointerChecks::kCheck));
    if (plan.no_op) return Status::Ok();
    StreamTarget target;
    KILN_RETURN_IF_ERROR(resolveStream(stream, &target));
    const DeviceQuery device = deviceQuery(target.device->sm, Traits::kSupportedSms);
    return Traits::launch(problem, plan, target, device, workspace, workspace_bytes);
  }
};

}  // namespace kiln::runner
