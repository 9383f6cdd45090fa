// The kiln runtime's public surface: resolve the caller's stream once (its context and device),
// launch a variant's entry kernel on it, ask which variants this device can run, and encode the
// TMA tensor maps that some kernels take as parameters.
//
// How a runner's run() uses it:
//   StreamTarget target;
//   KILN_RETURN_IF_ERROR(resolveStream(stream, &target));      // once per run()
//   ... select with target.device->sm and target.device->multiprocessors ...
//   KILN_RETURN_IF_ERROR(encodeTensorMap(target, spec, &params.tma_q));   // if it has maps
//   return launch(target, variant, entry, config, args);       // as often as it launches
//
// The context rule: every driver call kiln makes on behalf of a stream (module load, function
// lookup, attribute, capture query, launch, tensor-map encode) runs with the stream's context
// current on the calling thread, and the thread's own current context (or none) is current again
// when the call returns. So a runner works from any thread: one with no current context, or one
// whose current context is another device's. Only the null stream means "the calling thread's
// current context", and needs one.
//
// Modules load lazily, once per (variant, CUDA context), thread-safely; see loader.h for the
// rules (capture guard, retry after a failed load, poison after a failed cleanup). The driver is
// reached through dlopen("libcuda.so.1"): nothing here links against a CUDA library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/variant.h"

struct CUstream_st;
struct CUctx_st;

namespace kiln {

namespace detail {
struct ContextState;  // the runtime's record of one context (its device, its loaded modules)
}  // namespace detail

// The caller's stream; the same type as cudaStream_t and CUstream. nullptr is the legacy
// default stream of the calling thread's current context.
using Stream = CUstream_st*;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;  // dynamic shared memory
  // Programmatic dependent launch: on sm_90 and newer the kernel may be scheduled while the
  // previous kernel on the stream still runs (that kernel can release it early with
  // griddepcontrol.launch_dependents), so its launch latency hides behind that kernel's tail; the
  // kernel must execute griddepcontrol.wait before it reads anything the previous kernel writes.
  // For an image compiled below sm_90 (a cubin for sm_80, a compute_80 PTX image even on an H200),
  // or with a driver table without cuLaunchKernelEx, it is an ordinary launch.
  bool programmatic_dependency = false;
};

struct DeviceInfo {
  int ordinal = -1;  // the CUdevice (the driver's device ordinal)
  std::string name;
  int sm = 0;  // 10 * major + minor: 90 for an H200, 87 for Jetson Orin
  int multiprocessors = 0;
  int max_shared_bytes_per_block_optin = 0;  // static + dynamic shared memory a block may opt into
};

// What a runner resolves once per run(), on the thread that then launches: the caller's stream,
// the context that owns it, that context's device, and the context that was current on this
// thread. Filled by resolveStream only (one not filled by it is refused). launch, preload and
// encodeTensorMap take it and ask the driver nothing more about the stream: a launch of a variant
// already loaded in the context finds its function without a lock and makes no driver call but
// cuLaunchKernel (cuLaunchKernelEx); around it none when `caller_context` is `context`, else one
// push and one pop of `context`.
//
// Valid on the thread that resolved it, for as long as that thread's current context is still
// `caller_context` (kiln's own calls always restore it) and the context lives: resolve again in
// each run(), and after cudaSetDevice / cuCtxSetCurrent. A stale one fails loudly (a driver error
// naming the call) and never launches on another stream than `stream`; one that outlived
// unloadContext of its context finds the context anew.
struct StreamTarget {
  Stream stream = nullptr;
  CUctx_st* context = nullptr;            // the context that owns `stream`
  const DeviceInfo* device = nullptr;     // `context`'s device; cached for the life of the process
  CUctx_st* caller_context = nullptr;     // current on this thread at resolveStream; may be null
  detail::ContextState* state = nullptr;  // the runtime's own: its module table for `context`
};

