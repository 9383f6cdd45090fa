// What every group's runner shares: the device query its selector takes, the pointer, entry and
// device checks, and the "not built" messages, which must read the same in every group
// ("rmsnorm: pointer x (0x7f..01) is not 16-byte aligned"). Runners are compiled into artifacts
// with the runtime, so this lives in the runtime.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::runner {

// Whether a device of SM `device_sm` can run `variant`: checkImage (kiln::selectImage) in a
// runner, a fake in a selector's unit tests. Returns the runtime's status (kNoKernelImage, naming
// the SMs) on a miss.
using ImageCheck = std::function<Status(const kiln_variant& variant, int device_sm)>;

// The device a selector admits a problem for (canImplement(problem, device_sm)); selectors take a
// null query for host-only admission (run(), which leaves the device to kiln::launch).
struct DeviceQuery {
  int sm = 0;  // 10 * major + minor
  ImageCheck check_image;
  // kiln.toml's supported_sms of the group (the generated kSupportedSms), for a selector that
  // tells "no build can help" from "not in this artifact"; empty when not known.
  std::span<const int> supported_sms = {};
};

// Whether a selector checks the problem's pointers: kSkip for the questions that depend on the
// shapes alone (workspaceSize, which a caller asks before it has its tensors).
enum class PointerChecks { kCheck, kSkip };

// The query canImplement(problem, device_sm) passes: the runtime's own image check, and the
// group's supported SMs.
DeviceQuery deviceQuery(int device_sm, std::span<const int> supported_sms = {});

// `device`'s verdict on a selected variant: kInternal "<group>: ..." without a variant or an
// image check, else the image check's status.
Status checkDevice(const char* group, const kiln_variant* variant, const DeviceQuery& device);

// `variant()` of a table row named `name` and the index of its entry kernel `entry`; kInternal
// "<group>: variant <name> has no variant table" / "... has no entry kernel <entry>" otherwise.
Status resolveEntry(const char* group, const char* name, const kiln_variant* (*variant)(),
                    const char* entry, const kiln_variant** resolved, int* index);

// kInvalidArgument "<group>: <name> is null" or "<group>: pointer <name> (0x...) is not
// <alignment>-byte aligned"; Ok otherwise. A caller with an optional pointer skips null itself.
Status checkPointer(const char* group, const char* name, const void* p, std::size_t alignment);

// kInvalidArgument "<group>: out [0x1000, 0x3000) overlaps in [0x2000, 0x6000)" when the byte
// ranges [a, a + a_bytes) and [b, b + b_bytes) share a byte; Ok otherwise.
Status checkNoOverlap(const char* group, const char* a_name, const void* a, std::int64_t a_bytes,
                      const char* b_name, const void* b, std::int64_t b_bytes);

// GQA heads: kv_heads >= 1 and q_heads a positive multiple of it; kInvalidArgument "<group>:
// kv_heads 0 is not positive" / "<group>: q_heads 12 is not a positive multiple of kv_heads 8".
Status checkHeads(const char* group, std::int64_t q_heads, std::int64_t kv_heads);

// kInvalidArgument "<group>: dtype 7 is not a DType value (fp16, bf16 or fp32)" for a value outside
// the enum (dtypeName() names every value inside it); Ok otherwise.
Status checkDtype(const char* group, DType dtype);

// The paged KV cache that decodeattn reads, fmha reads and qkrope writes: pages of a power-of-two
// page_size in kMinPageSize..kMaxPageSize rows, element (page, row, kv head, i) at
// page * page_stride + row * token_stride + head * head_stride + i, NHD ([num_pages, page_size,
// kv_heads, head_dim]) or HND ([num_pages, kv_heads, page_size, head_dim]).
inline constexpr int kMinPageSize = 16;
inline constexpr int kMaxPageSize = 256;

struct PagedCacheStrides {
  std::int64_t page_stride = 0;
  std::int32_t token_stride = 0;
  std::int32_t head_stride = 0;
  std::int32_t page_size_log2 = 0;
};

