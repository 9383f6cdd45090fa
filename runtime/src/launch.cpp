// launch and preload: from the caller's stream to its context and device, then the image that
// runs there, the lazily loaded module, and cuLaunchKernel on that same stream. The success path
// builds no strings: messages are composed only once something has failed.
#include <string>

#include "device.h"
#include "driver.h"
#include "kiln/runtime.h"
#include "loader.h"

namespace kiln {
namespace {

// What launch and preload both need: the driver, the stream's context and device, the image.
struct Target {
  const DriverApi* api = nullptr;
  CUcontext context = nullptr;
  const DeviceInfo* device = nullptr;
  const kiln_image* image = nullptr;
};

Status findDevice(const DriverApi& api, Stream stream, Target* t) {
  KILN_RETURN_IF_ERROR(detail::contextForStream(api, stream, &t->context));
  CUdevice device = 0;
  KILN_RETURN_IF_ERROR(detail::deviceOfContext(api, t->context, &device));
  return detail::deviceInfo(api, device, &t->device);
}

Status resolveTarget(const kiln_variant& variant, Stream stream, Target* t) {
  KILN_RETURN_IF_ERROR(detail::checkNotPoisoned(variant));
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&t->api));
  Status found = findDevice(*t->api, stream, t);
  if (!found.ok())
    return detail::withPrefix(found, std::string(detail::variantName(variant)) + ": ");
  return selectImage(variant, t->device->sm, &t->image);
}

std::string dimText(const Dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

std::string launchLabel(const kiln_variant& variant, int entry, const LaunchConfig& config) {
  return std::string(detail::variantName(variant)) + " entry " + detail::entryName(variant, entry) +
         " (grid " + dimText(config.grid) + ", block " + dimText(config.block) + ", " +
         std::to_string(config.shared_bytes) + " bytes dynamic shared memory): ";
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

}  // namespace

Status launch(const kiln_variant& variant, int entry, const LaunchConfig& config, Stream stream,
              void** args) {
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

  Target t;
  KILN_RETURN_IF_ERROR(resolveTarget(variant, stream, &t));
  const int limit = t.device->max_shared_bytes_per_block_optin;
  if (limit > 0 && config.shared_bytes > static_cast<unsigned>(limit))
    return Status(StatusCode::kInvalidArgument,
                  launchLabel(variant, entry, config) + t.device->name + " (" +
                      detail::smName(t.device->sm) + ") allows at most " + std::to_string(limit) +
                      " bytes of shared memory per block");

  CUfunction function = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireFunction(*t.api, variant, *t.image, t.context, stream, entry,
                                               config.shared_bytes, &function));
  Status launched = launchKernel(*t.api, function, config, t.image->sm, stream, args);
  if (!launched.ok()) return detail::withPrefix(launched, launchLabel(variant, entry, config));
  return Status::Ok();
}

Status preload(const kiln_variant& variant, Stream stream) {
  Target t;
  KILN_RETURN_IF_ERROR(resolveTarget(variant, stream, &t));
  return detail::acquireFunction(*t.api, variant, *t.image, t.context, stream, -1, 0, nullptr);
}

}  // namespace kiln
