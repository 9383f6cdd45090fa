// The w4a16 selector (see selector.h): admission checks, variant and tile choice, split planning.
#include "selector.h"

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runner_support.h"
#include "w4a16/launch.h"

namespace kiln::w4a16 {
namespace {

static_assert(static_cast<std::int32_t>(SourceFormat::kGptq) == kFormatGptq &&
                  static_cast<std::int32_t>(SourceFormat::kAwq) == kFormatAwq,
              "the runner's SourceFormat and the kernel's format codes must agree");

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "w4a16: " + message);
}

std::string str(long long v) {
  return std::to_string(v);
}

Status checkPointer(const char* name, const void* p, bool required) {
  if (p == nullptr && !required) return Status::Ok();
  return runner::checkPointer("w4a16", name, p, kRequiredAlignment);
}

// The rows built for (dtype, group_size); "group_size 64 is not built for bf16; built for bf16:
// 128" when none is.
Status findGroup(std::span<const VariantInfo> table, DType dtype, int group_size) {
  for (const VariantInfo& v : table) {
    if (v.dtype == dtype && v.group_size == group_size) return Status::Ok();
  }
  // The table has a row per tile and zero-point form: one per (dtype, group_size) for the message,
  // so that each built size is named once.
  std::vector<VariantInfo> distinct;
  for (const VariantInfo& v : table) {
    bool seen = false;
    for (const VariantInfo& d : distinct) {
      seen = seen || (d.dtype == v.dtype && d.group_size == v.group_size);
    }
    if (!seen) distinct.push_back(v);
  }
  const VariantInfo* any = nullptr;
  return runner::findBuilt(
      "w4a16", std::span<const VariantInfo>(distinct), dtype, "group_size", group_size,
      [](const VariantInfo& v) { return v.group_size; }, &any);
}

// n, k and group_size as both the GEMM and the repack need them; n's tile is checked by select().
Status checkShape(std::int64_t n, std::int64_t k, int group_size) {
  if (group_size <= 0 || group_size % kChunkK != 0) {
    return invalid("group_size " + str(group_size) + " is not a positive multiple of 64");
  }
  if (k <= 0 || k > kMaxDimension) {
    return invalid("k " + str(k) + " is outside 1.." + str(kMaxDimension));
  }
  if (k % kChunkK != 0) return invalid("k " + str(k) + " is not a multiple of 64");
  if (k % group_size != 0) {
    return invalid("k " + str(k) + " is not a multiple of group_size " + str(group_size));
  }
  if (n <= 0 || n > kMaxDimension) {
    return invalid("n " + str(n) + " is outside 1.." + str(kMaxDimension));
  }
  return Status::Ok();
}

// The smallest built tile_m >= m among `candidates` (rows of one dtype, group size and form), else
// the largest built.
const VariantInfo* chooseTile(std::span<const VariantInfo> table, const Problem& problem) {
  const VariantInfo* fit = nullptr;
  const VariantInfo* largest = nullptr;
  const bool zero_point = problem.zeros != nullptr;
  for (const VariantInfo& v : table) {
    if (v.dtype != problem.dtype || v.group_size != problem.group_size ||
        v.zero_point != zero_point) {
      continue;
    }
    if (largest == nullptr || v.tile_m > largest->tile_m) largest = &v;
    if (v.tile_m >= problem.m && (fit == nullptr || v.tile_m < fit->tile_m)) fit = &v;
  }
  return fit != nullptr ? fit : largest;
}

}  // namespace

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  return runner::checkDevice("w4a16", plan.variant, device);
}

Status checkWorkspace(const Plan& plan, const void* workspace, std::size_t workspace_bytes) {
  if (plan.workspace_bytes == 0) return Status::Ok();
  if (workspace == nullptr) {
    return invalid("the split-K plan (" + str(plan.split.splits) +
                   " splits) needs a workspace of " +
                   str(static_cast<long long>(plan.workspace_bytes)) + " bytes; workspace is null");
  }
  if (workspace_bytes < plan.workspace_bytes) {
    return invalid("workspace of " + str(static_cast<long long>(workspace_bytes)) +
                   " bytes is smaller than the " +
                   str(static_cast<long long>(plan.workspace_bytes)) + " bytes the plan needs (" +
                   str(plan.split.splits) + " splits)");
  }
  return runner::checkPointer("w4a16", "workspace", workspace, kRequiredAlignment);
}

