// The moe selector (see selector.h): admission checks, variant choice, launch planning.
#include "selector.h"

#include <cstdint>
#include <string>

#include "kiln/runner_support.h"
#include "moe/launch.h"

namespace kiln::moe {
namespace {

static_assert(fc1ColumnBlocks(kMaxDimension) <= kMaxGridYZ &&
                  fc2ColumnBlocks(kMaxDimension) <= kMaxGridYZ,
              "every admitted H and I fits grid.y");
static_assert(kRoute == 1u << 0 && kAlign == 1u << 1 && kFc1 == 1u << 2 && kFc2 == 1u << 3 &&
                  kFinalize == 1u << 4 && kAllSteps == (1u << kSteps) - 1,
              "Step bit i runs kEntries[i]");

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "moe: " + message);
}

std::string str(long long v) {
  return std::to_string(v);
}

std::size_t alignUp(std::size_t v) {
  constexpr std::size_t kAlign = 256;
  return (v + kAlign - 1) / kAlign * kAlign;
}

Status checkShape(const Problem& p) {
  const unsigned steps = p.steps;
  if (steps == 0 || (steps & ~static_cast<unsigned>(kAllSteps)) != 0) {
    return invalid("steps " + str(steps) + " is not a non-empty set of Step bits (1..31)");
  }
  const unsigned lowest = steps & (~steps + 1);
  if (((steps + lowest) & steps) != 0) {
    return invalid("steps " + str(steps) +
                   " are not a contiguous run of Step bits (each step reads what the one before "
                   "it wrote)");
  }
  if (p.tokens < 0) return invalid("tokens " + str(p.tokens) + " is negative");
  if (p.experts < 1 || p.experts > kMaxExperts) {
    return invalid("experts " + str(p.experts) + " is outside 1.." + str(kMaxExperts));
  }
  if (p.top_k < 1 || p.top_k > kMaxTopK) {
    return invalid("top_k " + str(p.top_k) + " is outside 1.." + str(kMaxTopK));
  }
  if (p.top_k > p.experts) {
    return invalid("top_k " + str(p.top_k) + " exceeds experts " + str(p.experts));
  }
  if (p.tokens > kMaxRows / p.top_k) {  // tokens * top_k > kMaxRows, without overflowing
    return invalid("tokens " + str(p.tokens) + " * top_k " + str(p.top_k) +
                   " exceeds the limit of " + str(kMaxRows) + " expert rows");
  }
  if (p.hidden <= 0 || p.hidden > kMaxDimension) {
    return invalid("hidden " + str(p.hidden) + " is outside 1.." + str(kMaxDimension));
  }
  if (p.hidden % kBlockK != 0) {
    return invalid("hidden " + str(p.hidden) + " is not a multiple of " + str(kBlockK) +
                   " (the GEMM's K step)");
  }
  if (p.intermediate <= 0 || p.intermediate > kMaxDimension) {
    return invalid("intermediate " + str(p.intermediate) + " is outside 1.." + str(kMaxDimension));
  }
  if (p.intermediate % kBlockN != 0) {
    return invalid("intermediate " + str(p.intermediate) + " is not a multiple of the tile " +
                   str(kBlockN));
  }
  return Status::Ok();
}

// The pointers the chosen steps touch.
Status checkPointers(const Problem& p) {
  auto check = [](const char* name, const void* ptr, std::size_t alignment) {
    return runner::checkPointer("moe", name, ptr, alignment);
  };
  const unsigned s = p.steps;
  if ((s & kRoute) != 0) KILN_RETURN_IF_ERROR(check("logits", p.logits, p.logits_fp32 ? 4 : 2));
  if ((s & kFc1) != 0) {
    KILN_RETURN_IF_ERROR(check("x", p.x, kRequiredAlignment));
    KILN_RETURN_IF_ERROR(check("w1", p.w1, kRequiredAlignment));
  }
  if ((s & kFc2) != 0) KILN_RETURN_IF_ERROR(check("w2", p.w2, kRequiredAlignment));
  if ((s & kFinalize) != 0) {
    KILN_RETURN_IF_ERROR(check("y", p.y, kRequiredAlignment));
    if (p.residual != nullptr) {
      KILN_RETURN_IF_ERROR(check("residual", p.residual, kRequiredAlignment));
    }
  }
  return Status::Ok();
}

}  // namespace

