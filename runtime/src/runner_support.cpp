// kiln/runner_support.h: the checks every runner shares.
#include "kiln/runner_support.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "kiln/runtime.h"

namespace kiln::runner {

namespace {

std::string hex(std::uintptr_t a) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "0x%llx", static_cast<unsigned long long>(a));
  return buffer;
}

}  // namespace

Status checkPointer(const char* group, const char* name, const void* p, std::size_t alignment) {
  if (p == nullptr) {
    return Status(StatusCode::kInvalidArgument, std::string(group) + ": " + name + " is null");
  }
  if (alignment > 1 && reinterpret_cast<std::uintptr_t>(p) % alignment != 0) {
    return Status(StatusCode::kInvalidArgument, std::string(group) + ": pointer " + name + " (" +
                                                    hex(reinterpret_cast<std::uintptr_t>(p)) +
                                                    ") is not " + std::to_string(alignment) +
                                                    "-byte aligned");
  }
  return Status::Ok();
}

Status checkNoOverlap(const char* group, const char* a_name, const void* a, std::int64_t a_bytes,
                      const char* b_name, const void* b, std::int64_t b_bytes) {
  const auto ua = reinterpret_cast<std::uintptr_t>(a);
  const auto ub = reinterpret_cast<std::uintptr_t>(b);
  const auto na = static_cast<std::uintptr_t>(a_bytes), nb = static_cast<std::uintptr_t>(b_bytes);
  const bool overlap = na > 0 && nb > 0 && (ua <= ub ? ub - ua < na : ua - ub < nb);
  if (!overlap) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, std::string(group) + ": " + a_name + " [" + hex(ua) +
                                                  ", " + hex(ua + na) + ") overlaps " + b_name +
                                                  " [" + hex(ub) + ", " + hex(ub + nb) + ")");
}

Status checkHeads(const char* group, std::int64_t q_heads, std::int64_t kv_heads) {
  if (kv_heads < 1) {
    return Status(StatusCode::kInvalidArgument, std::string(group) + ": kv_heads " +
                                                    std::to_string(kv_heads) + " is not positive");
  }
  if (q_heads < 1 || q_heads % kv_heads != 0) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(group) + ": q_heads " + std::to_string(q_heads) +
                      " is not a positive multiple of kv_heads " + std::to_string(kv_heads));
  }
  return Status::Ok();
}

Status checkDtype(const char* group, DType dtype) {
  if (dtypeName(dtype) != nullptr) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, std::string(group) + ": dtype " +
                                                  std::to_string(static_cast<int>(dtype)) +
                                                  " is not a DType value (fp16, bf16 or fp32)");
}

Status checkPageSize(const char* group, int page_size) {
  if (page_size >= kMinPageSize && page_size <= kMaxPageSize && (page_size & (page_size - 1)) == 0)
    return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                std::string(group) + ": page_size " + std::to_string(page_size) +
                    " is not a power of two in " + std::to_string(kMinPageSize) + ".." +
                    std::to_string(kMaxPageSize));
}

PagedCacheStrides pagedCacheStrides(int page_size, int kv_heads, int head_dim, bool head_major) {
  PagedCacheStrides s;
  s.page_stride = static_cast<std::int64_t>(page_size) * kv_heads * head_dim;
  s.token_stride = head_major ? head_dim : kv_heads * head_dim;
  s.head_stride = head_major ? page_size * head_dim : head_dim;
  while ((1 << s.page_size_log2) < page_size) ++s.page_size_log2;
  return s;
}

int findEntry(const kiln_variant& variant, const char* entry) {
  for (int i = 0; i < variant.num_entries; ++i) {
    if (variant.entries[i] != nullptr && std::strcmp(variant.entries[i], entry) == 0) return i;
  }
  return -1;
}

Status checkImage(const kiln_variant& variant, int device_sm) {
  const kiln_image* image = nullptr;
  return selectImage(variant, device_sm, &image);
}

DeviceQuery deviceQuery(int device_sm, std::span<const int> supported_sms) {
  return DeviceQuery{device_sm, &checkImage, supported_sms};
}

Status checkDevice(const char* group, const kiln_variant* variant, const DeviceQuery& device) {
  if (variant == nullptr) {
    return Status(StatusCode::kInternal,
                  std::string(group) + ": checkDevice called without a selected variant");
  }
  if (!device.check_image) {
    return Status(StatusCode::kInternal, std::string(group) + ": no image check for device sm_" +
                                             std::to_string(device.sm));
  }
  return device.check_image(*variant, device.sm);
}

Status resolveEntry(const char* group, const char* name, const kiln_variant* (*variant)(),
                    const char* entry, const kiln_variant** resolved, int* index) {
  *resolved = variant != nullptr ? variant() : nullptr;
  if (*resolved == nullptr) {
    return Status(StatusCode::kInternal,
                  std::string(group) + ": variant " + name + " has no variant table");
  }
  *index = findEntry(**resolved, entry);
  if (*index < 0) {
    return Status(StatusCode::kInternal,
                  std::string(group) + ": variant " + name + " has no entry kernel " + entry);
  }
  return Status::Ok();
}

}  // namespace kiln::runner
