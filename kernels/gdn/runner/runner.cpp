// The gdn runner (kiln/runners/gdn.h) over the artifact's generated variant table: the four
// problems (decode in place, multi-token into a cache, the commit of the accepted states, prefill)
// go through the one selector and the common entry points (kiln/runner_entry.h). Compiled by `kiln
// build` into the artifact's library; kiln's own CMake builds only selector.cpp. The variant's
// cubin came from CuTe DSL, which changes nothing here: it is launched like any image.
#include "kiln/runners/gdn.h"

#include <cstddef>
#include <span>

#include "kiln/groups/gdn.h"
#include "kiln/runner_entry.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::gdn {
namespace {

namespace generated = ::kiln::generated::gdn;

// One pointer per kernel parameter, in the entry's order (DecodeArgs mirrors it).
Status launchArgs(const StreamTarget& target, Plan& plan) {
  DecodeArgs& a = plan.args;
  void* args[] = {&a.q,     &a.k,     &a.v,     &a.g,        &a.beta,
                  &a.a,     &a.b,     &a.a_log, &a.dt_bias,  &a.out,
                  &a.state, &a.slots, &a.scale, &a.heads_qk, &a.heads_v};
  return launch(target, *plan.variant, plan.entry, plan.config, args);
}

// The same for the multi-token entry (DecodeMtpArgs).
Status launchArgs(const StreamTarget& target, MtpPlan& plan) {
  DecodeMtpArgs& a = plan.args;
  void* args[] = {&a.q,     &a.k,        &a.v,       &a.g,      &a.beta,   &a.a,     &a.b,
                  &a.a_log, &a.dt_bias,  &a.out,     &a.state,  &a.slots,  &a.cache, &a.cache_slots,
                  &a.scale, &a.heads_qk, &a.heads_v, &a.tokens, &a.slotted};
  return launch(target, *plan.variant, plan.entry, plan.config, args);
}

// The same for the commit (CommitArgs).
Status launchArgs(const StreamTarget& target, CommitPlan& plan) {
  CommitArgs& a = plan.args;
  void* args[] = {&a.cache, &a.state, &a.slots, &a.accepted, &a.tokens, &a.heads_v};
  return launch(target, *plan.variant, plan.entry, plan.config, args);
}

// The traits of one of the three problems; the state stays in the caller's pool: no workspace.
template <typename P, typename PlanT>
struct Traits {
  using Problem = P;
  using Plan = PlanT;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks) {
    return gdn::select(generated::kVariants, problem, device, plan);
  }
  static Status launch(const Problem&, Plan& plan, const StreamTarget& target, const DeviceQuery&,
                       void*, std::size_t) {
    return launchArgs(target, plan);
  }
};
using Entry = runner::Entry<Traits<Problem, Plan>>;
using MtpEntry = runner::Entry<Traits<MtpProblem, MtpPlan>>;
using CommitEntry = runner::Entry<Traits<CommitProblem, CommitPlan>>;

// The prefill: the caller's workspace holds the chunk kernel's output, which the state kernel reads
// after it on the same stream; workspaceSize is from the shapes alone.
struct PrefillTraits {
  using Problem = PrefillProblem;
  using Plan = PrefillPlan;
  static constexpr std::span<const int> kSupportedSms = generated::kSupportedSms;

  static Status select(const Problem& problem, const DeviceQuery* device, Plan* plan,
                       runner::PointerChecks pointers) {
    return gdn::select(generated::kVariants, problem, device, plan, pointers);
  }
  static Status launch(const Problem&, Plan& plan, const StreamTarget& target, const DeviceQuery&,
                       void* workspace, std::size_t workspace_bytes) {
    KILN_RETURN_IF_ERROR(bindWorkspace(&plan, workspace, workspace_bytes));
    if (plan.chunk_pass) {
      PrefillChunkArgs& a = plan.chunk_args;
      void* args[] = {&a.q,          &a.k,     &a.v,     &a.g,        &a.beta,
                      &a.a,          &a.b,     &a.a_log, &a.dt_bias,  &a.slots,
                      &a.cu_seqlens, &a.ws_w,  &a.ws_u,  &a.ws_qd,    &a.ws_kd,
                      &a.ws_attn,    &a.ws_gc, &a.scale, &a.heads_qk, &a.heads_v};
      KILN_RETURN_IF_ERROR(
          kiln::launch(target, *plan.variant, plan.chunk_entry, plan.chunk_config, args));
    }
    PrefillStateArgs& a = plan.state_args;
    void* args[] = {
        &a.ws_w,   &a.ws_u,  &a.ws_qd, &a.ws_kd,      &a.ws_attn,           &a.ws_gc,
        &a.out,    &a.state, &a.slots, &a.cu_seqlens, &a.has_initial_state, &a.initial_given,
        &a.heads_v};
    return kiln::launch(target, *plan.variant, plan.state_entry, plan.state_config, args);
  }
};
using PrefillEntry = runner::Entry<PrefillTraits>;

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

Status canImplement(const MtpProblem& problem) {
  return MtpEntry::canImplement(problem);
}
Status canImplement(const MtpProblem& problem, int device_sm) {
  return MtpEntry::canImplement(problem, device_sm);
}
std::size_t workspaceSize(const MtpProblem& problem) {
  return MtpEntry::workspaceSize(problem);
}
Status run(const MtpProblem& problem, void* workspace, std::size_t workspace_bytes, Stream stream) {
  return MtpEntry::run(problem, workspace, workspace_bytes, stream);
}

Status canImplement(const CommitProblem& problem) {
  return CommitEntry::canImplement(problem);
}
Status canImplement(const CommitProblem& problem, int device_sm) {
  return CommitEntry::canImplement(problem, device_sm);
}
std::size_t workspaceSize(const CommitProblem& problem) {
  return CommitEntry::workspaceSize(problem);
}
Status run(const CommitProblem& problem, void* workspace, std::size_t workspace_bytes,
           Stream stream) {
  return CommitEntry::run(problem, workspace, workspace_bytes, stream);
}

Status canImplement(const PrefillProblem& problem) {
  return PrefillEntry::canImplement(problem);
}
Status canImplement(const PrefillProblem& problem, int device_sm) {
  return PrefillEntry::canImplement(problem, device_sm);
}
// Shapes only: a caller sizes the workspace before it has (or without passing) its tensors.
std::size_t workspaceSize(const PrefillProblem& problem) {
  return PrefillEntry::workspaceSize(problem);
}
Status run(const PrefillProblem& problem, void* workspace, std::size_t workspace_bytes,
           Stream stream) {
  return PrefillEntry::run(problem, workspace, workspace_bytes, stream);
}

}  // namespace kiln::gdn
