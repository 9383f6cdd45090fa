// The gdn selector (see selector.h): admission checks, variant choice and launch planning.
#include "selector.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "gdn/launch.h"
#include "kiln/runner_support.h"

namespace kiln::gdn {
namespace {

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "gdn: " + message);
}

Status checkPointer(const char* name, const void* p, std::size_t alignment) {
  return runner::checkPointer("gdn", name, p, alignment);
}

std::string builtList(std::span<const VariantInfo> table) {
  std::string list;
  for (const VariantInfo& v : table) {
    list += (list.empty() ? "" : ", ") + std::to_string(v.head_dim_k) + "x" +
            std::to_string(v.head_dim_v) + " " + v.dtype;
  }
  return list.empty() ? "none" : list;
}

}  // namespace

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
  }
  return nullptr;
}

Status select(std::span<const VariantInfo> table, const Problem& p, const DeviceQuery* device,
              Plan* plan) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "gdn: select without a plan");
  *plan = Plan{};
  const char* dtype = dtypeName(p.dtype);
  if (dtype == nullptr) {
    return invalid("dtype " + std::to_string(static_cast<int>(p.dtype)) + " is not fp16 or bf16");
  }
  const VariantInfo* info = nullptr;
  for (const VariantInfo& v : table) {
    if (std::strcmp(v.dtype, dtype) == 0 && v.head_dim_k == p.head_dim_k && v.head_dim_v == p.head_dim_v) {
      info = &v;
      break;
    }
  }
  if (info == nullptr) {
    return Status(StatusCode::kNotSupported,
                  "gdn: head dims " + std::to_string(p.head_dim_k) + "x" + std::to_string(p.head_dim_v) +
                      " are not built for " + dtype + "; built (d_k x d_v dtype): " + builtList(table));
  }
  if (p.heads_qk < 1) return invalid("heads_qk " + std::to_string(p.heads_qk) + " must be >= 1");
  if (p.heads_v < p.heads_qk || p.heads_v % p.heads_qk != 0) {
    return invalid("heads_v " + std::to_string(p.heads_v) + " must be a multiple of heads_qk " +
                   std::to_string(p.heads_qk));
  }
  if (p.batch < 0) return invalid("batch " + std::to_string(p.batch) + " must be >= 0");
  if (!std::isfinite(p.scale)) return invalid("scale is not finite");
  if (p.heads_v > kMaxGridYZ || p.batch > kMaxGridYZ) {
    return invalid("batch " + std::to_string(p.batch) + " and heads_v " + std::to_string(p.heads_v) +
                   " must each be <= " + std::to_string(kMaxGridYZ) + " (grid y/z limit)");
  }
  plan->info = info;
  plan->variant = info->variant();
  plan->entry = runner::findEntry(*plan->variant, kDecodeEntry);
  if (plan->entry < 0) {
    return Status(StatusCode::kInternal,
                  std::string("gdn: variant ") + info->name + " has no entry " + kDecodeEntry);
  }
  if (p.batch == 0) {
    plan->no_op = true;
  } else {
    if (p.num_slots < 1) return invalid("num_slots " + std::to_string(p.num_slots) + " must be >= 1");
    KILN_RETURN_IF_ERROR(checkPointer("q", p.q, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("k", p.k, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("v", p.v, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("out", p.out, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("state", p.state, kActivationAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("g", p.g, alignof(float)));
    KILN_RETURN_IF_ERROR(checkPointer("beta", p.beta, alignof(float)));
    KILN_RETURN_IF_ERROR(checkPointer("slots", p.slots, alignof(std::int32_t)));
    const LaunchShape shape = launchShape(info->head_dim_v, info->tile_v, p.heads_v, p.batch);
    if (!shape.valid) {
      return Status(StatusCode::kInternal, std::string("gdn: no launch shape for ") + info->name);
    }
    plan->config.grid = {shape.grid_x, shape.grid_y, shape.grid_z};
    plan->config.block = {shape.block_x, 1, 1};
    plan->args = DecodeArgs{p.q,     p.k,     p.v,
                            p.g,     p.beta,  p.out,
                            p.state, p.slots, p.scale,
                            static_cast<std::int32_t>(p.heads_qk), static_cast<std::int32_t>(p.heads_v)};
  }
  if (device != nullptr) {
    if (!device->check_image) return Status(StatusCode::kInternal, "gdn: no image check");
    return device->check_image(*plan->variant, device->sm);
  }
  return Status::Ok();
}

}  // namespace kiln::gdn
