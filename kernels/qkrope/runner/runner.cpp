// The qkrope runner (kiln/runners/qkrope.h) over the artifact's generated variant table. Compiled
// by `kiln build` into the artifact's library, next to the generated headers; kiln's own CMake
// builds only selector.cpp. Every decision is the selector's; the entry points are the common ones
// (kiln/runner_entry.h), and this file adds the launch.
#include "kiln/runners/qkrope.h"

#include <cstddef>
#include <span>

#include "kiln/groups/qkrope.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::qkrope {
namespace {

namespace generated = ::kiln::generated::qkrope;

struct Traits {
  using Problem = qkrope::Problem;
  using Plan = qkrope::Plan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks pointers) {
    return qkrope::select(generated::kVariants, problem, device, plan, pointers);
  }

  // The stream's device picks the image inside kiln::launch (selectImage): a device whose SM the
  // artifact lacks gets kNoKernelImage naming both, as canImplement(problem, sm) says.
  static Status launch(const Problem&, Plan& plan, const StreamTarget& target, const DeviceQuery&,
                       void*, std::size_t) {
    void* args[] = {&plan.params};
    return kiln::launch(target, *plan.variant, plan.entry, plan.config, args);
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
std::size_t workspaceSize(const Problem& problem) {
  return Entry::workspaceSize(problem);
}
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return Entry::run(problem, workspace, workspace_bytes, stream);
}

}  // namespace kiln::qkrope
