// The decoderops selector: for each of the three problems, the one function that decides both "is
// this problem supported?" (canImplement) and "which variant and launch run it?" (run), so the two
// cannot disagree. Pure logic over a table of variants: no generated header, no driver call, so it
// is unit-tested on the host with a fake table and a fake image check. runner.cpp feeds it the
// artifact's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "decoderops/params.h"
#include "kiln/runner_support.h"
#include "kiln/runners/decoderops.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::decoderops {

inline constexpr const char kEmbedEntry[] = "kiln_embed";
inline constexpr const char kSiluMulEntry[] = "kiln_silu_mul";
inline constexpr const char kArgmaxEntry[] = "kiln_argmax";
inline constexpr unsigned kRowAlignment = 16;   // the kernels' 16-byte vector accesses
inline constexpr unsigned kIndexAlignment = 4;  // int32 ids and argmax's out
inline constexpr int kWidthGranule = 8;         // embed / silu_mul widths: 16-byte rows in fp16
// Bytes of one tensor the kernels address, at most: their offsets are 64-bit.
inline constexpr std::int64_t kMaxTensorBytes = 9223372036854775807LL;

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// What run() launches for one problem. Valid only when select() returned ok; nothing to launch
// when no_op.
template <typename Params>
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // tokens (argmax: rows) == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;                   // index of the problem's entry in variant->entries
  LaunchConfig config;              // programmatic_dependency: the problem's overlap_launch
  Params params{};
};
using EmbedPlan = Plan<EmbedParams>;
using SiluMulPlan = Plan<SiluMulParams>;
using ArgmaxPlan = Plan<ArgmaxParams>;

// Bytes of one element of `dtype` (a DType value): 2 or 4.
int elementBytes(DType dtype);

// Admit `problem` against `table` and plan its launch. The checks, in order (the first failure is
// returned, its message naming the value and the limit):
//   dtype is a DType value and built                               (kInvalidArgument/kNotSupported)
//   the variant has the problem's entry                            (kInternal)
//   tokens (argmax: rows) >= 0; == 0: plan.no_op, and nothing else is checked but the device
//   tokens (rows) <= 2^31 - 1 (grid.x); embed: rows >= 0; width > 0, <= 2^31 - 1 and (embed,
//   silu_mul) a multiple of 8; every tensor the kernel addresses <= 2^63 - 1 bytes
//                                                                  (kInvalidArgument)
//   unless `pointers` is kSkip: pointers non-null and aligned (rows 16 bytes; argmax's x 16 bytes
//   when width * element bytes % 16 == 0, else the element's size; ids and argmax's out 4
//   bytes); embed's out does not overlap table, silu_mul's out does not overlap in
//                                                                  (kInvalidArgument)
//   last, `device` (when given) has an image of the variant         (the check's status)
// So select(device) equals select(nullptr) followed by checkDevice(). run() selects on the host
// and leaves the device step to kiln::launch, which applies the same selectImage to the stream's
// device; for a no-op it launches nothing and touches neither device nor stream.
Status select(std::span<const VariantInfo> table, const EmbedProblem& problem,
              const DeviceQuery* device, EmbedPlan* plan,
              PointerChecks pointers = PointerChecks::kCheck);
Status select(std::span<const VariantInfo> table, const SiluMulProblem& problem,
              const DeviceQuery* device, SiluMulPlan* plan,
              PointerChecks pointers = PointerChecks::kCheck);
Status select(std::span<const VariantInfo> table, const ArgmaxProblem& problem,
              const DeviceQuery* device, ArgmaxPlan* plan,
              PointerChecks pointers = PointerChecks::kCheck);

// The device step of select() alone, for a plan already admitted on the host.
template <typename Params>
Status checkDevice(const Plan<Params>& plan, const DeviceQuery& device) {
  return runner::checkDevice("decoderops", plan.variant, device);
}

}  // namespace kiln::decoderops
