// The rmsnorm runner (kiln/runners/rmsnorm.h) over the artifact's generated variant table.
// Compiled by `kiln build` into the artifact's library, next to the generated headers; kiln's own
// CMake builds only selector.cpp. Every decision is the selector's; this file adds the launch
// (which finds the device from the caller's stream).
#include "kiln/runners/rmsnorm.h"

#include <cstddef>
#include <span>

#include "kiln/groups/rmsnorm.h"
#include "kiln/runner_support.h"
#include "kiln/runtime.h"
#include "selector.h"

namespace kiln::rmsnorm {
namespace {

namespace generated = ::kiln::generated::rmsnorm;
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
  // launch() resolves the stream's device and picks its image; a device whose SM the artifact
  // lacks gets kNoKernelImage naming both, from the same selectImage canImplement uses.
  void* args[] = {&plan.params};
  return launch(*plan.variant, plan.entry, plan.config, stream, args);
}

}  // namespace kiln::rmsnorm