// kInvalidArgument "<group>: page_size 48 is not a power of two in 16..256"; Ok otherwise.
Status checkPageSize(const char* group, int page_size);

// The strides of a cache of `page_size` (admitted by checkPageSize) rows of kv_heads x head_dim;
// head_major: HND, else NHD.
PagedCacheStrides pagedCacheStrides(int page_size, int kv_heads, int head_dim, bool head_major);

// The index of entry kernel `entry` in `variant.entries`, or -1.
int findEntry(const kiln_variant& variant, const char* entry);

// Whether `variant` has an image for a device of SM `device_sm` (selectImage's verdict and
// message); the device check behind every runner's canImplement(problem, device_sm).
Status checkImage(const kiln_variant& variant, int device_sm);

// The number of fields of the aggregate T: the most initializers T{...} accepts. The generated
// variant table (kiln/groups/<group>.h) checks with it that a runner's VariantInfo has exactly
// the fields kiln.toml declares, since initialization by field name leaves a missing one at zero.
namespace detail {
struct AnyField {
  template <typename T>
  constexpr operator T() const;  // never defined: used in unevaluated requires-expressions only
};
}  // namespace detail
template <typename T, typename... Fields>
constexpr std::size_t fieldCount() {
  if constexpr (requires { T{Fields{}..., detail::AnyField{}}; }) {
    return fieldCount<T, Fields..., detail::AnyField>();
  } else {
    return sizeof...(Fields);
  }
}

// "fp16, bf16": the distinct dtypes of a runner's variant table (any element type with a
// `DType dtype`), in table order; "none" for an empty table.
template <typename Info>
std::string builtDtypes(std::span<const Info> table) {
  std::vector<DType> seen;
  std::string list;
  for (const Info& v : table) {
    if (std::find(seen.begin(), seen.end(), v.dtype) != seen.end()) continue;
    seen.push_back(v.dtype);
    list += (list.empty() ? "" : ", ") + std::string(dtypeName(v.dtype));
  }
  return list.empty() ? "none" : list;
}

// kNotSupported "<group>: dtype <dtype> is not built; built dtypes: fp16, bf16".
template <typename Info>
Status dtypeNotBuilt(const char* group, DType dtype, std::span<const Info> table) {
  return Status(StatusCode::kNotSupported,
                std::string(group) + ": dtype " + dtypeName(dtype) +
                    " is not built; built dtypes: " + builtDtypes(table));
}

// "1024, 2048, 4096": `value(v)` of every variant built for `dtype`, in table order.
template <typename Info, typename Value>
std::string builtFor(std::span<const Info> table, DType dtype, Value value) {
  std::string list;
  for (const Info& v : table) {
    if (v.dtype != dtype) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(value(v));
  }
  return list;
}

// The row of `table` built for `dtype` (a value checked by checkDtype) whose `key(v)` is `want`, in
// *found: the lookup of a runner whose variants differ by dtype and one number. kNotSupported
// otherwise, naming what is built: "<group>: dtype fp16 is not built; built dtypes: bf16" when no
// row has the dtype, else "<group>: <key_name> 96 is not built for bf16; built for bf16: 128, 64".
template <typename Info, typename Key>
Status findBuilt(const char* group, std::span<const Info> table, DType dtype, const char* key_name,
                 std::int64_t want, Key key, const Info** found) {
  *found = nullptr;
  bool dtype_built = false;
  for (const Info& v : table) {
    if (v.dtype != dtype) continue;
    dtype_built = true;
    if (key(v) == want) {
      *found = &v;
      return Status::Ok();
    }
  }
  if (!dtype_built) return dtypeNotBuilt(group, dtype, table);
  const std::string name = dtypeName(dtype);
  return Status(StatusCode::kNotSupported, std::string(group) + ": " + key_name + " " +
                                               std::to_string(want) + " is not built for " + name +
                                               "; built for " + name + ": " +
                                               builtFor(table, dtype, key));
}

}  // namespace kiln::runner
