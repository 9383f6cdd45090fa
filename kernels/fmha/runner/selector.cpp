// The fmha selector (see selector.h): admission checks, variant choice, launch planning and the
// three TMA tensor maps.
#include "selector.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "fmha/launch.h"
#include "kiln/runner_support.h"

namespace kiln::fmha {
namespace {

constexpr double kLog2e = 1.4426950408889634;

// Two limits hold by construction, so they have no run-time check of their own:
// m_blocks = ceil(max_seqlen_q / kBlockM) <= ceil((2^31 - 1) / kBlockM) fits grid.x (2^31 - 1),
// and a row stride q_heads * head_dim * 2 <= 65535 * 128 * 2 bytes (once q_heads fits grid.y) is
// far below the TMA's 2^40. checkTensorMap still checks every map at admission.
static_assert(kBlockM >= 1, "m_blocks <= max_seqlen_q");
static_assert(kElementBytes == 2, "the maps' strides assume 16-bit elements (fp16 / bf16)");

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "fmha: " + message);
}

Status checkPointer(const char* name, const void* p, std::size_t alignment) {
  return runner::checkPointer("fmha", name, p, alignment);
}

// "64, 128": the head dims built for (dtype, mask), in table order.
std::string builtHeadDims(std::span<const VariantInfo> table, DType dtype, Mask mask) {
  std::string list;
  for (const VariantInfo& v : table) {
    if (v.dtype != dtype || v.mask != mask) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(v.head_dim);
  }
  return list;
}

// "full, causal": the distinct masks built for `dtype`, in table order.
std::string builtMasks(std::span<const VariantInfo> table, DType dtype) {
  std::vector<Mask> masks;
  std::string list;
  for (const VariantInfo& v : table) {
    if (v.dtype != dtype || std::find(masks.begin(), masks.end(), v.mask) != masks.end()) continue;
    masks.push_back(v.mask);
    list += (list.empty() ? "" : ", ") + std::string(maskName(v.mask));
  }
  return list;
}

// "sm_90" / "sm_90, sm_100": the group's supported SMs.
std::string smList(std::span<const int> sms) {
  std::string list;
  for (int sm : sms) list += (list.empty() ? "sm_" : ", sm_") + std::to_string(sm);
  return list;
}

// A 3-D map over [rows, heads, head_dim] (row-major, head_dim contiguous) read in boxes of
// (kTmaBoxCols, box_rows, 1): dims (head_dim, rows, heads), strides (heads * head_dim * 2,
// head_dim * 2) bytes, 128-byte swizzle (one box row is kTmaBoxCols * 2 = 128 bytes).
TensorMapSpec tokenMajorMap(DType dtype, const void* address, int head_dim, int rows, int heads,
                            int box_rows) {
  TensorMapSpec spec;
  spec.element =
      dtype == DType::kFloat16 ? TensorMapElement::kFloat16 : TensorMapElement::kBFloat16;
  spec.rank = 3;
  spec.address = address;
  spec.dims[0] = static_cast<std::uint64_t>(head_dim);
  spec.dims[1] = static_cast<std::uint64_t>(rows);
  spec.dims[2] = static_cast<std::uint64_t>(heads);
  spec.strides[0] = static_cast<std::uint64_t>(heads) * head_dim * kElementBytes;
  spec.strides[1] = static_cast<std::uint64_t>(head_dim) * kElementBytes;
  spec.box[0] = static_cast<std::uint32_t>(kTmaBoxCols);
  spec.box[1] = static_cast<std::uint32_t>(box_rows);
  spec.box[2] = 1;
  spec.swizzle = TensorMapSwizzle::k128B;
  spec.l2_promotion = TensorMapL2Promotion::k128B;
  spec.oob_fill = TensorMapOobFill::kZero;  // rows past the tensor read as 0
  return spec;
}

Status checkMap(const char* name, const TensorMapSpec& spec) {
  const Status s = checkTensorMap(spec);
  if (s.ok()) return s;
  return Status(s.code(), std::string("fmha: ") + name + ": " + s.message());
}

}  // namespace

