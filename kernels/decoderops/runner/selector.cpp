// The decoderops selector (see selector.h): admission checks, variant choice and launch planning
// for the three problems.
#include "selector.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include "decoderops/launch.h"
#include "kiln/runner_support.h"

namespace kiln::decoderops {
namespace {

constexpr const char kGroup[] = "decoderops";

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, std::string(kGroup) + ": " + message);
}

// The variant built for `dtype` and its entry `entry`, into the plan.
template <typename Params>
Status findVariant(std::span<const VariantInfo> table, DType dtype, const char* entry,
                   Plan<Params>* plan) {
  KILN_RETURN_IF_ERROR(runner::checkDtype(kGroup, dtype));
  const VariantInfo* info = nullptr;
  for (const VariantInfo& v : table) {
    if (v.dtype == dtype) {
      info = &v;
      break;
    }
  }
  if (info == nullptr) return runner::dtypeNotBuilt(kGroup, dtype, table);
  KILN_RETURN_IF_ERROR(
      runner::resolveEntry(kGroup, info->name, info->variant, entry, &plan->variant, &plan->entry));
  plan->info = info;
  return Status::Ok();
}

Status checkNotNegative(const char* name, std::int64_t n) {
  if (n < 0) return invalid(std::string(name) + " " + std::to_string(n) + " is negative");
  return Status::Ok();
}

// tokens (argmax: rows) are grid.x.
Status checkGridX(const char* name, std::int64_t n) {
  if (n > kMaxTokens) {
    return invalid(std::string(name) + " " + std::to_string(n) + " exceeds the limit " +
                   std::to_string(kMaxTokens));
  }
  return Status::Ok();
}

// width > 0, <= kMaxWidth (indices are int32), and a multiple of 8 when `granule`.
Status checkWidth(std::int64_t width, bool granule) {
  if (width <= 0) return invalid("width " + std::to_string(width) + " is not positive");
  if (width > kMaxWidth) {
    return invalid("width " + std::to_string(width) + " exceeds the limit " +
                   std::to_string(kMaxWidth));
  }
  if (granule && width % kWidthGranule != 0) {
    return invalid("width " + std::to_string(width) + " is not a multiple of " +
                   std::to_string(kWidthGranule));
  }
  return Status::Ok();
}

// A tensor of rows x cols elements of `dtype` (cols checked by checkWidth, rows >= 0) is at most
// kMaxTensorBytes: "<name> of 2147483647 x 2147483640 fp32 elements exceeds 2^63 - 1 bytes".
Status checkBytes(const char* name, std::int64_t rows, std::int64_t cols, DType dtype) {
  const std::int64_t row_bytes = cols * elementBytes(dtype);  // <= 2^33
  if (rows > kMaxTensorBytes / row_bytes) {
    return invalid(std::string(name) + " of " + std::to_string(rows) + " x " +
                   std::to_string(cols) + " " + dtypeName(dtype) +
                   " elements exceeds 2^63 - 1 bytes");
  }
  return Status::Ok();
}

Status checkPointer(const char* name, const void* p, std::size_t alignment) {
  return runner::checkPointer(kGroup, name, p, alignment);
}

// The element-wise launch of `tokens` rows of `row_vectors` output vectors.
LaunchConfig elementwiseLaunch(std::int64_t tokens, std::int64_t row_vectors) {
  LaunchConfig config;
  config.grid =
      Dim3{static_cast<unsigned>(tokens), static_cast<unsigned>(gridChunks(row_vectors)), 1};
  config.block = Dim3{static_cast<unsigned>(kElementwiseThreads), 1, 1};
  config.shared_bytes = 0;
  return config;
}

template <typename Params>
Status finish(const Plan<Params>& plan, const DeviceQuery* device) {
  // Last, so that select(device) == select(host) followed by checkDevice.
  return device != nullptr ? checkDevice(plan, *device) : Status::Ok();
}

}  // namespace

int elementBytes(DType dtype) {
  return dtype == DType::kFloat32 ? 4 : 2;
}

