// The qkrope selector (see selector.h): admission checks, variant choice and launch planning.
#include "selector.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kiln/runner_support.h"
#include "qkrope/launch.h"
#include "qkrope/rope.h"

namespace kiln::qkrope {
namespace {

std::string formatFloat(float v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", static_cast<double>(v));
  return buffer;
}

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "qkrope: " + message);
}

Status checkPointer(const char* name, const void* p, std::size_t alignment, bool required = true) {
  if (p == nullptr && !required) return Status::Ok();
  return runner::checkPointer("qkrope", name, p, alignment);
}

// inv_freq of (theta, rotary_dim) into `out` (rope.h), remembered per thread for the last pair:
// run() on a layer's every call asks for the same table, and the powers cost ~1 us per call.
void fillInvFreq(float theta, int rotary_dim, float* out) {
  struct Memo {
    float theta = 0.0f;
    int rotary_dim = 0;
    float inv_freq[kMaxRotaryPairs] = {};
  };
  thread_local Memo memo;
  if (memo.rotary_dim != rotary_dim || memo.theta != theta) {
    for (int i = 0; i < rotary_dim / 2; ++i) memo.inv_freq[i] = invFreq(theta, rotary_dim, i);
    memo.theta = theta;
    memo.rotary_dim = rotary_dim;
  }
  for (int i = 0; i < kMaxRotaryPairs; ++i) out[i] = i < rotary_dim / 2 ? memo.inv_freq[i] : 0.0f;
}

// Everything but the pointers and the device: the shape, the rotary and norm parameters, the cache.
Status checkShape(const Problem& problem, int head_dim) {
  KILN_RETURN_IF_ERROR(runner::checkHeads("qkrope", problem.q_heads, problem.kv_heads));
  const long long heads = static_cast<long long>(problem.q_heads) + 2LL * problem.kv_heads;
  if (heads > kMaxHeadsPerToken) {
    return invalid("q_heads + 2 * kv_heads = " + std::to_string(heads) + " exceeds the limit " +
                   std::to_string(kMaxHeadsPerToken));
  }
  if (problem.rotary_dim != 0 &&
      (problem.rotary_dim % kRotaryGranule != 0 || problem.rotary_dim < kRotaryGranule ||
       problem.rotary_dim > head_dim)) {
    return invalid("rotary_dim " + std::to_string(problem.rotary_dim) + " is not a multiple of " +
                   std::to_string(kRotaryGranule) + " in " + std::to_string(kRotaryGranule) + ".." +
                   std::to_string(head_dim) + " (0: head_dim)");
  }
  if (!std::isfinite(problem.rope_theta) || problem.rope_theta <= 0.0f) {
    return invalid("rope_theta " + formatFloat(problem.rope_theta) +
                   " is not a finite positive number");
  }
  if (problem.qk_norm && (!std::isfinite(problem.eps) || problem.eps <= 0.0f)) {
    return invalid("eps " + formatFloat(problem.eps) + " is not a finite positive number");
  }
  KILN_RETURN_IF_ERROR(runner::checkPageSize("qkrope", problem.page_size));
  if (problem.kv_layout != KvLayout::kNHD && problem.kv_layout != KvLayout::kHND) {
    return invalid("kv_layout " + std::to_string(static_cast<int>(problem.kv_layout)) +
                   " is not a KvLayout value (kNHD or kHND)");
  }
  if (problem.num_pages < 1) {
    return invalid("num_pages " + std::to_string(problem.num_pages) + " is not positive");
  }
  if (problem.tokens > kMaxGridX) {
    return invalid("tokens " + std::to_string(problem.tokens) + " exceeds the limit " +
                   std::to_string(kMaxGridX));
  }
  return Status::Ok();
}

