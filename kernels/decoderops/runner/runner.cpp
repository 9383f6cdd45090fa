// The decoderops runner (kiln/runners/decoderops.h) over the artifact's generated variant table.
// Compiled by `kiln build` into the artifact's library, next to the generated headers; kiln's own
// CMake builds only selector.cpp. Every decision is the selector's; the entry points are the common
// ones (kiln/runner_entry.h), one Traits per problem, and this file adds the launch.
#include "kiln/runners/decoderops.h"

#include <cstddef>
#include <span>

#include "kiln/groups/decoderops.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::decoderops {
namespace {

namespace generated = ::kiln::generated::decoderops;

template <typename ProblemT, typename Params>
struct Traits {
  using Problem = ProblemT;
  using Plan = decoderops::Plan<Params>;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks pointers) {
    return decoderops::select(generated::kVariants, problem, device, plan, pointers);
  }

  // The stream's device picks the image inside kiln::launch (selectImage): a device whose SM the
  // artifact lacks gets kNoKernelImage naming both, as canImplement(problem, sm) says.
  static Status launch(const Problem&, Plan& plan, const StreamTarget& target, const DeviceQuery&,
                       void*, std::size_t) {
    void* args[] = {&plan.params};
    return kiln::launch(target, *plan.variant, plan.entry, plan.config, args);
  }
};
using Embed = runner::Entry<Traits<EmbedProblem, EmbedParams>>;
using SiluMul = runner::Entry<Traits<SiluMulProblem, SiluMulParams>>;
using Argmax = runner::Entry<Traits<ArgmaxProblem, ArgmaxParams>>;

}  // namespace

Status canImplement(const EmbedProblem& p) {
  return Embed::canImplement(p);
}
Status canImplement(const EmbedProblem& p, int device_sm) {
  return Embed::canImplement(p, device_sm);
}
std::size_t workspaceSize(const EmbedProblem& p) {
  return Embed::workspaceSize(p);
}
Status run(const EmbedProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return Embed::run(p, workspace, workspace_bytes, stream);
}

Status canImplement(const SiluMulProblem& p) {
  return SiluMul::canImplement(p);
}
Status canImplement(const SiluMulProblem& p, int device_sm) {
  return SiluMul::canImplement(p, device_sm);
}
std::size_t workspaceSize(const SiluMulProblem& p) {
  return SiluMul::workspaceSize(p);
}
Status run(const SiluMulProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return SiluMul::run(p, workspace, workspace_bytes, stream);
}

Status canImplement(const ArgmaxProblem& p) {
  return Argmax::canImplement(p);
}
Status canImplement(const ArgmaxProblem& p, int device_sm) {
  return Argmax::canImplement(p, device_sm);
}
std::size_t workspaceSize(const ArgmaxProblem& p) {
  return Argmax::workspaceSize(p);
}
Status run(const ArgmaxProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return Argmax::run(p, workspace, workspace_bytes, stream);
}

}  // namespace kiln::decoderops
