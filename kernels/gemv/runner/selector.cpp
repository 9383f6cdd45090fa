// The gemv selector (see selector.h): admission checks, variant and entry choice, launch planning.
#include "selector.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "kiln/runner_support.h"

#include "gemv/launch.h"

namespace kiln::gemv {
namespace {

constexpr const char kGroup[] = "gemv";

static_assert(kMaxTokens == kMaxM, "one launch serves the mma tile's kMaxM tokens");
// Grid.x of the widest problem: n <= kMaxN needs no check of its own.
static_assert(blocksOf(kMaxN) <= 2147483647LL, "blocksOf(n) fits CUDA's grid.x");
static_assert(kElementsPerVector == kKGranule && kVectorAlignment == 16,
              "k and ldx come in the kernel's 16-byte vectors");

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, std::string(kGroup) + ": " + message);
}

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// "fp16", or the number of a value outside the enum.
std::string nameOf(DType dtype) {
  const char* name = dtypeName(dtype);
  return name != nullptr ? std::string(name) : str(static_cast<int>(dtype));
}

// The variant built for `dtype` (fp16 or bf16) into the plan; kNotSupported naming the built
// dtypes otherwise (fp32 included: x and w are 16-bit; a float32 y is out_dtype's).
Status findVariant(std::span<const VariantInfo> table, DType dtype, Plan* plan) {
  KILN_RETURN_IF_ERROR(runner::checkDtype(kGroup, dtype));
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    for (const VariantInfo& v : table) {
      if (v.dtype == dtype) {
        plan->info = &v;
        return Status::Ok();
      }
    }
  }
  return runner::dtypeNotBuilt(kGroup, dtype, table);
}

Status checkOutDtype(DType dtype, DType out_dtype) {
  if (out_dtype == dtype || out_dtype == DType::kFloat32) return Status::Ok();
  return invalid("out_dtype " + nameOf(out_dtype) + " is neither the dtype (" + nameOf(dtype) +
                 ") nor fp32");
}

// n, k, ldx, ldy (resolved) and w's size; m is checked by the caller.
Status checkShape(const GemvProblem& p, std::int64_t ldx, std::int64_t ldy) {
  if (p.n <= 0) return invalid("n " + str(p.n) + " is not positive");
  if (p.n > kMaxN) return invalid("n " + str(p.n) + " exceeds the limit " + str(kMaxN));
  if (p.k < kKGranule) {
    return invalid("k " + str(p.k) + " is below the minimum " + str(kKGranule));
  }
  if (p.k % kKGranule != 0) {
    return invalid("k " + str(p.k) + " is not a multiple of " + str(kKGranule));
  }
  if (p.k > kMaxK) return invalid("k " + str(p.k) + " exceeds the limit " + str(kMaxK));
  // The bounds first, so that a negative ldx reads "less than k", not "not a multiple".
  if (ldx < p.k) return invalid("ldx " + str(ldx) + " is less than k " + str(p.k));
  if (ldx > kMaxLd) return invalid("ldx " + str(ldx) + " exceeds the limit " + str(kMaxLd));
  if (ldx % kKGranule != 0) {
    return invalid("ldx " + str(ldx) + " is not a multiple of " + str(kKGranule) +
                   " (rows of x are read as 16-byte vectors)");
  }
  if (ldy < p.n) return invalid("ldy " + str(ldy) + " is less than n " + str(p.n));
  if (ldy > kMaxLd) return invalid("ldy " + str(ldy) + " exceeds the limit " + str(kMaxLd));
  const std::int64_t row_bytes = p.k * elementBytes(p.dtype);  // <= 2^35
  if (p.n > kMaxTensorBytes / row_bytes) {
    return invalid("w of " + str(p.n) + " x " + str(p.k) + " " + nameOf(p.dtype) +
                   " elements exceeds 2^63 - 1 bytes");
  }
  return Status::Ok();
}

Status checkPointer(const char* name, const void* p, std::size_t alignment) {
  return runner::checkPointer(kGroup, name, p, alignment);
}