Status select(std::span<const VariantInfo> table, const Problem& problem, int multiprocessors,
              const DeviceQuery* device, Plan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "w4a16: select without a plan");
  *plan = Plan{};
  KILN_RETURN_IF_ERROR(runner::checkDtype("w4a16", problem.dtype));
  KILN_RETURN_IF_ERROR(findGroup(table, problem.dtype, problem.group_size));
  const VariantInfo* info = chooseTile(table, problem);
  if (info == nullptr) {
    const bool zp = problem.zeros != nullptr;
    return Status(StatusCode::kNotSupported,
                  std::string("w4a16: ") +
                      (zp ? "zero points (zeros != null)" : "symmetric weights (zeros == null)") +
                      " are not built for " + dtypeName(problem.dtype) + " group_size " +
                      str(problem.group_size) + "; the artifact has the " +
                      (zp ? "symmetric" : "zero-point") + " variants only");
  }
  if (problem.m < 0) return invalid("m " + str(problem.m) + " is negative");
  KILN_RETURN_IF_ERROR(checkShape(problem.n, problem.k, problem.group_size));
  const TileConfig tile = tileConfig(info->tile_m);
  if (!tile.valid) {
    return Status(StatusCode::kInternal, std::string("w4a16: variant ") + info->name +
                                             " has tile_m " + str(info->tile_m) +
                                             ", which has no tile configuration");
  }
  if (problem.n % tile.tile_n != 0) {
    return invalid("n " + str(problem.n) + " is not a multiple of " + str(tile.tile_n) +
                   " (tile_n of " + info->name + ", chosen for m " + str(problem.m) + ")");
  }
  const long long m_blocks = (problem.m + tile.tile_m - 1) / tile.tile_m;
  if (m_blocks > kMaxGridYZ) {
    return invalid("m " + str(problem.m) + " exceeds the limit " + str(kMaxGridYZ * tile.tile_m) +
                   " of " + info->name);
  }
  if (problem.splits < 0 || problem.splits > kMaxSplits) {
    return invalid("splits " + str(problem.splits) + " is outside 0.." + str(kMaxSplits) +
                   " (0: planned for the device)");
  }
  if (multiprocessors <= 0) {
    return Status(StatusCode::kInternal,
                  "w4a16: planned for " + str(multiprocessors) + " multiprocessors");
  }
  KILN_RETURN_IF_ERROR(runner::resolveEntry("w4a16", info->name, info->variant, kGemmEntry,
                                            &plan->variant, &plan->gemm_entry));
  KILN_RETURN_IF_ERROR(runner::resolveEntry("w4a16", info->name, info->variant, kReduceEntry,
                                            &plan->variant, &plan->reduce_entry));
  plan->info = info;
  plan->tile = tile;

  const long long chunks = problem.k / kChunkK;
  if (problem.splits > 0) {
    const long long requested = problem.splits < chunks ? problem.splits : chunks;
    const long long per = (chunks + requested - 1) / requested;
    plan->split.chunks_per_split = static_cast<int>(per);
    plan->split.splits = static_cast<int>((chunks + per - 1) / per);
  } else {
    plan->split = planSplits(problem.m, problem.n, problem.k, tile, multiprocessors);
  }
  if (plan->split.splits > 1) {
    plan->workspace_bytes = static_cast<std::size_t>(plan->split.splits) *
                            static_cast<std::size_t>(problem.m) *
                            static_cast<std::size_t>(problem.n) * sizeof(float);
  }
  if (problem.m == 0) {
    plan->no_op = true;
    return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
  }
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("x", problem.x, true));
    KILN_RETURN_IF_ERROR(checkPointer("weight", problem.weight, true));
    KILN_RETURN_IF_ERROR(checkPointer("scales", problem.scales, true));
    KILN_RETURN_IF_ERROR(checkPointer("zeros", problem.zeros, false));
    KILN_RETURN_IF_ERROR(checkPointer("bias", problem.bias, false));
    KILN_RETURN_IF_ERROR(checkPointer("y", problem.y, true));
  }

  plan->gemm.grid =
      Dim3{static_cast<unsigned>(problem.n / tile.tile_n), static_cast<unsigned>(m_blocks),
           static_cast<unsigned>(plan->split.splits)};
  plan->gemm.block = Dim3{static_cast<unsigned>(tile.threads), 1, 1};
  plan->gemm.shared_bytes = static_cast<unsigned>(tile.shared_bytes);
  const long long vectors = problem.m * (problem.n / kReduceVector);
  if (vectors / kReduceThreads >= kMaxGridX) {
    return invalid("m " + str(problem.m) + " x n " + str(problem.n) + " exceeds the limit of " +
                   str(kMaxGridX * kReduceThreads * kReduceVector) + " outputs");
  }
  plan->reduce.grid =
      Dim3{static_cast<unsigned>((vectors + kReduceThreads - 1) / kReduceThreads), 1, 1};
  plan->reduce.block = Dim3{static_cast<unsigned>(kReduceThreads), 1, 1};
  plan->reduce.programmatic_dependency = true;
  plan->params = GemmParams{problem.x,
                            problem.weight,
                            problem.scales,
                            problem.zeros,
                            problem.bias,
                            problem.y,
                            nullptr,
                            problem.m,
                            static_cast<std::int32_t>(problem.n),
                            static_cast<std::int32_t>(problem.k),
                            plan->split.chunks_per_split,
                            plan->split.splits};
  return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
}

