// The rmsnorm selector (see selector.h): admission checks, variant choice and launch planning.
#include "selector.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kiln/runner_support.h"
#include "rmsnorm/launch.h"

namespace kiln::rmsnorm {
namespace {

std::string formatFloat(float v) {
  // Shortest round-trip text is not needed; enough digits to tell 1e-6 from 0 and from -1e-6.
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", static_cast<double>(v));
  return buffer;
}

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "rmsnorm: " + message);
}

Status checkPointer(const char* name, const void* p, bool required) {
  if (p == nullptr && !required) return Status::Ok();
  return runner::checkPointer("rmsnorm", name, p, kRequiredAlignment);
}

}  // namespace

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  return runner::checkDevice("rmsnorm", plan.variant, device);
}

Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "rmsnorm: select without a plan");
  *plan = Plan{};

  KILN_RETURN_IF_ERROR(runner::checkDtype("rmsnorm", problem.dtype));
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(runner::findBuilt(
      "rmsnorm", table, problem.dtype, "hidden", problem.hidden,
      [](const VariantInfo& v) { return v.hidden; }, &info));
  if (problem.rows < 0) return invalid("rows " + std::to_string(problem.rows) + " is negative");
  if (!std::isfinite(problem.eps) || problem.eps <= 0.0f) {
    return invalid("eps " + formatFloat(problem.eps) + " is not a finite positive number");
  }

  const LaunchShape shape = launchShape(info->hidden, 2);  // fp16 and bf16: 2 bytes
  if (!shape.valid) {
    return Status(StatusCode::kInternal, std::string("rmsnorm: variant ") + info->name +
                                             " has hidden " + std::to_string(info->hidden) +
                                             ", which has no launch shape");
  }
  const char* entry = problem.residual != nullptr ? kFusedEntry : kPlainEntry;
  KILN_RETURN_IF_ERROR(runner::resolveEntry("rmsnorm", info->name, info->variant, entry,
                                            &plan->variant, &plan->entry));
  plan->info = info;
  if (problem.rows == 0) {
    plan->no_op = true;
    return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
  }
  KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, true));
  KILN_RETURN_IF_ERROR(checkPointer("x", problem.x, true));
  KILN_RETURN_IF_ERROR(checkPointer("residual", problem.residual, false));
  KILN_RETURN_IF_ERROR(checkPointer("weight", problem.weight, true));

  const long long blocks = blocksForRows(problem.rows, shape);
  if (blocks > kMaxGridX) {
    return invalid("rows " + std::to_string(problem.rows) + " exceeds the limit " +
                   std::to_string(kMaxGridX * shape.rows_per_block) + " for hidden " +
                   std::to_string(info->hidden));
  }
  plan->config.grid = Dim3{static_cast<unsigned>(blocks), 1, 1};
  plan->config.block = Dim3{static_cast<unsigned>(shape.threads_per_block), 1, 1};
  plan->config.shared_bytes = 0;  // the kernel's reduction uses static shared memory only
  plan->config.programmatic_dependency = problem.overlap_launch;
  plan->params = RmsnormParams{problem.out,    problem.x,    problem.residual,
                               problem.weight, problem.rows, problem.eps};
  // Last, so that select(device) == select(host) followed by checkDevice.
  return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
}

}  // namespace kiln::rmsnorm
