// The gemv runner: the dense linear layers of decode (a few tokens, m <= 8) on the caller's stream,
//
//   y[i, j] = sum_k x[i, k] w[j, k] (+ bias[j])   for i < m, j < n
//
// with x and w in fp16 or bf16, fp32 accumulation, and y in the same dtype or in float32 (logits).
// At m <= 8 the product reads every weight once and does little else, so the kernel streams w in
// 16-byte vectors at the copy bandwidth; larger batches belong to a GEMM. Layouts (row-major,
// elements):
//   x     [m, ldx] dtype; the first k elements of each row are read
//   w     [n, k] dtype, contiguous: a PyTorch nn.Linear weight as it is stored
//   bias  [n] dtype, or null
//   y     [m, ldy] out_dtype; the first n elements of each row are written, nothing else
//
// One variant per dtype (gemv_fp16, gemv_bf16), each with one entry kernel (kiln_gemv) for every
// m. Every call launches one kernel on `stream` and nothing else: no host synchronization, no
// allocation, no workspace, so a run captures in a CUDA graph. m == 0 is a no-op: shapes and
// pointers are not checked and nothing is touched (dtype and out_dtype still are, since
// canImplement(problem, sm) answers for that variant). Numerics, limits and speed:
// kernels/gemv/README.md.
//
// One selector (kernels/gemv/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::gemv {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/gemv.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "gemv_bf16"
  DType dtype;                       // baked dtype of x, w and bias
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct GemvProblem {
  DType dtype = DType::kBFloat16;      // x, w, bias: fp16 or bf16
  DType out_dtype = DType::kBFloat16;  // y: dtype (rounded once from fp32) or kFloat32
  std::int64_t m = 0;                  // rows of x and y (tokens): 0 (a no-op) .. kMaxM
  std::int64_t n = 0;                  // rows of w, columns of y (output features)
  std::int64_t k = 0;                  // columns of w (input features): a multiple of 8
  std::int64_t ldx = 0;                // elements between rows of x; 0 means k
  std::int64_t ldy = 0;                // elements between rows of y; 0 means n
  const void* x = nullptr;             // [m, ldx]; 16-byte aligned
  const void* w = nullptr;             // [n, k]; 16-byte aligned
  const void* bias = nullptr;          // [n] or null; 2-byte aligned
  void* y = nullptr;                   // [m, ldy]; aligned to its element; overlaps no input
  // Programmatic dependent launch (kiln::LaunchConfig::programmatic_dependency). On sm_90 and
  // newer the kernel may become resident while the kernel before it on the stream still runs (as
  // soon as that kernel completes or releases its dependents, griddepcontrol.launch_dependents),
  // and reads its first weights then, hiding its launch latency and first loads behind that
  // kernel's tail. It waits (griddepcontrol.wait: the kernel before complete, its writes
  // visible) before it reads x or bias and before it writes y. So with overlap_launch:
  //   - w must not be written by the kernel before, nor by any earlier kernel that may still run
  //     when that one releases its dependents (one that releases them before its own wait lets
  //     its own predecessor run on): weights written once, before the launches that read them,
  //     qualify;
  //   - x and bias may be written, and y read or written, by the kernel before: the wait orders
  //     them.
  // Whatever overlap_launch is, the kernel releases its own dependents right after its wait: a
  // kernel launched after it as a programmatic dependent runs beside it and must wait before it
  // reads y or writes x, w, bias or y. Below sm_90 (an image compiled below sm_90, or a driver
  // without cuLaunchKernelEx) the launch is an ordinary one; the results are the same either way.
  bool overlap_launch = false;
};

// Limits (every one is checked by canImplement and run, naming the value and the limit).
inline constexpr std::int64_t kMaxM = 8;  // the token columns of one mma.sync m16n8k16 tile
// n: one block per 16 rows of w (grid.x), and the kernel's row indices are int32.
inline constexpr std::int64_t kMaxN = 2147483647;
// k: k / 8 (16-byte vectors of a row of w) is an int32 of the kernel's parameters.
inline constexpr std::int64_t kMaxK = 8 * kMaxN;
// ldx, ldy: 8 rows of 4-byte elements address fewer than 2^63 bytes.
inline constexpr std::int64_t kMaxLd = std::int64_t{1} << 58;

// Host-side admission: dtype is a built fp16 / bf16 (else kNotSupported, naming the built
// dtypes); out_dtype is dtype or fp32; m in 0..kMaxM; n in 1..kMaxN; k a multiple of 8 in
// 8..kMaxK; ldx (once 0 is k) a multiple of 8 (16-byte rows of x) in k..kMaxLd; ldy (once 0 is n)
// in n..kMaxLd; w at most 2^63 - 1 bytes; x and w non-null and 16-byte aligned, y non-null and
// aligned to its element, bias null or 2-byte aligned; y's bytes ([y, y + ((m - 1) ldy + n)
// elements)) overlap none of x's, w's or bias's. Else kInvalidArgument, naming the value and the
// limit.
Status canImplement(const GemvProblem& p);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const GemvProblem& p, int device_sm);
// Bytes of workspace run() needs: 0 (the contract is uniform across groups).
std::size_t workspaceSize(const GemvProblem& p);
// Admits and launches on `stream` (the device that owns it picks the image). The workspace is
// unused (may be null).
Status run(const GemvProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::gemv