Status selectRepack(std::span<const VariantInfo> table, const RepackProblem& problem,
                    const DeviceQuery* device, RepackPlan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "w4a16: selectRepack without a plan");
  *plan = RepackPlan{};
  if (problem.format != SourceFormat::kGptq && problem.format != SourceFormat::kAwq) {
    return invalid("format " + str(static_cast<long long>(problem.format)) +
                   " is not a SourceFormat (0 GPTQ, 1 AWQ)");
  }
  KILN_RETURN_IF_ERROR(runner::checkDtype("w4a16", problem.dtype));
  // The checkpoint's scales are 16-bit: fp32 is a DType value the repack does not read.
  if (problem.scales_dtype != DType::kFloat16 && problem.scales_dtype != DType::kBFloat16) {
    const char* name = dtypeName(problem.scales_dtype);
    return invalid(
        "scales_dtype " +
        (name != nullptr ? std::string(name) : str(static_cast<long long>(problem.scales_dtype))) +
        " is not a scales dtype (fp16 or bf16)");
  }
  KILN_RETURN_IF_ERROR(findGroup(table, problem.dtype, problem.group_size));
  const VariantInfo* info = nullptr;
  for (const VariantInfo& v : table) {
    if (v.dtype == problem.dtype && v.group_size == problem.group_size) {
      info = &v;
      break;
    }
  }
  if (problem.n < 0) return invalid("n " + str(problem.n) + " is negative");
  if (problem.n == 0) {
    plan->no_op = true;
    plan->info = info;
    return Status::Ok();
  }
  KILN_RETURN_IF_ERROR(checkShape(problem.n, problem.k, problem.group_size));
  if (problem.n % kTileRows != 0 || problem.n % 8 != 0) {
    return invalid("n " + str(problem.n) + " is not a multiple of 16");
  }
  KILN_RETURN_IF_ERROR(runner::resolveEntry("w4a16", info->name, info->variant, kRepackWeightsEntry,
                                            &plan->variant, &plan->weights_entry));
  KILN_RETURN_IF_ERROR(runner::resolveEntry("w4a16", info->name, info->variant, kRepackScalesEntry,
                                            &plan->variant, &plan->scales_entry));
  plan->info = info;
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("qweight", problem.qweight, true));
    KILN_RETURN_IF_ERROR(checkPointer("qzeros", problem.qzeros, false));
    KILN_RETURN_IF_ERROR(checkPointer("src_scales", problem.src_scales, true));
    KILN_RETURN_IF_ERROR(checkPointer("weight", problem.weight, true));
    KILN_RETURN_IF_ERROR(checkPointer("scales", problem.scales, true));
    KILN_RETURN_IF_ERROR(checkPointer("zeros", problem.zeros, problem.qzeros != nullptr));
  }
  const long long words = problem.n * problem.k / 8;
  const long long scales = problem.k / problem.group_size * problem.n;
  if (words / kRepackThreads >= kMaxGridX) {
    return invalid("n " + str(problem.n) + " x k " + str(problem.k) + " exceeds the limit of " +
                   str(kMaxGridX * kRepackThreads * 8) + " weights");
  }
  plan->weights.grid =
      Dim3{static_cast<unsigned>((words + kRepackThreads - 1) / kRepackThreads), 1, 1};
  plan->weights.block = Dim3{static_cast<unsigned>(kRepackThreads), 1, 1};
  plan->scales.grid =
      Dim3{static_cast<unsigned>((scales + kRepackThreads - 1) / kRepackThreads), 1, 1};
  plan->scales.block = Dim3{static_cast<unsigned>(kRepackThreads), 1, 1};
  plan->params = RepackParams{static_cast<const std::int32_t*>(problem.qweight),
                              static_cast<const std::int32_t*>(problem.qzeros),
                              problem.src_scales,
                              static_cast<std::uint32_t*>(problem.weight),
                              problem.scales,
                              problem.qzeros != nullptr ? problem.zeros : nullptr,
                              static_cast<std::int32_t>(problem.n),
                              static_cast<std::int32_t>(problem.k),
                              problem.group_size,
                              static_cast<std::int32_t>(problem.format),
                              problem.scales_dtype == DType::kBFloat16 ? 1 : 0,
                              0};
  return device != nullptr ? runner::checkDevice("w4a16", plan->variant, *device) : Status::Ok();
}

}  // namespace kiln::w4a16
