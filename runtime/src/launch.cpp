// resolveStream, launch and preload: from the caller's stream to its context and device (once per
// run()), then the loaded function (a lock-free lookup once loaded, loader.h) and cuLaunchKernel on
// that same stream, with the stream's context current. The success path builds no strings:
// messages are composed only once something has failed.
#include <string>

#include "device.h"
#include "driver.h"
#include "kiln/runtime.h"
#include "loader.h"

namespace kiln {
namespace {

std::string dimText(const Dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

std::string launchLabel(const kiln_variant& variant, int entry, const LaunchConfig& config) {
  return std::string(detail::variantName(variant)) + " entry " + detail::entryName(variant, entry) +
         " (grid " + dimText(config.grid) + ", block " + dimText(config.block) + ", " +
         std::to_string(config.shared_bytes) + " bytes dynamic shared memory): ";
}

// What needs neither the driver nor the device: the entry exists, no dimension is 0.
Status checkLaunch(const kiln_variant& variant, int entry, const LaunchConfig& config) {
  if (entry < 0 || entry >= variant.num_entries || variant.entries == nullptr)
    return Status(StatusCode::kInvalidArgument,
                  std::string(detail::variantName(variant)) + ": entry " + std::to_string(entry) +
                      " is out of range; the variant has " + std::to_string(variant.num_entries) +
                      " entries");
  const Dim3& g = config.grid;
  const Dim3& b = config.block;
  if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0)
    return Status(StatusCode::kInvalidArgument,
                  launchLabel(variant, entry, config) + "no grid or block dimension may be 0");
  return Status::Ok();
}

// A target that resolveStream did not fill has no record or device: refused, not dereferenced.
Status checkTarget(const StreamTarget& target, const char* what) {
  if (target.state == nullptr || target.device == nullptr || target.context == nullptr)
    return Status(StatusCode::kInvalidArgument,
                  std::string(what) +
                      ": the StreamTarget was not filled by kiln::resolveStream (no context or "
                      "device); resolve the stream first");
  return Status::Ok();
}

// Programmatic dependent launch exists from sm_90 (Hopper). What decides is the SM the image was
// compiled for, not the device's: a compute_80 PTX image JIT-compiled on an H200 has its
// griddepcontrol.wait compiled out (kernels/common/dependent_launch.cuh), so only stream order
// may keep its reads after the previous kernel's writes.
constexpr int kMinProgrammaticSm = 90;

Status launchKernel(const DriverApi& api, CUfunction function, const LaunchConfig& c, int image_sm,
                    Stream stream, void** args) {
  if (c.programmatic_dependency && image_sm >= kMinProgrammaticSm &&
      api.launchKernelEx != nullptr) {
    CUlaunchAttribute attribute{};
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig ex{};
    ex.gridDimX = c.grid.x;
    ex.gridDimY = c.grid.y;
    ex.gridDimZ = c.grid.z;
    ex.blockDimX = c.block.x;
    ex.blockDimY = c.block.y;
    ex.blockDimZ = c.block.z;
    ex.sharedMemBytes = c.shared_bytes;
    ex.hStream = stream;
    ex.attrs = &attribute;
    ex.numAttrs = 1;
    KILN_CU_CHECK(api.launchKernelEx(&ex, function, args, nullptr));
    return Status::Ok();
  }
  KILN_CU_CHECK(api.launchKernel(function, c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                                 c.block.z, c.shared_bytes, stream, args, nullptr));
  return Status::Ok();
}

// The launch with the target's context current: as it is, when resolveStream found it current;
// else pushed for the call and popped after it, so the caller's own context (or none) is current
// again.
Status launchInContext(const DriverApi& api, const StreamTarget& t, CUfunction function,
                       const LaunchConfig& config, int image_sm, void** args) {
  if (t.caller_context == t.context)
    return launchKernel(api, function, config, image_sm, t.stream, args);
  detail::ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.push(api, t.context));
  KILN_RETURN_IF_ERROR(launchKernel(api, function, config, image_sm, t.stream, args));
  Status popped = scope.pop();
  if (!popped.ok())
    return detail::withPrefix(popped, "launched, but the caller's context was not restored: ");
  return Status::Ok();
}

// resolveStream for the one-call launch and preload: a failure to reach the driver is reported
// as is (the same message from every entry point), one about the stream names the variant.
Status resolveFor(const kiln_variant& variant, Stream stream, StreamTarget* target) {
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  Status resolved = resolveStream(stream, target);
  if (!resolved.ok())
    return detail::withPrefix(resolved, std::string(detail::variantName(variant)) + ": ");
  return Status::Ok();
}

}  // namespace

