// doctor: before any launch, which variants a device can run and why the others cannot. It
// selects each variant's image with the same selectImage that launch uses, then loads it into
// the device's primary context and unloads it again, so a missing SM, an artifact of a newer CUDA
// than the driver (checkDriverVersion, before any load), a corrupt or too-new cubin,
// PTX the driver cannot JIT and a missing entry kernel all show up here rather than at the first
// launch.
#include <string>

#include "device.h"
#include "driver.h"
#include "kiln/runtime.h"
#include "loader.h"

namespace kiln {
namespace {

// Loads `image` in the current context, looks up every entry, unloads it. A failed unload
// poisons the variant, as it would after a launch.
Status probeImage(const DriverApi& api, const kiln_variant& variant, const kiln_image& image) {
  if (variant.num_entries < 0 || (variant.num_entries > 0 && variant.entries == nullptr))
    return Status(StatusCode::kInvalidArgument, "its entry table is null");
  if (image.data == nullptr) return Status(StatusCode::kInvalidArgument, "its image data is null");
  CUmodule module = nullptr;
  KILN_RETURN_IF_ERROR(detail::loadImageModule(api, image, &module));
  Status found = [&]() -> Status {
    for (int i = 0; i < variant.num_entries; ++i) {
      CUfunction function = nullptr;
      const char* entry = variant.entries[i];
      Status lookup = [&]() -> Status {
        KILN_CU_CHECK(api.moduleGetFunction(&function, module, entry));
        return Status::Ok();
      }();
      if (!lookup.ok())
        return detail::withPrefix(lookup,
                                  std::string("entry ") + detail::entryName(variant, i) + ": ");
    }
    return Status::Ok();
  }();
  Status unloaded = [&]() -> Status {
    KILN_CU_CHECK(api.moduleUnload(module));
    return Status::Ok();
  }();
  if (!unloaded.ok()) {
    detail::poison(detail::variantName(variant), unloaded);
    return detail::withPrefix(unloaded, "unloading the probe failed, so it is now poisoned: ");
  }
  return found;
}

VariantReport checkVariant(const DriverApi& api, const kiln_variant* variant, int device_sm,
                           int driver_version) {
  VariantReport report;
  if (variant == nullptr) {
    report.name = "<null>";
    report.reason = "the variant list holds a null pointer";
    return report;
  }
  report.name = detail::variantName(*variant);
  report.group = variant->group != nullptr ? variant->group : "";
  Status status = detail::checkNotPoisoned(*variant);
  const kiln_image* image = nullptr;
  if (status.ok()) status = selectImage(*variant, device_sm, &image);
  if (status.ok()) status = checkDriverVersion(*variant, *image, driver_version);
  if (status.ok()) {
    status = probeImage(api, *variant, *image);
    if (!status.ok())
      status = detail::withPrefix(
          status, "its " + detail::imageName(*image) + " image does not load on this device: ");
  }
  if (!status.ok()) {
    report.reason = status.toString();
    return report;
  }
  report.runnable = true;
  report.image_sm = image->sm;
  report.image_ptx = image->ptx != 0;
  return report;
}

Status checkAll(const DriverApi& api, CUcontext context,
                std::span<const kiln_variant* const> variants, DoctorReport* out) {
  detail::ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.push(api, context));
  for (const kiln_variant* variant : variants)
    out->variants.push_back(checkVariant(api, variant, out->device.sm, out->driver_version));
  return scope.pop();
}

Status releasePrimary(const DriverApi& api, CUdevice device) {
  KILN_CU_CHECK(api.devicePrimaryCtxRelease(device));
  return Status::Ok();
}

}  // namespace

Status deviceCount(int* count) {
  if (count == nullptr) return Status(StatusCode::kInvalidArgument, "deviceCount: count is null");
  *count = 0;
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  KILN_CU_CHECK(api->deviceGetCount(count));
  return Status::Ok();
}

Status doctor(std::span<const kiln_variant* const> variants, int ordinal, DoctorReport* out) {
  if (out == nullptr) return Status(StatusCode::kInvalidArgument, "doctor: out is null");
  *out = DoctorReport{};
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  KILN_CU_CHECK(api->driverGetVersion(&out->driver_version));
  int count = 0;
  KILN_CU_CHECK(api->deviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count)
    return Status(StatusCode::kInvalidArgument, "device ordinal " + std::to_string(ordinal) +
                                                    " is out of range; " + std::to_string(count) +
                                                    " CUDA device" + (count == 1 ? "" : "s") +
                                                    " present");
  CUdevice device = 0;
  KILN_CU_CHECK(api->deviceGet(&device, ordinal));
  const DeviceInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(detail::deviceInfo(*api, device, &info));
  out->device = *info;

  CUcontext context = nullptr;
  KILN_CU_CHECK(api->devicePrimaryCtxRetain(&context, device));
  Status checked = checkAll(*api, context, variants, out);
  Status released = releasePrimary(*api, device);
  KILN_RETURN_IF_ERROR(checked);
  return released;
}

}  // namespace kiln