const char* maskName(Mask mask) {
  switch (mask) {
    case Mask::kFull:
      return "full";
    case Mask::kCausal:
      return "causal";
  }
  return nullptr;
}

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  Status image = runner::checkDevice("fmha", plan.info != nullptr ? plan.variant : nullptr, device);
  const auto& served = device.supported_sms;  // kiln.toml: wgmma and setmaxnreg, sm_90a only
  if (served.empty() || std::find(served.begin(), served.end(), device.sm) != served.end())
    return image;
  if (!image.ok() && image.code() != StatusCode::kNoKernelImage) return image;  // e.g. SM 0
  // Any other SM: say that no build can help, after what the artifact holds (when it knows).
  const std::string what =
      image.ok() ? std::string(plan.info->name) + ": device is sm_" + std::to_string(device.sm)
                 : image.message();
  return Status(StatusCode::kNoKernelImage,
                what + "; the fmha kernels (wgmma, TMA) run on " + smList(served) + " only");
}

Status select(std::span<const VariantInfo> table, const Problem& problem, const DeviceQuery* device,
              Plan* plan, PointerChecks pointers) {
  if (plan == nullptr) return Status(StatusCode::kInternal, "fmha: select without a plan");
  *plan = Plan{};

  KILN_RETURN_IF_ERROR(runner::checkDtype("fmha", problem.dtype));
  const char* dtype = dtypeName(problem.dtype);
  const char* mask = maskName(problem.mask);
  if (mask == nullptr) {
    return invalid("mask " + std::to_string(static_cast<int>(problem.mask)) +
                   " is not a Mask value (full or causal)");
  }
  const VariantInfo* info = nullptr;
  bool dtype_built = false;
  bool mask_built = false;
  for (const VariantInfo& v : table) {
    if (v.dtype != problem.dtype) continue;
    dtype_built = true;
    if (v.mask != problem.mask) continue;
    mask_built = true;
    if (v.head_dim == problem.head_dim) {
      info = &v;
      break;
    }
  }
  if (!dtype_built) return runner::dtypeNotBuilt("fmha", problem.dtype, table);
  if (!mask_built) {
    return Status(StatusCode::kNotSupported, std::string("fmha: mask ") + mask +
                                                 " is not built for " + dtype + "; built for " +
                                                 dtype + ": " + builtMasks(table, problem.dtype));
  }
  if (info == nullptr) {
    return Status(StatusCode::kNotSupported, "fmha: head_dim " + std::to_string(problem.head_dim) +
                                                 " is not built for " + dtype + " " + mask +
                                                 "; built for " + dtype + " " + mask + ": " +
                                                 builtHeadDims(table, problem.dtype, problem.mask));
  }
  KILN_RETURN_IF_ERROR(runner::resolveEntry("fmha", info->name, info->variant, kEntry,
                                            &plan->variant, &plan->entry));
  plan->info = info;

  if (problem.batch < 0) return invalid("batch " + std::to_string(problem.batch) + " is negative");
  if (problem.batch == 0) {
    plan->no_op = true;
    return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
  }
  KILN_RETURN_IF_ERROR(runner::checkHeads("fmha", problem.q_heads, problem.kv_heads));
  if (problem.total_q < 1) {
    return invalid("total_q " + std::to_string(problem.total_q) + " is not positive");
  }
  if (problem.total_k < 1) {
    return invalid("total_k " + std::to_string(problem.total_k) + " is not positive");
  }
  if (problem.max_seqlen_q < 0 || problem.max_seqlen_q > problem.total_q) {
    return invalid("max_seqlen_q " + std::to_string(problem.max_seqlen_q) +
                   " is not in 0..total_q (" + std::to_string(problem.total_q) + ")");
  }
  if (!std::isfinite(problem.scale)) {
    return invalid("scale " + std::to_string(problem.scale) + " is not finite");
  }
  if (!(problem.scale > 0.0f)) {
    return invalid("scale " + std::to_string(problem.scale) + " is not positive");
  }
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("q", problem.q, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("k", problem.k, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("v", problem.v, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("cu_seqlens_q", problem.cu_seqlens_q, kIndexAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("cu_seqlens_k", problem.cu_seqlens_k, kIndexAlignment));
    if (problem.lse != nullptr) {
      KILN_RETURN_IF_ERROR(checkPointer("lse", problem.lse, kIndexAlignment));
    }
  }
  if (problem.q_heads > kMaxHeads) {
    return invalid("q_heads " + std::to_string(problem.q_heads) + " exceeds the limit " +
                   std::to_string(kMaxHeads));
  }
  if (problem.batch > kMaxBatch) {
    return invalid("batch " + std::to_string(problem.batch) + " exceeds the limit " +
                   std::to_string(kMaxBatch));
  }

  const int head_dim = info->head_dim;
  const bool causal = problem.mask == Mask::kCausal;
  const int max_seqlen_q = problem.max_seqlen_q > 0 ? problem.max_seqlen_q : problem.total_q;
  // In 64 bits: max_seqlen_q + kBlockM - 1 overflows an int near 2^31.
  const int m_blocks =
      static_cast<int>((static_cast<long long>(max_seqlen_q) + kBlockM - 1) / kBlockM);
  // The kernel's schedule indexes tiles with an int.
  const long long tiles = static_cast<long long>(m_blocks) * problem.q_heads * problem.batch;
  if (tiles > kMaxTiles) {
    return invalid("ceil(max_seqlen_q / " + std::to_string(kBlockM) + ") * q_heads * batch = " +
                   std::to_string(tiles) + " tiles exceeds the limit " + std::to_string(kMaxTiles));
  }
  plan->tiles = static_cast<int>(tiles);
  plan->tma_q =
      tokenMajorMap(problem.dtype, problem.q, head_dim, problem.total_q, problem.q_heads, kBlockM);
  plan->tma_k = tokenMajorMap(problem.dtype, problem.k, head_dim, problem.total_k, problem.kv_heads,
                              blockN(head_dim, causal));
  plan->tma_v = tokenMajorMap(problem.dtype, problem.v, head_dim, problem.total_k, problem.kv_heads,
                              blockN(head_dim, causal));
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkMap("tma_q", plan->tma_q));
    KILN_RETURN_IF_ERROR(checkMap("tma_k", plan->tma_k));
    KILN_RETURN_IF_ERROR(checkMap("tma_v", plan->tma_v));
  }

  // Persistent: one block per SM at most (persistentGrid() sizes it for the device in run()).
  plan->launch.grid = Dim3{static_cast<unsigned>(plan->tiles), 1, 1};
  plan->launch.block = Dim3{static_cast<unsigned>(kThreads), 1, 1};
  plan->launch.shared_bytes = static_cast<unsigned>(sharedBytes(head_dim, causal));

  FmhaParams& params = plan->params;
  params.out = problem.out;
  params.lse = problem.lse;
  params.cu_seqlens_q = problem.cu_seqlens_q;
  params.cu_seqlens_k = problem.cu_seqlens_k;
  params.batch = problem.batch;
  params.q_heads = problem.q_heads;
  params.kv_heads = problem.kv_heads;
  params.group_size = problem.q_heads / problem.kv_heads;
  params.total_q = problem.total_q;
  params.total_k = problem.total_k;
  params.m_blocks = m_blocks;
  params.scale_log2 = static_cast<float>(static_cast<double>(problem.scale) * kLog2e);
  params.scale = problem.scale;
  // Last, so that select(device) == select(host) followed by checkDevice, which is what run() does.
  return device != nullptr ? checkDevice(*plan, *device) : Status::Ok();
}

void persistentGrid(Plan* plan, int multiprocessors) {
  const int blocks = std::max(1, std::min(plan->tiles, multiprocessors));
  plan->launch.grid = Dim3{static_cast<unsigned>(blocks), 1, 1};
}

}  // namespace kiln::fmha
