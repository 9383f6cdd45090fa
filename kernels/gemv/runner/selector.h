// The gemv selector: the one function that decides both "is this problem supported?"
// (canImplement) and "which variant, entry and launch run it?" (run), so the two cannot disagree.
// Pure logic over a table of variants: no generated header, no driver call, so it is unit-tested
// on the host with a fake table and a fake image check. runner.cpp feeds it the artifact's table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gemv/params.h"
#include "kiln/runner_support.h"
#include "kiln/runners/gemv.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::gemv {

// The one entry kernel of each variant (gemv.cu), for every m.
inline constexpr const char kEntryName[] = "kiln_gemv";
inline constexpr unsigned kVectorAlignment = 16;  // x and w: the kernel's 16-byte vector loads
inline constexpr int kKGranule = 8;               // k, ldx: whole 16-byte vectors of fp16 / bf16
// Bytes of one tensor the kernel addresses, at most: its offsets are 64-bit.
inline constexpr std::int64_t kMaxTensorBytes = 9223372036854775807LL;

// The device a problem is admitted for (kiln/runner_support.h): the runtime's image check in the
// runner, a fake in unit tests.
using runner::DeviceQuery;
using runner::ImageCheck;
using runner::PointerChecks;

// What run() launches. Valid only when select() returned ok; nothing to launch when no_op.
struct Plan {
  const VariantInfo* info = nullptr;
  const kiln_variant* variant = nullptr;
  bool no_op = false;               // m == 0
  std::size_t workspace_bytes = 0;  // the group needs none (the contract is uniform)
  int entry = -1;                   // index of kiln_gemv in variant->entries
  LaunchConfig config;              // grid (ceil(n / 16)), block (256); programmatic: overlap
  GemvParams params{};              // ldx and ldy resolved (0 -> k, n)
};

// Bytes of one element of `dtype` (a DType value): 2 or 4.
int elementBytes(DType dtype);

// Admit `problem` against `table` and plan its launch. The checks, in order (the first failure is
// returned, its message naming the value and the limit):
//   dtype is a DType value (kInvalidArgument), fp16 or bf16 and built (kNotSupported, naming the
//   built dtypes)
//   out_dtype is dtype or fp32                                     (kInvalidArgument)
//   the variant has the entry kiln_gemv                            (kInternal)
//   m >= 0; m == 0: plan.no_op, and nothing else is checked but the device
//   m <= kMaxM; n in 1..kMaxN; k in 8..kMaxK and a multiple of 8; ldx (0: k) in k..kMaxLd and a
//   multiple of 8; ldy (0: n) in n..kMaxLd; w of n x k elements <= 2^63 - 1 bytes
//                                                                  (kInvalidArgument)
//   unless `pointers` is kSkip: x, w, y non-null; x and w 16-byte aligned (with ldx % 8 == 0
//   every row of x is); y aligned to its element (2 or 4 bytes); bias, when not null, 2-byte
//   aligned; y's bytes [y, y + ((m - 1) ldy + n) elements) do not overlap x's [x, x + ((m - 1)
//   ldx + k) elements), w's or bias's                              (kInvalidArgument)
//   last, `device` (when given) has an image of the variant         (the check's status)
// So select(device) equals select(nullptr) followed by checkDevice(). run() selects on the host
// and leaves the device step to kiln::launch, which applies the same selectImage to the stream's
// device; for a no-op it launches nothing and touches neither device nor stream.
Status select(std::span<const VariantInfo> table, const GemvProblem& problem,
              const DeviceQuery* device, Plan* plan,
              PointerChecks pointers = PointerChecks::kCheck);

// The device step of select() alone, for a plan already admitted on the host.
Status checkDevice(const Plan& plan, const DeviceQuery& device);

}  // namespace kiln::gemv