Status checkPointers(const Problem& problem) {
  KILN_RETURN_IF_ERROR(checkPointer("qkv", problem.qkv, kTensorAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("positions", problem.positions, kIndexAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("slot_mapping", problem.slot_mapping, kIndexAlignment));
  if (problem.qk_norm) {
    KILN_RETURN_IF_ERROR(checkPointer("q_norm_weight", problem.q_norm_weight, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("k_norm_weight", problem.k_norm_weight, kTensorAlignment));
  }
  KILN_RETURN_IF_ERROR(checkPointer("q_out", problem.q_out, kTensorAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("k_cache", problem.k_cache, kTensorAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("v_cache", problem.v_cache, kTensorAlignment));
  KILN_RETURN_IF_ERROR(checkPointer("k_out", problem.k_out, kTensorAlignment, false));
  return checkPointer("v_out", problem.v_out, kTensorAlignment, false);
}

}  // namespace

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  return runner::checkDevice("qkrope", plan.variant, device);
}

Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "qkrope: select without a plan");
  *plan = Plan{};

  KILN_RETURN_IF_ERROR(runner::checkDtype("qkrope", problem.dtype));
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(runner::findBuilt(
      "qkrope", table, problem.dtype, "head_dim", problem.head_dim,
      [](const VariantInfo& v) { return v.head_dim; }, &info));
  KILN_RETURN_IF_ERROR(runner::resolveEntry("qkrope", info->name, info->variant, kEntry,
                                            &plan->variant, &plan->entry));
  plan->info = info;
  if (problem.tokens < 0) {
    return invalid("tokens " + std::to_string(problem.tokens) + " is negative");
  }
  if (problem.tokens == 0) {
    plan->no_op = true;
    return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
  }
  const int head_dim = info->head_dim;
  KILN_RETURN_IF_ERROR(checkShape(problem, head_dim));
  if (pointers == PointerChecks::kCheck) KILN_RETURN_IF_ERROR(checkPointers(problem));

  const int heads = problem.q_heads + 2 * problem.kv_heads;
  const LaunchShape shape = launchShape(head_dim, heads);
  if (!shape.valid) {
    return Status(StatusCode::kInternal, std::string("qkrope: variant ") + info->name +
                                             " has head_dim " + std::to_string(head_dim) +
                                             ", which has no launch shape");
  }
  plan->config.grid =
      Dim3{static_cast<unsigned>(problem.tokens), static_cast<unsigned>(shape.chunks), 1};
  plan->config.block = Dim3{static_cast<unsigned>(shape.threads_per_block), 1, 1};
  plan->config.shared_bytes = 0;  // the rotary table is static shared memory
  // The kernel waits for the kernel before (griddepcontrol.wait) before it touches global memory.
  plan->config.programmatic_dependency = problem.overlap_launch;

  QkRopeParams& params = plan->params;
  params.q_out = problem.q_out;
  params.k_cache = problem.k_cache;
  params.v_cache = problem.v_cache;
  params.k_out = problem.k_out;
  params.v_out = problem.v_out;
  params.qkv = problem.qkv;
  params.q_norm_weight = problem.qk_norm ? problem.q_norm_weight : nullptr;
  params.k_norm_weight = problem.qk_norm ? problem.k_norm_weight : nullptr;
  params.positions = problem.positions;
  params.slot_mapping = problem.slot_mapping;
  params.num_slots = static_cast<std::int64_t>(problem.num_pages) * problem.page_size;
  const runner::PagedCacheStrides strides = runner::pagedCacheStrides(
      problem.page_size, problem.kv_heads, head_dim, problem.kv_layout == KvLayout::kHND);
  params.page_stride = strides.page_stride;
  params.token_stride = strides.token_stride;
  params.head_stride = strides.head_stride;
  params.page_size_log2 = strides.page_size_log2;
  params.q_heads = problem.q_heads;
  params.kv_heads = problem.kv_heads;
  params.rows_per_block = shape.rows_per_block;
  params.rotary_dim = problem.rotary_dim != 0 ? problem.rotary_dim : head_dim;
  params.qk_norm = problem.qk_norm ? 1 : 0;
  params.eps = problem.qk_norm ? problem.eps : 0.0f;
  fillInvFreq(problem.rope_theta, params.rotary_dim, params.inv_freq);
  // Last, so that select(device) == select(host) followed by checkDevice.
  return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
}

}  // namespace kiln::qkrope