// Fills `out` for `stream`: cuCtxGetCurrent and cuStreamGetCtx (for the null stream, the calling
// thread's current context, which then must exist). The device of a context is queried the first
// time kiln sees the context (cuCtxGetDevice, the context pushed) and cached per context, its
// description per device: after that, a resolve costs those two cheap calls, no lock and no
// allocation.
Status resolveStream(Stream stream, StreamTarget* out);

// The device that owns `stream` (its context's device): resolveStream, then a copy of the
// cached description.
Status deviceForStream(Stream stream, DeviceInfo* out);

// The image of `variant` that runs on a device of SM `device_sm`: an exact match first, then
// (for images that are not arch-specific) the newest image of the same major and a lower minor;
// only when no cubin runs, the newest PTX image of an SM at most `device_sm` (any major; the
// driver JIT-compiles it). On a miss: kNoKernelImage, "rmsnorm_h4096_bf16: artifact has sm_80,
// compute_100 (PTX) only; device is sm_90".
Status selectImage(const kiln_variant& variant, int device_sm, const kiln_image** out);

// Whether a driver of `driver_version` (cuDriverGetVersion: 12060 for CUDA 12.6) may load `image`
// of `variant`, built with CUDA variant.cuda_version: not across majors (a CUDA 13 cubin is not
// promised to load on a CUDA 12 driver), and PTX not from a newer minor either (the driver's JIT
// reads PTX ISAs up to its own); a cubin of a newer minor of the same major loads (CUDA's minor
// version compatibility). Refused: kDriverTooOld, "rmsnorm_h4096_bf16: artifact built with CUDA
// 13.0; driver supports 12.6; use the cuda12 tarball or update the driver". A version of 0
// (unknown) on either side is not checked. Launch, preload and doctor check it before a load.
Status checkDriverVersion(const kiln_variant& variant, const kiln_image& image, int driver_version);

// Launches entry `entry` (an index into variant.entries) on `target.stream` with `args` (the
// kernel's parameter pointers, as cuLaunchKernel takes them), with the target's context current
// for the call (see StreamTarget). Loads the module on first use in the context (loader.h).
// Dynamic shared memory above 48 KiB is opted into for the kernel; above the device's per-block
// limit it is refused (kInvalidArgument, naming both).
Status launch(const StreamTarget& target, const kiln_variant& variant, int entry,
              const LaunchConfig& config, void** args);

// resolveStream(stream), then launch(target, ...): for a caller that launches once per resolve.
// A resolve failure is prefixed with the variant's name.
Status launch(const kiln_variant& variant, int entry, const LaunchConfig& config, Stream stream,
              void** args);

// Loads the module of `variant` in the target's (the stream's) context now, e.g. before stream
// capture begins.
Status preload(const StreamTarget& target, const kiln_variant& variant);
Status preload(const kiln_variant& variant, Stream stream);

struct VariantReport {
  std::string name;
  std::string group;
  bool runnable = false;
  int image_sm = 0;        // the SM of the image that would run, when runnable
  bool image_ptx = false;  // that image is PTX (compute_<image_sm>), JIT-compiled at load
  std::string reason;      // why not, when not runnable
};

struct DoctorReport {
  DeviceInfo device;
  int driver_version = 0;  // as cuDriverGetVersion reports it: 13000 for CUDA 13.0
  std::vector<VariantReport> variants;
};

// Which of `variants` the device `ordinal` can run, and why not for the others. Selects an image
// and loads it (then unloads it) in the device's primary context, so "no kernel image" and a
// corrupt cubin are both found before any launch.
Status doctor(std::span<const kiln_variant* const> variants, int ordinal, DoctorReport* out);

// How many CUDA devices the driver shows this process (cuDeviceGetCount): the ordinals doctor
// takes are 0 .. count - 1. No driver: kDriverUnavailable, as for every other call.
Status deviceCount(int* count);

