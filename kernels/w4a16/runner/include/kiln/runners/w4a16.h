// The w4a16 runner: int4 weight-only linear layers on the caller's stream.
//
//   y[m, n] = sum_k x[m, k] * w[n, k] (+ bias[n]),  w[n, k] = (q[n, k] - z) * scale
//
// x, y, bias, scales and zero points are of the problem's dtype (fp16 or bf16), accumulation fp32,
// each output rounded once to nearest even. q is a 4-bit weight in kiln's packed layout, with one
// scale per group of `group_size` along K and, in the zero-point variants, one zero point per
// group (z = 8 otherwise: symmetric GPTQ). repack() turns a GPTQ or AWQ checkpoint into that
// layout once, at load, on the device. kernels/w4a16/README.md has the layouts byte by byte, the
// variants and the limits.
//
// One selector (kernels/w4a16/runner/selector.h) answers canImplement and picks what run()
// launches: the tile by M (tile_m 8 and 16, the GEMV kernel, for M <= 16), the split of K by the
// device's SM count; the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::w4a16 {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/w4a16.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "w4a16_m16_g128_zp_bf16"
  int tile_m;                        // tokens per block: 16, 64, 128
  int group_size;                    // K per scale
  bool zero_point;                   // per-group zero points (else z = 8)
  DType dtype;                       // x, y, bias, scales, zero points
  const kiln_variant* (*variant)();  // the variant's images and entries
};

struct Problem {
  DType dtype = DType::kBFloat16;
  std::int64_t m = 0;            // tokens; 0 is a no-op: pointers are not checked
  std::int64_t n = 0;            // output features: a positive multiple of 128
  std::int64_t k = 0;            // input features: a positive multiple of 64 and of group_size
  int group_size = 128;          // one of the artifact's baked group sizes
  const void* x = nullptr;       // [m, k]
  const void* weight = nullptr;  // kiln's packed layout, n * k / 2 bytes (repack() writes it)
  const void* scales = nullptr;  // [k / group_size, n], pair order (repack() writes it)
  const void* zeros = nullptr;   // [k / group_size, n], pair order; nullptr: symmetric (z = 8)
  const void* bias = nullptr;    // [n] or nullptr
  void* y = nullptr;             // [m, n]
  int splits = 0;           // 0: planned for the device's SM count; else at most this many (1..32)
  int multiprocessors = 0;  // 0: workspaceSize() plans for the largest device; else for this many
};

// Host-side admission: a variant for (dtype, group_size, zero-point form) is built, n, k, m and
// splits are in range, pointers are non-null and 16-byte aligned; the message names the value and
// the limit ("w4a16: k 4000 is not a multiple of 64").
Status canImplement(const Problem& problem);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const Problem& problem, int device_sm);
// Bytes of workspace run() needs: the split-K partials, splits * m * n * 4 bytes when the plan
// splits K (for problem.multiprocessors SMs, or the most any device has when 0), else 0.
std::size_t workspaceSize(const Problem& problem);
// Admits and launches on `stream` (the GEMM, then the split-K reduction as its programmatic
// dependent when K is split). The workspace holds the partials; m == 0 returns ok untouched.
Status run(const Problem& problem, void* workspace, std::size_t workspace_bytes, Stream stream);

// Checkpoint layouts (README.md, "Layouts"). Only checkpoints without activation reordering
// (desc_act / g_idx) are read: their groups are contiguous runs of K.
enum class SourceFormat : std::int32_t {
  kGptq = 0,  // AutoGPTQ / GPTQModel: qweight int32 [k / 8, n], qzeros int32 [k / g, n / 8] (z - 1)
  kAwq = 1,   // AutoAWQ GEMM: qweight int32 [k, n / 8], qzeros int32 [k / g, n / 8], AWQ's order
};

struct RepackProblem {
  SourceFormat format = SourceFormat::kGptq;
  DType dtype = DType::kBFloat16;        // of the output scales and zeros (the model's dtype)
  DType scales_dtype = DType::kFloat16;  // of the checkpoint's scales
  std::int64_t n = 0;                    // 0 is a no-op
  std::int64_t k = 0;
  int group_size = 128;
  const void* qweight = nullptr;
  const void* qzeros = nullptr;      // nullptr: no zero points are written (symmetric use)
  const void* src_scales = nullptr;  // [k / group_size, n]
  void* weight = nullptr;            // out: n * k / 2 bytes
  void* scales = nullptr;            // out: [k / group_size, n] of dtype
  void* zeros = nullptr;             // out: [k / group_size, n] of dtype; required with qzeros
};

// Checks the shapes (n, k and group_size as run() admits them) and pointers, then launches the two
// repack kernels on `stream`. Pure data movement: the result is exact (scales are rounded to the
// dtype when the checkpoint's differ).
Status canRepack(const RepackProblem& problem);
Status repack(const RepackProblem& problem, Stream stream);

}  // namespace kiln::w4a16
