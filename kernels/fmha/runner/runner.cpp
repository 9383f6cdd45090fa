// The fmha runner (kiln/runners/fmha.h) over the artifact's generated variant table. Compiled by
// `kiln build` into the artifact's library, next to the generated headers; kiln's own CMake
// builds only selector.cpp. Every decision is the selector's; the entry points are the common ones
// (kiln/runner_entry.h), and this file adds the device's part (the kernel for the device: wgmma
// only on sm_90; the wgmma kernel's persistent grid sized by its SM count), encodes the three TMA
// tensor maps the selector described into the wgmma kernel's parameters, in the stream's context,
// and launches.
#include "kiln/runners/fmha.h"

#include <cstddef>
#include <span>
#include <string>

#include "kiln/groups/fmha.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::fmha {
namespace {

namespace generated = ::kiln::generated::fmha;

Status encode(const StreamTarget& target, const char* name, const TensorMapSpec& spec,
              TensorMap* out) {
  const Status s = encodeTensorMap(target, spec, out);
  if (s.ok()) return s;
  return Status(s.code(), std::string("fmha: ") + name + ": " + s.message());
}

struct Traits {
  using Problem = fmha::Problem;
  using Plan = fmha::Plan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks pointers) {
    return fmha::select(generated::kVariants, problem, device, plan, pointers);
  }

  // The kernel keeps its state on chip: no workspace.
  static Status launch(const Problem& problem, Plan& plan, const StreamTarget& target,
                       const DeviceQuery& device, void*, std::size_t) {
    KILN_RETURN_IF_ERROR(planForDevice(generated::kVariants, problem, device, &plan));
    if (plan.info->kernel == Kernel::kMma) {
      void* args[] = {&plan.mma_params};
      return kiln::launch(target, *plan.variant, plan.entry, plan.launch, args);
    }
    persistentGrid(&plan, target.device->multiprocessors);
    KILN_RETURN_IF_ERROR(encode(target, "tma_q", plan.tma_q, &plan.params.tma_q));
    KILN_RETURN_IF_ERROR(encode(target, "tma_k", plan.tma_k, &plan.params.tma_k));
    KILN_RETURN_IF_ERROR(encode(target, "tma_v", plan.tma_v, &plan.params.tma_v));
    void* args[] = {&plan.params};
    return kiln::launch(target, *plan.variant, plan.entry, plan.launch, args);
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

}  // namespace kiln::fmha