// ---- TMA tensor maps -------------------------------------------------------------------------
// A tiled tensor map (the driver's CUtensorMap) tells the Tensor Memory Accelerator of sm_90 and
// later how to copy boxes of a global tensor into shared memory. A runner encodes it on the host,
// once per launch, and passes it by value in the kernel's parameters (a 128-byte, 64-byte aligned
// member of a __grid_constant__ struct). The enums mirror cuda.h's, so that this header needs no
// CUDA header; interleaved layouts are not offered (the interleave is always NONE).

enum class TensorMapElement { kUInt8, kUInt16, kUInt32, kFloat16, kBFloat16, kFloat32 };
// Shared-memory swizzle; a swizzled map's box rows (box[0] * element bytes) fit the width.
enum class TensorMapSwizzle { kNone, k32B, k64B, k128B };
// The size of the L2 requests that a copy's DRAM reads are promoted to.
enum class TensorMapL2Promotion { kNone, k64B, k128B, k256B };
// What out-of-bounds elements of a box read as: zero (the driver's FLOAT_OOB_FILL_NONE), or
// (float elements only) a NaN that the tensor cores treat as zero.
enum class TensorMapOobFill { kZero, kNanRequestZeroFma };

inline constexpr int kMaxTensorMapRank = 5;
inline constexpr std::size_t kTensorMapBytes = 128;     // sizeof(CUtensorMap)
inline constexpr std::size_t kTensorMapAlignment = 64;  // the driver's requirement (CUDA 13's
                                                        // cuda.h aligns CUtensorMap to 128)

// A tiled map of a tensor of `rank` dimensions, innermost (contiguous) first. The limits are the
// driver's (cuTensorMapEncodeTiled); checkTensorMap enforces them.
struct TensorMapSpec {
  TensorMapElement element = TensorMapElement::kFloat16;
  int rank = 0;                   // 1..5
  const void* address = nullptr;  // global address of element (0, ..., 0): 16-byte aligned
  // Elements along each dimension: 1..2^32.
  std::uint64_t dims[kMaxTensorMapRank] = {};
  // Bytes from one index to the next of dimensions 1..rank-1 (strides[i] is dimension i + 1's;
  // dimension 0 is contiguous): multiples of 16, below 2^40. Need not grow with the dimension.
  std::uint64_t strides[kMaxTensorMapRank - 1] = {};
  // Elements one copy moves along each dimension: 1..256; box[0] * element bytes a multiple of 16.
  std::uint32_t box[kMaxTensorMapRank] = {};
  // Traversal step along each dimension: 1..8 (1: every element of the box).
  std::uint32_t element_strides[kMaxTensorMapRank] = {1, 1, 1, 1, 1};
  TensorMapSwizzle swizzle = TensorMapSwizzle::kNone;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::kNone;
  TensorMapOobFill oob_fill = TensorMapOobFill::kZero;
};

// Whether `spec` meets every documented limit of cuTensorMapEncodeTiled; needs no driver.
// kInvalidArgument naming the field, its value and the limit ("tensor map: strides[0] 200 bytes
// is not a multiple of 16"). Entries past `rank` are ignored.
Status checkTensorMap(const TensorMapSpec& spec);

// Checks `spec` (above), then encodes it through the driver into `out`: kTensorMapBytes bytes,
// kTensorMapAlignment-aligned (a CUtensorMap, or any struct of that size and alignment), with the
// target's context current for the call (cuTensorMapEncodeTiled fails with
// CUDA_ERROR_INVALID_CONTEXT on a thread with no current context). A driver failure is
// kDriverError naming the CUresult and the spec. Runners encode through this overload.
Status encodeTensorMap(const StreamTarget& target, const TensorMapSpec& spec, void* out);

// The same in whatever context is current on the calling thread, which must have one: for callers
// that manage contexts themselves. A runner must not use it (its thread may have none).
Status encodeTensorMap(const TensorMapSpec& spec, void* out);

}  // namespace kiln