Status resolveStream(Stream stream, StreamTarget* out) {
  if (out == nullptr) return Status(StatusCode::kInvalidArgument, "resolveStream: out is null");
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  CUcontext current = nullptr;
  KILN_CU_CHECK(api->ctxGetCurrent(&current));
  CUcontext context = current;
  if (stream == nullptr) {
    if (context == nullptr)
      return Status(StatusCode::kInvalidArgument,
                    "no current CUDA context: the null stream was given and this thread has no "
                    "current context; pass the stream to run on, or make a context current first "
                    "(cudaSetDevice or cuCtxSetCurrent)");
  } else {
    KILN_CU_CHECK(api->streamGetCtx(stream, &context));
    if (context == nullptr)
      return Status(StatusCode::kInternal, "cuStreamGetCtx returned no context for the stream");
  }
  StreamTarget t;
  t.stream = stream;
  t.context = context;
  t.caller_context = current;
  KILN_RETURN_IF_ERROR(detail::findContext(*api, context, &t.state, &t.device));
  *out = t;
  return Status::Ok();
}

Status launch(const StreamTarget& target, const kiln_variant& variant, int entry,
              const LaunchConfig& config, void** args) {
  KILN_RETURN_IF_ERROR(checkLaunch(variant, entry, config));
  KILN_RETURN_IF_ERROR(checkTarget(target, detail::variantName(variant)));
  const int limit = target.device->max_shared_bytes_per_block_optin;
  if (limit > 0 && config.shared_bytes > static_cast<unsigned>(limit))
    return Status(StatusCode::kInvalidArgument,
                  launchLabel(variant, entry, config) + target.device->name + " (" +
                      detail::smName(target.device->sm) + ") allows at most " +
                      std::to_string(limit) + " bytes of shared memory per block");
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  detail::LoadedFunction f;
  if (!detail::findLoaded(target, variant, entry, config.shared_bytes, &f)) {
    KILN_RETURN_IF_ERROR(
        detail::acquireFunction(*api, target, variant, entry, config.shared_bytes, &f));
  }
  Status launched = launchInContext(*api, target, f.function, config, f.image_sm, args);
  if (!launched.ok()) return detail::withPrefix(launched, launchLabel(variant, entry, config));
  return Status::Ok();
}

Status launch(const kiln_variant& variant, int entry, const LaunchConfig& config, Stream stream,
              void** args) {
  KILN_RETURN_IF_ERROR(checkLaunch(variant, entry, config));
  StreamTarget target;
  KILN_RETURN_IF_ERROR(resolveFor(variant, stream, &target));
  return launch(target, variant, entry, config, args);
}

Status preload(const StreamTarget& target, const kiln_variant& variant) {
  KILN_RETURN_IF_ERROR(checkTarget(target, detail::variantName(variant)));
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  return detail::acquireFunction(*api, target, variant, -1, 0, nullptr);
}

Status preload(const kiln_variant& variant, Stream stream) {
  StreamTarget target;
  KILN_RETURN_IF_ERROR(resolveFor(variant, stream, &target));
  return preload(target, variant);
}

}  // namespace kiln
