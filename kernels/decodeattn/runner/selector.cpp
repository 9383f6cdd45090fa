// The decodeattn selector (see selector.h): admission checks, variant choice, split count and
// launch planning.
#include "selector.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "decodeattn/launch.h"
#include "kiln/runner_support.h"

namespace kiln::decodeattn {
namespace {

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "decodeattn: " + message);
}

Status checkPointer(const char* name, const void* p, std::size_t alignment) {
  return runner::checkPointer("decodeattn", name, p, alignment);
}

std::size_t alignUp(std::size_t n, std::size_t a) {
  return (n + a - 1) / a * a;
}

}  // namespace

int chooseSplits(long long pairs, long long max_keys, int multiprocessors, int head_dim) {
  const long long slots =
      static_cast<long long>(std::max(multiprocessors, 1)) * splitWaveBlocksPerSm(head_dim);
  if (pairs <= 0 || pairs >= slots) return 1;
  const long long by_keys = std::max(1LL, (max_keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
  const long long splits = std::min({slots / pairs, by_keys, static_cast<long long>(kMaxSplits)});
  return static_cast<int>(std::max(1LL, splits));
}

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  return runner::checkDevice("decodeattn", plan.variant, device);
}

Status checkWorkspace(const Plan& plan, const void* workspace, std::size_t workspace_bytes) {
  if (plan.workspace_bytes == 0) return Status::Ok();
  if (workspace_bytes < plan.workspace_bytes) {
    return invalid("workspace of " + std::to_string(workspace_bytes) +
                   " bytes is smaller than the " + std::to_string(plan.workspace_bytes) +
                   " bytes that " + std::to_string(plan.num_splits) +
                   " splits need (workspaceSize; set Problem::multiprocessors to the device's)");
  }
  return checkPointer("workspace", workspace, kTensorAlignment);
}

Status select(std::span<const VariantInfo> table, const Problem& problem, int multiprocessors,
              const DeviceQuery* device, Plan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "decodeattn: select without a plan");
  *plan = Plan{};

  KILN_RETURN_IF_ERROR(runner::checkDtype("decodeattn", problem.dtype));
  const VariantInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(runner::findBuilt(
      "decodeattn", table, problem.dtype, "head_dim", problem.head_dim,
      [](const VariantInfo& v) { return v.head_dim; }, &info));
  int rows16_entry = -1, rows32_entry = -1;
  KILN_RETURN_IF_ERROR(runner::resolveEntry("decodeattn", info->name, info->variant,
                                            kAttentionEntry, &plan->variant, &rows16_entry));
  KILN_RETURN_IF_ERROR(runner::resolveEntry("decodeattn", info->name, info->variant,
                                            kAttentionRows32Entry, &plan->variant, &rows32_entry));
  plan->attention_entry = rows16_entry;
  KILN_RETURN_IF_ERROR(runner::resolveEntry("decodeattn", info->name, info->variant, kMergeEntry,
                                            &plan->variant, &plan->merge_entry));
  plan->info = info;

  if (problem.batch < 0) return invalid("batch " + std::to_string(problem.batch) + " is negative");
  if (problem.batch == 0) {
    plan->no_op = true;
    return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
  }
  KILN_RETURN_IF_ERROR(runner::checkHeads("decodeattn", problem.q_heads, problem.kv_heads));
  KILN_RETURN_IF_ERROR(runner::checkPageSize("decodeattn", problem.page_size));
  if (problem.kv_layout != KvLayout::kNHD && problem.kv_layout != KvLayout::kHND) {
    return invalid("kv_layout " + std::to_string(static_cast<int>(problem.kv_layout)) +
                   " is not a KvLayout value (kNHD or kHND)");
  }
  if (problem.num_pages < 1) {
    return invalid("num_pages " + std::to_string(problem.num_pages) + " is not positive");
  }
  if (problem.max_pages_per_seq < 1) {
    return invalid("max_pages_per_seq " + std::to_string(problem.max_pages_per_seq) +
                   " is not positive");
  }
  const long long capacity = static_cast<long long>(problem.max_pages_per_seq) * problem.page_size;
  if (capacity > kMaxKeysPerSequence) {
    return invalid("max_pages_per_seq * page_size = " + std::to_string(capacity) +
                   " keys exceeds the limit " + std::to_string(kMaxKeysPerSequence));
  }
  if (problem.max_seq_len < 0) {
    return invalid("max_seq_len " + std::to_string(problem.max_seq_len) + " is negative");
  }
  if (problem.multiprocessors < 0) {
    return invalid("multiprocessors " + std::to_string(problem.multiprocessors) + " is negative");
  }
  if (problem.query_tokens < 1 || problem.query_tokens > kMaxQueryTokens) {
    return invalid("query_tokens " + std::to_string(problem.query_tokens) + " is not in 1.." +
                   std::to_string(kMaxQueryTokens));
  }
  if (!std::isfinite(problem.scale)) {
    return invalid("scale " + std::to_string(problem.scale) + " is not finite");
  }
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("q", problem.q, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("k_cache", problem.k_cache, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("v_cache", problem.v_cache, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("page_table", problem.page_table, kIndexAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("seq_lens", problem.seq_lens, kIndexAlignment));
  }

  const int group_size = problem.q_heads / problem.kv_heads;
  // The rows of one KV head are its group's heads x the query tokens: one 16-row mma tile per
  // block when they fit it, else chunks of two tiles (launch.h).
  const long long head_rows = static_cast<long long>(group_size) * problem.query_tokens;
  const int row_tiles = head_rows > kTileRows ? kMaxRowTiles : 1;
  plan->row_tiles = row_tiles;
  plan->attention_entry = row_tiles == 1 ? rows16_entry : rows32_entry;
  const int chunk_rows = row_tiles * kTileRows;
  const long long head_chunks = (head_rows + chunk_rows - 1) / chunk_rows;
  if (problem.batch > kMaxGridYZ) {
    return invalid("batch " + std::to_string(problem.batch) + " exceeds the limit " +
                   std::to_string(kMaxGridYZ));
  }
  const long long head_blocks = problem.kv_heads * head_chunks;
  if (head_blocks > kMaxGridYZ) {
    return invalid("kv_heads * ceil(q_heads / kv_heads * query_tokens / " +
                   std::to_string(chunk_rows) + ") = " + std::to_string(head_blocks) +
                   " exceeds the limit " + std::to_string(kMaxGridYZ));
  }
  const long long rows =
      static_cast<long long>(problem.batch) * problem.query_tokens * problem.q_heads;
  if (rows > kMaxGridX) {
    return invalid("batch * query_tokens * q_heads = " + std::to_string(rows) +
                   " exceeds the limit " + std::to_string(kMaxGridX));
  }
  // num_pages * page_size * kv_heads * head_dim < 2^62, tested without overflowing.
  const double cache_elements = static_cast<double>(problem.num_pages) * problem.page_size *
                                problem.kv_heads * info->head_dim;
  if (cache_elements >= 4.0e18) {
    return invalid("num_pages * page_size * kv_heads * head_dim = " +
                   std::to_string(cache_elements) + " elements exceeds the limit 2^62");
  }

  const long long max_keys =
      problem.max_seq_len > 0 ? std::min<long long>(problem.max_seq_len, capacity) : capacity;
  const long long pairs = static_cast<long long>(problem.batch) * head_blocks;
  const int splits = chooseSplits(pairs, max_keys, std::max(multiprocessors, 1), info->head_dim);
  plan->num_splits = splits;

  plan->attention.grid = Dim3{static_cast<unsigned>(splits), static_cast<unsigned>(head_blocks),
                              static_cast<unsigned>(problem.batch)};
  plan->attention.block = Dim3{static_cast<unsigned>(kThreads), 1, 1};
  plan->attention.shared_bytes = static_cast<unsigned>(sharedBytes(info->head_dim));
  // The attention kernel waits for the kernel before (griddepcontrol.wait) before it touches
  // global memory, so it may overlap that kernel's tail when the caller asks.
  plan->attention.programmatic_dependency = problem.overlap_launch;
  plan->merge.grid = Dim3{static_cast<unsigned>(rows), 1, 1};  // one block per row
  plan->merge.block = Dim3{static_cast<unsigned>(kMergeThreads), 1, 1};
  plan->merge.shared_bytes = 0;
  // The merge waits for the attention grid in its first instruction (griddepcontrol.wait), so it
  // may be launched while that grid runs: its launch latency hides behind the attention's tail.
  plan->merge.programmatic_dependency = true;
  if (splits > 1) {
    const std::size_t partial_rows = static_cast<std::size_t>(rows) * splits;
    plan->lse_offset =
        alignUp(partial_rows * static_cast<std::size_t>(info->head_dim) * sizeof(float),
                kWorkspaceAlignment);
    plan->workspace_bytes =
        plan->lse_offset + alignUp(partial_rows * sizeof(float), kWorkspaceAlignment);
  }

  DecodeAttentionParams& params = plan->params;
  params.out = problem.out;
  params.q = problem.q;
  params.k_cache = problem.k_cache;
  params.v_cache = problem.v_cache;
  params.page_table = problem.page_table;
  params.seq_lens = problem.seq_lens;
  params.partial_out = nullptr;
  params.partial_lse = nullptr;
  params.batch = problem.batch;
  params.q_heads = problem.q_heads;
  params.kv_heads = problem.kv_heads;
  params.group_size = group_size;
  params.head_chunks = static_cast<int>(head_chunks);  // <= 65535: the grid check above
  params.max_pages_per_seq = problem.max_pages_per_seq;
  params.num_pages = problem.num_pages;
  params.num_splits = splits;
  const runner::PagedCacheStrides strides = runner::pagedCacheStrides(
      problem.page_size, problem.kv_heads, info->head_dim, problem.kv_layout == KvLayout::kHND);
  params.page_size_log2 = strides.page_size_log2;
  params.token_stride = strides.token_stride;
  params.head_stride = strides.head_stride;
  params.page_stride = strides.page_stride;
  params.scale_log2 = static_cast<float>(static_cast<double>(problem.scale) * 1.4426950408889634);
  params.query_tokens = problem.query_tokens;
  // Last, so that select(device) == select(host) followed by checkDevice, which is what run() does.
  return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
}

}  // namespace kiln::decodeattn
