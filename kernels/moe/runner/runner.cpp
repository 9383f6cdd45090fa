// The moe runner (kiln/runners/moe.h) over the artifact's generated variant table. Compiled by
// `kiln build` into the artifact's library, next to the generated headers; kiln's own CMake builds
// only selector.cpp. Every decision is the selector's; the entry points are the common ones
// (kiln/runner_entry.h), and this file adds the launches: the problem's steps, in order.
#include "kiln/runners/moe.h"

#include <cstddef>
#include <span>

#include "kiln/groups/moe.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::moe {
namespace {

namespace generated = ::kiln::generated::moe;
constexpr std::span<const VariantInfo> kTable = generated::kVariants;

struct Traits {
  using Problem = moe::Problem;
  using Plan = moe::Plan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       PointerChecks pointers) {
    return moe::select(kTable, problem, device, plan, pointers);
  }

  static Status launch(const Problem&, Plan& plan, const StreamTarget& target,
                       const DeviceQuery& device, void* workspace, std::size_t workspace_bytes) {
    KILN_RETURN_IF_ERROR(runner::checkDevice("moe", plan.variant, device));
    KILN_RETURN_IF_ERROR(bindWorkspace(&plan, workspace, workspace_bytes));
    void* args[] = {&plan.params};
    for (int i = 0; i < kSteps; ++i) {
      if ((plan.steps & (1u << i)) == 0) continue;
      KILN_RETURN_IF_ERROR(
          kiln::launch(target, *plan.variant, plan.entries[i], plan.launches[i], args));
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
WorkspaceLayout workspaceLayout(const Problem& problem) {
  Plan plan;
  if (!select(kTable, problem, nullptr, &plan, PointerChecks::kSkip).ok()) return {};
  return plan.layout;
}
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return Entry::run(problem, workspace, workspace_bytes, stream);
}

}  // namespace kiln::moe