WorkspaceLayout layoutFor(const Problem& problem) {
  const std::size_t rows =
      static_cast<std::size_t>(problem.tokens) * static_cast<std::size_t>(problem.top_k);
  const std::size_t experts = static_cast<std::size_t>(problem.experts);
  WorkspaceLayout w;
  std::size_t at = 0;
  auto place = [&at](std::size_t bytes) {
    const std::size_t here = at;
    at = alignUp(at + bytes);
    return here;
  };
  w.topk_ids = place(rows * 4);
  w.topk_weights = place(rows * 4);
  w.expert_offsets = place((experts + 1) * 4);
  w.tile_offsets = place((experts + 1) * 4);
  w.sorted_slots = place(rows * 4);
  w.act = place(rows * static_cast<std::size_t>(problem.intermediate) * 2);
  w.down = place(rows * static_cast<std::size_t>(problem.hidden) * 2);
  w.bytes = at;
  return w;
}

Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "moe: select without a plan");
  *plan = Plan{};
  KILN_RETURN_IF_ERROR(runner::checkDtype("moe", problem.dtype));
  const VariantInfo* info = nullptr;
  for (const VariantInfo& v : table) {
    if (v.dtype == problem.dtype) info = &v;
  }
  if (info == nullptr) return runner::dtypeNotBuilt("moe", problem.dtype, table);
  KILN_RETURN_IF_ERROR(checkShape(problem));

  const long long rows = problem.tokens * problem.top_k;
  const long long tiles = maxRowTiles(rows, problem.experts);
  plan->info = info;
  plan->steps = problem.steps;
  for (int i = 0; i < kSteps; ++i) {
    if ((problem.steps & (1u << i)) == 0) continue;
    KILN_RETURN_IF_ERROR(runner::resolveEntry("moe", info->name, info->variant, kEntries[i],
                                              &plan->variant, &plan->entries[i]));
  }
  if (problem.tokens == 0) {
    plan->no_op = true;
    return device != nullptr ? runner::checkDevice("moe", plan->variant, *device) : Status::Ok();
  }
  if (pointers == PointerChecks::kCheck) KILN_RETURN_IF_ERROR(checkPointers(problem));

  plan->layout = layoutFor(problem);
  plan->workspace_bytes = plan->layout.bytes;
  const unsigned gemm_blocks_x = static_cast<unsigned>(tiles);
  plan->launches[0].grid = Dim3{static_cast<unsigned>(ceilDiv(problem.tokens, kRouteWarps)), 1, 1};
  plan->launches[0].block = Dim3{static_cast<unsigned>(kRouteWarps * kWarp), 1, 1};
  plan->launches[1].grid = Dim3{1, 1, 1};
  plan->launches[1].block = Dim3{static_cast<unsigned>(kAlignThreads), 1, 1};
  plan->launches[2].grid =
      Dim3{gemm_blocks_x, static_cast<unsigned>(fc1ColumnBlocks(problem.intermediate)), 1};
  plan->launches[3].grid =
      Dim3{gemm_blocks_x, static_cast<unsigned>(fc2ColumnBlocks(problem.hidden)), 1};
  for (int i : {2, 3}) {
    plan->launches[i].block = Dim3{static_cast<unsigned>(kGemmThreads), 1, 1};
    plan->launches[i].shared_bytes = static_cast<unsigned>(kGemmSharedBytes);
  }
  plan->launches[4].grid = Dim3{static_cast<unsigned>(problem.tokens), 1, 1};
  plan->launches[4].block = Dim3{static_cast<unsigned>(kFinalizeThreads), 1, 1};

  MoeParams& params = plan->params;
  params.x = problem.x;
  params.logits = problem.logits;
  params.w1 = problem.w1;
  params.w2 = problem.w2;
  params.residual = problem.residual;
  params.y = problem.y;
  params.tokens = static_cast<std::int32_t>(problem.tokens);
  params.experts = problem.experts;
  params.top_k = problem.top_k;
  params.hidden = static_cast<std::int32_t>(problem.hidden);
  params.intermediate = static_cast<std::int32_t>(problem.intermediate);
  params.logits_fp32 = problem.logits_fp32 ? 1 : 0;
  params.renormalize = problem.renormalize ? 1 : 0;

  if (device != nullptr) return runner::checkDevice("moe", plan->variant, *device);
  return Status::Ok();
}

Status bindWorkspace(Plan* plan, void* workspace, std::size_t workspace_bytes) {
  if (workspace == nullptr) {
    return invalid("the block needs a workspace of " +
                   str(static_cast<long long>(plan->workspace_bytes)) +
                   " bytes (workspaceSize()); workspace is null");
  }
  if (workspace_bytes < plan->workspace_bytes) {
    return invalid("workspace of " + str(static_cast<long long>(workspace_bytes)) +
                   " bytes is smaller than the " +
                   str(static_cast<long long>(plan->workspace_bytes)) + " bytes the block needs");
  }
  KILN_RETURN_IF_ERROR(runner::checkPointer("moe", "workspace", workspace, kRequiredAlignment));
  auto* base = static_cast<unsigned char*>(workspace);
  const WorkspaceLayout& w = plan->layout;
  MoeParams& p = plan->params;
  p.topk_ids = reinterpret_cast<std::int32_t*>(base + w.topk_ids);
  p.topk_weights = reinterpret_cast<float*>(base + w.topk_weights);
  p.expert_offsets = reinterpret_cast<std::int32_t*>(base + w.expert_offsets);
  p.tile_offsets = reinterpret_cast<std::int32_t*>(base + w.tile_offsets);
  p.sorted_slots = reinterpret_cast<std::int32_t*>(base + w.sorted_slots);
  p.act = base + w.act;
  p.down = base + w.down;
  return Status::Ok();
}

}  // namespace kiln::moe
