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

// "64, 128, 256": the distinct head dims built for (dtype, mask) by either kernel, ascending.
std::string builtHeadDims(std::span<const VariantInfo> table, DType dtype, Mask mask) {
  std::vector<int> dims;
  for (const VariantInfo& v : table) {
    if (v.dtype == dtype && v.mask == mask) dims.push_back(v.head_dim);
  }
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  std::string list;
  for (int d : dims) list += (list.empty() ? "" : ", ") + std::to_string(d);
  return list;
}

const VariantInfo* find(std::span<const VariantInfo> table, Kernel kernel, const Problem& p) {
  for (const VariantInfo& v : table) {
    if (v.kernel == kernel && v.dtype == p.dtype && v.mask == p.mask && v.head_dim == p.head_dim)
      return &v;
  }
  return nullptr;
}

bool paged(const Problem& p) {
  return p.page_table != nullptr;
}

// Why the wgmma kernel cannot serve `p` whatever the device ("" when it can): what it does not
// implement.
std::string wgmmaLacks(const Problem& p) {
  if (paged(p)) return "page_table: paged K / V";
  return "";
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

const char* kernelName(Kernel kernel) {
  switch (kernel) {
    case Kernel::kWgmma:
      return "wgmma";
    case Kernel::kMma:
      return "mma";
  }
  return nullptr;
}

Status checkDevice(const Plan& plan, const DeviceQuery& device) {
  Status image = runner::checkDevice("fmha", plan.info != nullptr ? plan.variant : nullptr, device);
  if (plan.info == nullptr || plan.info->kernel != Kernel::kWgmma || device.sm == kWgmmaSm) {
    return image;
  }
  if (!image.ok() && image.code() != StatusCode::kNoKernelImage) return image;  // e.g. SM 0
  // wgmma on any other SM: say that no build of it can help, after what the artifact holds.
  const std::string what =
      image.ok() ? std::string(plan.info->name) + ": device is sm_" + std::to_string(device.sm)
                 : image.message();
  return Status(StatusCode::kNoKernelImage, what +
                                                "; the fmha wgmma kernel (TMA, wgmma) runs on sm_" +
                                                std::to_string(kWgmmaSm) + " only");
}

namespace {

// Problem checks shared by both kernels, after the variant is known and batch > 0.
Status checkShape(const Problem& problem, PointerChecks pointers) {
  KILN_RETURN_IF_ERROR(runner::checkHeads("fmha", problem.q_heads, problem.kv_heads));
  if (problem.total_q < 1) {
    return invalid("total_q " + std::to_string(problem.total_q) + " is not positive");
  }
  if (!paged(problem) && problem.total_k < 1) {
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
  if (paged(problem)) {
    if (problem.total_k != 0 || problem.cu_seqlens_k != nullptr) {
      return invalid("total_k " + std::to_string(problem.total_k) +
                     " and cu_seqlens_k must be 0 and null with paged K / V (page_table set): "
                     "sequence b has seq_lens_k[b] keys");
    }
    const int ps = problem.page_size;
    KILN_RETURN_IF_ERROR(runner::checkPageSize("fmha", ps));
    if (problem.max_pages_per_seq < 1) {
      return invalid("max_pages_per_seq " + std::to_string(problem.max_pages_per_seq) +
                     " is not positive");
    }
    if (problem.num_pages < 1) {
      return invalid("num_pages " + std::to_string(problem.num_pages) + " is not positive");
    }
    const long long keys = static_cast<long long>(problem.max_pages_per_seq) * ps;
    if (keys > kMaxKeys) {
      return invalid("max_pages_per_seq * page_size = " + std::to_string(keys) +
                     " keys exceeds the limit " + std::to_string(kMaxKeys));
    }
  }
  if (pointers == PointerChecks::kCheck) {
    KILN_RETURN_IF_ERROR(checkPointer("q", problem.q, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("k", problem.k, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("v", problem.v, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("out", problem.out, kTensorAlignment));
    KILN_RETURN_IF_ERROR(checkPointer("cu_seqlens_q", problem.cu_seqlens_q, kIndexAlignment));
    if (paged(problem)) {
      KILN_RETURN_IF_ERROR(checkPointer("seq_lens_k", problem.seq_lens_k, kIndexAlignment));
      KILN_RETURN_IF_ERROR(checkPointer("page_table", problem.page_table, kIndexAlignment));
    } else {
      KILN_RETURN_IF_ERROR(checkPointer("cu_seqlens_k", problem.cu_seqlens_k, kIndexAlignment));
    }
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
  return Status::Ok();
}

// The wgmma launch: a persistent grid over tiles of kBlockM query rows of one head, three maps.
Status planWgmma(const Problem& problem, PointerChecks pointers, Plan* plan) {
  const int head_dim = plan->info->head_dim;
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
  params.window_left = problem.window_left;
  return Status::Ok();
}

// The mma launch: one block per blockM(w) packed (token, group head) rows of one (sequence, KV
// head), grid (m_blocks, kv_heads, batch); the 4-warp entry where a (sequence, KV head) has at most
// 64 rows (more, smaller blocks keep more loads in flight), else the head dim's prefill blocks.
Status planMma(const Problem& problem, Plan* plan) {
  const int head_dim = plan->info->head_dim;
  const int group = problem.q_heads / problem.kv_heads;
  const long long rows = static_cast<long long>(problem.total_q) * group;
  if (rows > kMaxKeys) {
    return invalid("total_q * (q_heads / kv_heads) = " + std::to_string(rows) +
                   " packed rows exceeds the limit " + std::to_string(kMaxKeys));
  }
  const int max_seqlen_q = problem.max_seqlen_q > 0 ? problem.max_seqlen_q : problem.total_q;
  const long long max_rows = static_cast<long long>(max_seqlen_q) * group;
  const bool small = max_rows <= mma::blockM(mma::kSmall) ||
                     mma::blockM(mma::prefillShape(head_dim)) == mma::blockM(mma::kSmall);
  const mma::Shape shape = small ? mma::kSmall : mma::prefillShape(head_dim);
  KILN_RETURN_IF_ERROR(runner::resolveEntry("fmha", plan->info->name, plan->info->variant,
                                            small ? kMmaRows64Entry : kMmaEntry, &plan->variant,
                                            &plan->entry));
  const int m_blocks = static_cast<int>((max_rows + mma::blockM(shape) - 1) / mma::blockM(shape));
  plan->launch.grid = Dim3{static_cast<unsigned>(m_blocks), static_cast<unsigned>(problem.kv_heads),
                           static_cast<unsigned>(problem.batch)};
  plan->launch.block = Dim3{static_cast<unsigned>(mma::threads(shape)), 1, 1};
  plan->launch.shared_bytes = static_cast<unsigned>(mma::sharedBytes(head_dim, shape));

  FmhaMmaParams& params = plan->mma_params;
  params.out = problem.out;
  params.lse = problem.lse;
  params.q = problem.q;
  params.k = problem.k;
  params.v = problem.v;
  params.cu_seqlens_q = problem.cu_seqlens_q;
  params.batch = problem.batch;
  params.q_heads = problem.q_heads;
  params.kv_heads = problem.kv_heads;
  params.group_size = group;
  params.total_q = problem.total_q;
  params.m_blocks = m_blocks;
  params.window_left = problem.window_left;
  params.scale_log2 = static_cast<float>(static_cast<double>(problem.scale) * kLog2e);
  if (paged(problem)) {
    params.seq_lens_k = problem.seq_lens_k;
    params.page_table = problem.page_table;
    params.max_pages_per_seq = problem.max_pages_per_seq;
    params.num_pages = problem.num_pages;
    const runner::PagedCacheStrides strides = runner::pagedCacheStrides(
        problem.page_size, problem.kv_heads, head_dim, problem.kv_layout == KvLayout::kHnd);
    params.page_size_log2 = strides.page_size_log2;
    params.page_stride = strides.page_stride;
    params.token_stride = strides.token_stride;
    params.head_stride = strides.head_stride;
  } else {
    params.cu_seqlens_k = problem.cu_seqlens_k;
    params.total_k = problem.total_k;
    params.token_stride = problem.kv_heads * head_dim;
    params.head_stride = head_dim;
  }
  return Status::Ok();
}

}  // namespace

// The device step: checkDevice on the plan, except that a plan the runner chose wgmma for (not
// asked for) on a device wgmma cannot serve is planned again on the mma variant, when it is built.
Status planForDevice(std::span<const VariantInfo> table, const Problem& problem,
                     const DeviceQuery& device, Plan* plan) {
  Status s = checkDevice(*plan, device);
  if (s.ok() || problem.kernel.has_value() || plan->info == nullptr ||
      plan->info->kernel != Kernel::kWgmma) {
    return s;
  }
  const VariantInfo* mma_info = find(table, Kernel::kMma, problem);
  if (mma_info == nullptr) return s;
  Plan fresh;
  fresh.no_op = plan->no_op;
  KILN_RETURN_IF_ERROR(runner::resolveEntry("fmha", mma_info->name, mma_info->variant, kMmaEntry,
                                            &fresh.variant, &fresh.entry));
  fresh.info = mma_info;
  if (!fresh.no_op) KILN_RETURN_IF_ERROR(planMma(problem, &fresh));
  *plan = fresh;
  return checkDevice(*plan, device);
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
  if (paged(problem) && problem.kv_layout != KvLayout::kNhd &&
      problem.kv_layout != KvLayout::kHnd) {
    return invalid("kv_layout " + std::to_string(static_cast<int>(problem.kv_layout)) +
                   " is not a KvLayout value (NHD or HND)");
  }
  if (problem.window_left < -1) {
    return invalid("window_left " + std::to_string(problem.window_left) +
                   " is negative (-1: no window)");
  }
  if (problem.window_left >= 0 && problem.mask != Mask::kCausal) {
    return invalid("window_left " + std::to_string(problem.window_left) +
                   " needs the causal mask (the window is the causal mask's left edge)");
  }
  bool dtype_built = false;
  bool mask_built = false;
  for (const VariantInfo& v : table) {
    if (v.dtype != problem.dtype) continue;
    dtype_built = true;
    mask_built = mask_built || v.mask == problem.mask;
  }
  if (!dtype_built) return runner::dtypeNotBuilt("fmha", problem.dtype, table);
  if (!mask_built) {
    return Status(StatusCode::kNotSupported, std::string("fmha: mask ") + mask +
                                                 " is not built for " + dtype + "; built for " +
                                                 dtype + ": " + builtMasks(table, problem.dtype));
  }
  const VariantInfo* wgmma = find(table, Kernel::kWgmma, problem);
  const VariantInfo* mma_info = find(table, Kernel::kMma, problem);
  if (wgmma == nullptr && mma_info == nullptr) {
    return Status(StatusCode::kNotSupported, "fmha: head_dim " + std::to_string(problem.head_dim) +
                                                 " is not built for " + dtype + " " + mask +
                                                 "; built for " + dtype + " " + mask + ": " +
                                                 builtHeadDims(table, problem.dtype, problem.mask));
  }
  // The kernel: the one asked for, else wgmma where it is built, implements the problem and (when
  // known) runs on the device, else mma.
  const std::string lacks = wgmmaLacks(problem);
  const VariantInfo* info = nullptr;
  if (problem.kernel.has_value()) {
    const char* kernel = kernelName(*problem.kernel);
    if (kernel == nullptr) {
      return invalid("kernel " + std::to_string(static_cast<int>(*problem.kernel)) +
                     " is not a Kernel value (wgmma or mma)");
    }
    info = *problem.kernel == Kernel::kWgmma ? wgmma : mma_info;
    if (info == nullptr) {
      return Status(StatusCode::kNotSupported,
                    std::string("fmha: kernel ") + kernel + " is not built for head_dim " +
                        std::to_string(problem.head_dim) + " " + dtype + " " + mask +
                        "; built: " + (wgmma != nullptr ? wgmma->name : mma_info->name));
    }
    if (*problem.kernel == Kernel::kWgmma && !lacks.empty()) {
      return Status(StatusCode::kNotSupported,
                    "fmha: " + lacks + " needs the mma kernel (kernel wgmma was asked for)");
    }
  } else {
    // The device is asked last (planForDevice): a device wgmma cannot serve moves the plan to mma.
    info = wgmma != nullptr && lacks.empty() ? wgmma : mma_info;
  }
  if (info == nullptr) {
    if (!lacks.empty()) {
      return Status(StatusCode::kNotSupported,
                    "fmha: " + lacks + " needs the mma kernel; fmha_mma_d" +
                        std::to_string(problem.head_dim) + "_" + dtype + "_" + mask +
                        " is not built (the wgmma kernel has no such mode)");
    }
    info = wgmma;  // only wgmma is built and the device cannot run it: checkDevice says why
  }
  const bool is_wgmma = info->kernel == Kernel::kWgmma;
  KILN_RETURN_IF_ERROR(runner::resolveEntry("fmha", info->name, info->variant,
                                            is_wgmma ? kEntry : kMmaEntry, &plan->variant,
                                            &plan->entry));
  plan->info = info;

  if (problem.batch < 0) return invalid("batch " + std::to_string(problem.batch) + " is negative");
  if (problem.batch == 0) {
    plan->no_op = true;
    return device != nullptr ? planForDevice(table, problem, *device, plan) : Status::Ok();
  }
  KILN_RETURN_IF_ERROR(checkShape(problem, pointers));
  KILN_RETURN_IF_ERROR(is_wgmma ? planWgmma(problem, pointers, plan) : planMma(problem, plan));
  // Last, so that select(device) == select(host) followed by planForDevice, which is what run()
  // does.
  return device != nullptr ? planForDevice(table, problem, *device, plan) : Status::Ok();
}

void persistentGrid(Plan* plan, int multiprocessors) {
  if (plan->info != nullptr && plan->info->kernel != Kernel::kWgmma) return;
  const int blocks = std::max(1, std::min(plan->tiles, multiprocessors));
  plan->launch.grid = Dim3{static_cast<unsigned>(blocks), 1, 1};
}

}  // namespace kiln::fmha