Status finish(const Plan& plan, const DeviceQuery* device) {
  // Last, so that select(device) == select(host) followed by checkDevice.
  return device != nullptr ? checkDevice(plan, *device) : Status::Ok();
}

}  // namespace

int elementBytes(DType dtype) {
  return dtype == DType::kFloat32 ? 4 : 2;
}

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  return runner::checkDevice(kGroup, plan.variant, device);
}

Status select(std::span<const VariantInfo> table, const GemvProblem& problem,
              const DeviceQuery* device, Plan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "gemv: select without a plan");
  *plan = Plan{};
  KILN_RETURN_IF_ERROR(findVariant(table, problem.dtype, plan));
  KILN_RETURN_IF_ERROR(checkOutDtype(problem.dtype, problem.out_dtype));
  KILN_RETURN_IF_ERROR(runner::resolveEntry(kGroup, plan->info->name, plan->info->variant,
                                            kEntryName, &plan->variant, &plan->entry));
  const std::int64_t m = problem.m;
  if (m < 0) return invalid("m " + str(m) + " is negative");
  if (m == 0) {
    plan->no_op = true;
    return finish(*plan, device);
  }
  if (m > kMaxM) {
    return invalid("m " + str(m) + " exceeds the limit " + str(kMaxM) +
                   " (the token columns of one mma tile)");
  }
  const std::int64_t ldx = problem.ldx != 0 ? problem.ldx : problem.k;
  const std::int64_t ldy = problem.ldy != 0 ? problem.ldy : problem.n;
  KILN_RETURN_IF_ERROR(checkShape(problem, ldx, ldy));
  const bool y_fp32 = problem.out_dtype == DType::kFloat32;
  if (pointers == PointerChecks::kCheck) {
    const int elt = elementBytes(problem.dtype);
    const int y_elt = elementBytes(problem.out_dtype);
    KILN_RETURN_IF_ERROR(checkPointer("x", problem.x, kVectorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("w", problem.w, kVectorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("y", problem.y, static_cast<std::size_t>(y_elt)));
    if (problem.bias != nullptr) {
      KILN_RETURN_IF_ERROR(checkPointer("bias", problem.bias, static_cast<std::size_t>(elt)));
    }
    // The bytes the kernel may touch: rows 0 .. m - 2 whole, the last one up to k (x) or n (y).
    // Below 2^63 by the limits on ldx, ldy and w.
    const std::int64_t x_bytes = ((m - 1) * ldx + problem.k) * elt;
    const std::int64_t y_bytes = ((m - 1) * ldy + problem.n) * y_elt;
    KILN_RETURN_IF_ERROR(
        runner::checkNoOverlap(kGroup, "y", problem.y, y_bytes, "x", problem.x, x_bytes));
    KILN_RETURN_IF_ERROR(runner::checkNoOverlap(kGroup, "y", problem.y, y_bytes, "w", problem.w,
                                                problem.n * problem.k * elt));
    if (problem.bias != nullptr) {
      KILN_RETURN_IF_ERROR(runner::checkNoOverlap(kGroup, "y", problem.y, y_bytes, "bias",
                                                  problem.bias, problem.n * elt));
    }
  }
  plan->config.grid = Dim3{static_cast<unsigned>(blocksOf(problem.n)), 1, 1};
  plan->config.block = Dim3{static_cast<unsigned>(kThreads), 1, 1};
  plan->config.shared_bytes = 0;  // registers and L1 only
  plan->config.programmatic_dependency = problem.overlap_launch;
  GemvParams& params = plan->params;
  params.y = problem.y;
  params.x = problem.x;
  params.w = problem.w;
  params.bias = problem.bias;
  params.ldx = ldx;
  params.ldy = ldy;
  params.m = static_cast<std::int32_t>(m);
  params.n = static_cast<std::int32_t>(problem.n);
  params.k_vectors = static_cast<std::int32_t>(problem.k / kElementsPerVector);
  params.y_fp32 = y_fp32 ? 1 : 0;
  return finish(*plan, device);
}

}  // namespace kiln::gemv
