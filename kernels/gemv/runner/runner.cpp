// The gemv runner (kiln/runners/gemv.h) over the artifact's generated variant table. Compiled by
// `kiln build` into the artifact's library, next to the generated headers; kiln's own CMake builds
// only selector.cpp. Every decision is the selector's; the entry points are the common ones
// (kiln/runner_entry.h), and this file adds the launch.
#include "kiln/runners/gemv.h"

#include <cstddef>
#include <span>

#include "kiln/groups/gemv.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::gemv {
namespace {

namespace generated = ::kiln::generated::gemv;

struct Traits {
  using Problem = GemvProblem;
  using Plan = gemv::Plan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks pointers) {
    return gemv::select(generated::kVariants, problem, device, plan, pointers);
  }

  // The stream's device picks the image inside kiln::launch (selectImage): a device whose SM the
  // artifact lacks gets kNoKernelImage naming both, as canImplement(problem, sm) says. The plan's
  // programmatic_dependency (overlap_launch) takes effect only for an image of sm_90 or newer.
  static Status launch(const Problem&, Plan& plan, const StreamTarget& target, const DeviceQuery&,
                       void*, std::size_t) {
    void* args[] = {&plan.params};
    return kiln::launch(target, *plan.variant, plan.entry, plan.config, args);
  }
};
using Gemv = runner::Entry<Traits>;

}  // namespace

Status canImplement(const GemvProblem& p) {
  return Gemv::canImplement(p);
}
Status canImplement(const GemvProblem& p, int device_sm) {
  return Gemv::canImplement(p, device_sm);
}
std::size_t workspaceSize(const GemvProblem& p) {
  return Gemv::workspaceSize(p);
}
Status run(const GemvProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return Gemv::run(p, workspace, workspace_bytes, stream);
}

}  // namespace kiln::gemv
