// The qkrope selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant and launch run it?" (run), so the two cannot disagree. Pure
// logic over a table of variants: no generated header, no driver call, so it is unit-tested on the
// host with a fake table and a fake image check. runner.cpp feeds it the artifact's table.
#pragma once

#include <cstddef>
#include <span>

#include "kiln/runner_support.h"
#include "kiln/runners/qkrope.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"
#include "qkrope/params.h"

namespace kiln::qkrope {

inline constexpr const char kEntry[] = "kiln_qkrope";
inline constexpr unsigned kTensorAlignment = 16;      // the kernel's 16-byte vector accesses
inline constexpr unsigned kIndexAlignment = 8;        // int64 positions and slots
inline constexpr long long kMaxGridX = 2147483647LL;  // CUDA's limit for grid.x (tokens)

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // tokens == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;                   // index of kEntry in variant->entries
  LaunchConfig config;              // programmatic: overlap_launch
  QkRopeParams params{};
};

// Admits `problem` against `table` and plans its launch. The checks, in order (the first failure
// is returned, its message naming the value and the limit):
//   dtype is a known value and built; head_dim is built for it     (kInvalidArgument/kNotSupported)
//   the variant has the entry                                      (kInternal)
//   tokens >= 0; tokens == 0: plan.no_op, and nothing else is checked but the device
//   q_heads, kv_heads >= 1, q_heads % kv_heads == 0, q_heads + 2 * kv_heads <= 1024; rotary_dim
//   0 or a multiple of 16 in 16..head_dim; rope_theta finite and > 0; qk_norm: eps finite and
//   > 0; page_size a power of two in 16..256; kv_layout a KvLayout value; num_pages >= 1;
//   tokens <= 2^31 - 1 (grid.x)                                    (kInvalidArgument)
//   unless `pointers` is kSkip: qkv, q_out, k_cache, v_cache (and the norm weights with
//   qk_norm) non-null, they and k_out, v_out (when given) 16-byte aligned; positions,
//   slot_mapping non-null and 8-byte aligned                       (kInvalidArgument)
//   last, `device` (when given) has an image of the variant         (the check's status)
// So select(device) equals select(nullptr) followed by checkDevice(). run() selects on the host
// and leaves the device step to kiln::launch, which applies the same selectImage to the stream's
// device; for a no-op it launches nothing and touches neither device nor stream.
Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers = PointerChecks::kCheck);

// The device step of select() alone, for a plan already admitted on the host.
Status checkDevice(const Plan& plan, const DeviceQuery& device);

}  // namespace kiln::qkrope
