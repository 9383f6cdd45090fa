// The gdn runner (kiln/runners/gdn.h) over the artifact's generated variant table: both problems
// (decode in place, multi-token into a cache) go through the one selector. Compiled by
// `kiln build` into the artifact's library; kiln's own CMake builds only selector.cpp. The
// variant's cubin came from CuTe DSL, which changes nothing here: it is launched like any image.
#include "kiln/runners/gdn.h"

#include <cstddef>
#include <span>

#include "kiln/groups/gdn.h"
#include "kiln/runner_support.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::gdn {
namespace {

namespace generated = ::kiln::generated::gdn;
// The artifact's variants, in the runner's own VariantInfo (kiln build generates the table).
constexpr std::span<const VariantInfo> kTable = generated::kVariants;

}  // namespace

Status canImplement(const Problem& problem) {
  Plan plan;
  return select(kTable, problem, nullptr, &plan);
}

Status canImplement(const Problem& problem, int device_sm) {
  const DeviceQuery device = runner::deviceQuery(device_sm, generated::kSupportedSms);
  Plan plan;
  return select(kTable, problem, &device, &plan);
}

std::size_t workspaceSize(const Problem& /*problem*/) {
  return 0;
}

Status run(const Problem& problem, void* /*workspace*/, std::size_t /*workspace_bytes*/,
           Stream stream) {
  Plan plan;
  KILN_RETURN_IF_ERROR(select(kTable, problem, nullptr, &plan));
  if (plan.no_op) return Status::Ok();
  DecodeArgs& a = plan.args;
  // One pointer per kernel parameter, in the entry's order (DecodeArgs mirrors it).
  void* args[] = {&a.q,     &a.k,     &a.v,     &a.g,        &a.beta,
                  &a.a,     &a.b,     &a.a_log, &a.dt_bias,  &a.out,
                  &a.state, &a.slots, &a.scale, &a.heads_qk, &a.heads_v};
  return launch(*plan.variant, plan.entry, plan.config, stream, args);
}

Status canImplement(const MtpProblem& problem) {
  MtpPlan plan;
  return select(kTable, problem, nullptr, &plan);
}

Status canImplement(const MtpProblem& problem, int device_sm) {
  const DeviceQuery device = runner::deviceQuery(device_sm, generated::kSupportedSms);
  MtpPlan plan;
  return select(kTable, problem, &device, &plan);
}

std::size_t workspaceSize(const MtpProblem& /*problem*/) {
  return 0;
}

Status run(const MtpProblem& problem, void* /*workspace*/, std::size_t /*workspace_bytes*/,
           Stream stream) {
  MtpPlan plan;
  KILN_RETURN_IF_ERROR(select(kTable, problem, nullptr, &plan));
  if (plan.no_op) return Status::Ok();
  DecodeMtpArgs& a = plan.args;
  // One pointer per kernel parameter, in the entry's order (DecodeMtpArgs mirrors it).
  void* args[] = {&a.q,     &a.k,        &a.v,       &a.g,      &a.beta,   &a.a,     &a.b,
                  &a.a_log, &a.dt_bias,  &a.out,     &a.state,  &a.slots,  &a.cache, &a.cache_slots,
                  &a.scale, &a.heads_qk, &a.heads_v, &a.tokens, &a.slotted};
  return launch(*plan.variant, plan.entry, plan.config, stream, args);
}

}  // namespace kiln::gdn
