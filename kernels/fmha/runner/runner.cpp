// The fmha runner (kiln/runners/fmha.h) over the artifact's generated variant table. Compiled by
// `kiln build` into the artifact's library, next to the generated headers; kiln's own CMake
// builds only selector.cpp. Every decision is the selector's; this file adds the device (from the
// caller's stream: only sm_90 runs the wgmma kernels), encodes the three TMA tensor maps the
// selector described into the kernel parameters, and launches.
#include "kiln/runners/fmha.h"

#include <cstddef>
#include <span>
#include <string>

#include "kiln/groups/fmha.h"
#include "kiln/runner_support.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::fmha {
namespace {

namespace generated = ::kiln::generated::fmha;
// The artifact's variants, in the runner's own VariantInfo (kiln build generates the table).
constexpr std::span<const VariantInfo> kTable = generated::kVariants;

Status encode(const char* name, const TensorMapSpec& spec, TensorMap* out) {
  const Status s = encodeTensorMap(spec, out);
  if (s.ok()) return s;
  return Status(s.code(), std::string("fmha: ") + name + ": " + s.message());
}

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

// The kernel keeps its state on chip.
std::size_t workspaceSize(const Problem&) {
  return 0;
}

Status run(const Problem& problem, void*, std::size_t, Stream stream) {
  Plan plan;
  KILN_RETURN_IF_ERROR(select(kTable, problem, nullptr, &plan));
  if (plan.no_op) return Status::Ok();
  DeviceInfo info;
  KILN_RETURN_IF_ERROR(deviceForStream(stream, &info));
  KILN_RETURN_IF_ERROR(checkDevice(plan, runner::deviceQuery(info.sm, generated::kSupportedSms)));
  persistentGrid(&plan, info.multiprocessors);
  KILN_RETURN_IF_ERROR(encode("tma_q", plan.tma_q, &plan.params.tma_q));
  KILN_RETURN_IF_ERROR(encode("tma_k", plan.tma_k, &plan.params.tma_k));
  KILN_RETURN_IF_ERROR(encode("tma_v", plan.tma_v, &plan.params.tma_v));
  void* args[] = {&plan.params};
  return launch(*plan.variant, plan.entry, plan.launch, stream, args);
}

}  // namespace kiln::fmha