Status select(std::span<const VariantInfo> table, const EmbedProblem& problem,
              const DeviceQuery* device, EmbedPlan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "decoderops: select without a plan");
  *plan = EmbedPlan{};
  KILN_RETURN_IF_ERROR(findVariant(table, problem.dtype, kEmbedEntry, plan));
  KILN_RETURN_IF_ERROR(checkNotNegative("tokens", problem.tokens));
  if (problem.tokens == 0) {
    plan->no_op = true;
    return finish(*plan, device);
  }
  KILN_RETURN_IF_ERROR(checkGridX("tokens", problem.tokens));
  KILN_RETURN_IF_ERROR(checkNotNegative("rows", problem.rows));
  KILN_RETURN_IF_ERROR(checkWidth(problem.width, true));
  KILN_RETURN_IF_ERROR(checkBytes("table", problem.rows, problem.width, problem.dtype));
  KILN_RETURN_IF_ERROR(checkBytes("out", problem.tokens, problem.width, problem.dtype));
  const std::int64_t row_bytes = problem.width * elementBytes(problem.dtype);
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("ids", problem.ids, kIndexAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("table", problem.table, kRowAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, kRowAlignment));
    if (problem.rows > 0) {
      KILN_RETURN_IF_ERROR(runner::checkNoOverlap(kGroup, "out", problem.out,
                                                  problem.tokens * row_bytes, "table",
                                                  problem.table, problem.rows * row_bytes));
    }
  }
  const std::int64_t row_vectors = row_bytes / kVectorBytes;
  plan->config = elementwiseLaunch(problem.tokens, row_vectors);
  plan->config.programmatic_dependency = problem.overlap_launch;
  EmbedParams& params = plan->params;
  params.out = problem.out;
  params.table = problem.table;
  params.ids = problem.ids;
  params.rows = problem.rows;
  params.row_vectors = static_cast<std::int32_t>(row_vectors);
  params.chunks = static_cast<std::int32_t>(chunksOf(row_vectors));
  return finish(*plan, device);
}

Status select(std::span<const VariantInfo> table, const SiluMulProblem& problem,
              const DeviceQuery* device, SiluMulPlan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "decoderops: select without a plan");
  *plan = SiluMulPlan{};
  KILN_RETURN_IF_ERROR(findVariant(table, problem.dtype, kSiluMulEntry, plan));
  KILN_RETURN_IF_ERROR(checkNotNegative("tokens", problem.tokens));
  if (problem.tokens == 0) {
    plan->no_op = true;
    return finish(*plan, device);
  }
  KILN_RETURN_IF_ERROR(checkGridX("tokens", problem.tokens));
  KILN_RETURN_IF_ERROR(checkWidth(problem.width, true));
  // in's rows are 2 * width: checked as tokens x (2 * width) (<= 2^32, no overflow).
  KILN_RETURN_IF_ERROR(checkBytes("in", problem.tokens, 2 * problem.width, problem.dtype));
  const std::int64_t row_bytes = problem.width * elementBytes(problem.dtype);
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("in", problem.in, kRowAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, kRowAlignment));
    KILN_RETURN_IF_ERROR(runner::checkNoOverlap(kGroup, "out", problem.out,
                                                problem.tokens * row_bytes, "in", problem.in,
                                                2 * problem.tokens * row_bytes));
  }
  const std::int64_t row_vectors = row_bytes / kVectorBytes;
  plan->config = elementwiseLaunch(problem.tokens, row_vectors);
  plan->config.programmatic_dependency = problem.overlap_launch;
  SiluMulParams& params = plan->params;
  params.out = problem.out;
  params.in = problem.in;
  params.row_vectors = static_cast<std::int32_t>(row_vectors);
  params.chunks = static_cast<std::int32_t>(chunksOf(row_vectors));
  return finish(*plan, device);
}

Status select(std::span<const VariantInfo> table, const ArgmaxProblem& problem,
              const DeviceQuery* device, ArgmaxPlan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "decoderops: select without a plan");
  *plan = ArgmaxPlan{};
  KILN_RETURN_IF_ERROR(findVariant(table, problem.dtype, kArgmaxEntry, plan));
  KILN_RETURN_IF_ERROR(checkNotNegative("rows", problem.rows));
  if (problem.rows == 0) {
    plan->no_op = true;
    return finish(*plan, device);
  }
  KILN_RETURN_IF_ERROR(checkGridX("rows", problem.rows));
  KILN_RETURN_IF_ERROR(checkWidth(problem.width, false));
  KILN_RETURN_IF_ERROR(checkBytes("x", problem.rows, problem.width, problem.dtype));
  const int elt = elementBytes(problem.dtype);
  if (pointers == PointerChecks::kCheck) {
    // 16-byte rows are read as vectors from their first element; other rows start anywhere and
    // the kernel reads their unaligned ends element by element.
    const bool vector_rows = problem.width * elt % kVectorBytes == 0;
    KILN_RETURN_IF_ERROR(
        checkPointer("x", problem.x, vector_rows ? kRowAlignment : static_cast<unsigned>(elt)));
    KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, kIndexAlignment));
  }
  const int threads = argmaxThreads(problem.width, elt);
  plan->config.grid = Dim3{static_cast<unsigned>(problem.rows), 1, 1};
  plan->config.block = Dim3{static_cast<unsigned>(threads), 1, 1};
  plan->config.shared_bytes = 0;  // 256 bytes of static shared memory
  plan->config.programmatic_dependency = problem.overlap_launch;
  ArgmaxParams& params = plan->params;
  params.out = problem.out;
  params.x = problem.x;
  params.width = static_cast<std::int32_t>(problem.width);
  params.reserved = 0;
  return finish(*plan, device);
}

}  // namespace kiln::decoderops
