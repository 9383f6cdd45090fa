// The decoderops runner: the small kernels a decoder needs between the big ones, on the caller's
// stream. Three problems, each with the runner contract of every group (canImplement twice,
// workspaceSize, run):
//
//   EmbedProblem     out[t, :] = table[ids[t], :]   the embedding lookup, or any row gather (the
//                                                   last token of each sequence before the lm_head)
//   SiluMulProblem   out[t, i] = silu(gate[t, i]) * up[t, i]   the SiLU-gated MLP activation
//   ArgmaxProblem    out[r] = argmax_j x[r, j]      greedy sampling over the logits
//
// One variant per dtype (decoderops_fp16, decoderops_bf16, decoderops_fp32), each with all three
// entry kernels. Rows are row-major and contiguous. Every call launches one kernel on `stream`
// and nothing else: no host synchronization, no allocation, no workspace, so a run captures in a
// CUDA graph. A problem of 0 tokens (0 rows) is a no-op: its shapes and pointers are not checked
// and nothing is touched (its dtype must still be a built one, since canImplement(problem, sm)
// answers for that variant). Numerics, limits and speed: kernels/decoderops/README.md.
//
// Every problem has overlap_launch: programmatic dependent launch
// (kiln::LaunchConfig::programmatic_dependency). On sm_90 and newer the kernel may become resident
// while the kernel before it on the stream still runs (as soon as that kernel completes or
// releases its dependents, griddepcontrol.launch_dependents), hiding its launch latency behind
// that kernel's tail. Its first act is to wait (griddepcontrol.wait: the kernel before complete,
// its writes visible), before it reads or writes any global memory, so every input may be
// written, and out read or written, by the kernel before. Whatever overlap_launch is, the kernel
// releases its own dependents right after its wait: a kernel launched after it as a programmatic
// dependent runs beside it and must wait before it reads out or writes any of the problem's
// tensors. Below sm_90 (an image compiled below sm_90, or a driver without cuLaunchKernelEx) the
// launch is an ordinary one; the results are the same either way.
//
// One selector (kernels/decoderops/runner/selector.h) answers canImplement and picks what run()
// launches, so the two never disagree.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/runtime.h"
#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::decoderops {

using ::kiln::DType;  // kiln/dtype.h: the one dtype enum of every group

// One variant of the artifact: a row of the table kiln build generates (kiln/groups/decoderops.h,
// kVariants), its fields the name, kiln.toml's [constants] in declaration order, and the variant.
struct VariantInfo {
  const char* name;                  // "decoderops_bf16"
  DType dtype;                       // baked dtype of every tensor but ids and argmax's out
  const kiln_variant* (*variant)();  // the variant's images and entries
};

// out[t, :] = table[ids[t], :] for t < tokens (embedding lookup; also any row gather, e.g. the last
// token of each sequence). An id outside [0, rows) writes a zero row (never reads outside the
// table). The copy is bit for bit (NaN payloads included). out must not overlap table.
struct EmbedProblem {
  DType dtype = DType::kBFloat16;
  std::int64_t tokens = 0;            // 0: no-op, nothing checked or touched
  std::int64_t rows = 0;              // rows of table (vocab)
  std::int64_t width = 0;             // elements per row (hidden); a multiple of 8 (16-byte rows)
  const std::int32_t* ids = nullptr;  // [tokens]
  const void* table = nullptr;        // [rows, width]
  void* out = nullptr;                // [tokens, width]
  bool overlap_launch = false;        // programmatic dependent launch (sm_90+): see above
};

// The SiLU-gated MLP activation: in = [tokens, 2 * width], each row gate (first width) then up;
// out[t, i] = silu(gate[t, i]) * up[t, i], silu(g) = g / (1 + exp(-g)), fp32 inside, rounded once.
struct SiluMulProblem {
  DType dtype = DType::kBFloat16;
  std::int64_t tokens = 0;      // 0: no-op
  std::int64_t width = 0;       // a multiple of 8
  const void* in = nullptr;     // [tokens, 2 * width]
  void* out = nullptr;          // [tokens, width]; must not overlap in
  bool overlap_launch = false;  // programmatic dependent launch (sm_90+): see above
};

// Greedy sampling: out[r] = the smallest j with x[r, j] == max_j x[r, j] (torch.argmax's first
// occurrence); a NaN counts as the maximum (as torch.argmax), the first NaN wins.
struct ArgmaxProblem {
  DType dtype = DType::kFloat32;  // fp32, fp16 or bf16 logits
  std::int64_t rows = 0;          // 0: no-op
  std::int64_t width = 0;         // vocab; >= 1
  const void* x = nullptr;        // [rows, width]
  std::int32_t* out = nullptr;    // [rows]
  bool overlap_launch = false;    // programmatic dependent launch (sm_90+): see above
};

// Limits (every one is checked by canImplement and run, naming the value and the limit).
inline constexpr std::int64_t kMaxTokens = 2147483647;  // tokens, argmax rows: CUDA's grid.x
inline constexpr std::int64_t kMaxWidth = 2147483647;   // width: indices are int32

// Host-side admission: the dtype is built (else kNotSupported, naming the built dtypes); the
// sizes are within the limits and fit the kernel's indexing; pointers are non-null and aligned
// (rows of table, in, out: 16 bytes; argmax's x: 16 bytes when width * element bytes is a
// multiple of 16, else the element's size; ids and argmax's out: 4 bytes); silu_mul's out and
// in (embed's out and table) do not overlap. Else kInvalidArgument, naming the value and the limit.
Status canImplement(const EmbedProblem& p);
// The same, and the artifact has an image that runs on a device of SM `device_sm`.
Status canImplement(const EmbedProblem& p, int device_sm);
// Bytes of workspace run() needs: 0 (the contract is uniform across groups).
std::size_t workspaceSize(const EmbedProblem& p);
// Admits and launches on `stream` (the device that owns it picks the image). The workspace is
// unused (may be null).
Status run(const EmbedProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream);

Status canImplement(const SiluMulProblem& p);
Status canImplement(const SiluMulProblem& p, int device_sm);
std::size_t workspaceSize(const SiluMulProblem& p);  // 0
Status run(const SiluMulProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream);

Status canImplement(const ArgmaxProblem& p);
Status canImplement(const ArgmaxProblem& p, int device_sm);
std::size_t workspaceSize(const ArgmaxProblem& p);  // 0
Status run(const ArgmaxProblem& p, void* workspace, std::size_t workspace_bytes, Stream stream);

}  // namespace kiln::decoderops
