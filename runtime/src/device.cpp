// What a device is. Device descriptions are cached per device ordinal, so that two GPUs of
// different SMs in one process each get their own images; which device a context belongs to is
// cached per context by the loader's context records (loader.h).
#include "device.h"

#include <map>
#include <memory>
#include <mutex>

namespace kiln::detail {
namespace {

struct DeviceCache {
  std::mutex mu;
  std::map<CUdevice, std::unique_ptr<DeviceInfo>> devices;
};

DeviceCache& cache() {
  static DeviceCache* c = new DeviceCache;  // never destroyed: usable from static destructors
  return *c;
}

Status queryDevice(const DriverApi& api, CUdevice device, DeviceInfo* info) {
  int major = 0;
  int minor = 0;
  KILN_CU_CHECK(
      api.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  KILN_CU_CHECK(
      api.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  KILN_CU_CHECK(api.deviceGetAttribute(&info->multiprocessors,
                                       CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  KILN_CU_CHECK(api.deviceGetAttribute(&info->max_shared_bytes_per_block_optin,
                                       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                       device));
  char name[256] = {};
  KILN_CU_CHECK(api.deviceGetName(name, static_cast<int>(sizeof(name)) - 1, device));
  info->ordinal = static_cast<int>(device);
  info->name = name;
  info->sm = 10 * major + minor;
  return Status::Ok();
}

}  // namespace

std::string smName(int sm, bool arch_specific) {
  return "sm_" + std::to_string(sm) + (arch_specific ? "a" : "");
}

std::string imageName(const kiln_image& image) {
  if (image.ptx != 0) return "compute_" + std::to_string(image.sm) + " PTX";
  return smName(image.sm, image.arch_specific != 0);
}

Status deviceOfContext(const DriverApi& api, CUcontext context, CUdevice* out) {
  ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.push(api, context));
  CUdevice device = 0;
  KILN_CU_CHECK(api.ctxGetDevice(&device));
  KILN_RETURN_IF_ERROR(scope.pop());
  *out = device;
  return Status::Ok();
}

Status deviceInfo(const DriverApi& api, CUdevice device, const DeviceInfo** out) {
  DeviceCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.devices.find(device);
  if (it == c.devices.end()) {
    auto info = std::make_unique<DeviceInfo>();
    KILN_RETURN_IF_ERROR(queryDevice(api, device, info.get()));
    it = c.devices.emplace(device, std::move(info)).first;
  }
  *out = it->second.get();
  return Status::Ok();
}

void resetDeviceState() {
  DeviceCache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.devices.clear();
}

}  // namespace kiln::detail

namespace kiln {

Status deviceForStream(Stream stream, DeviceInfo* out) {
  if (out == nullptr) return Status(StatusCode::kInvalidArgument, "deviceForStream: out is null");
  StreamTarget target;
  KILN_RETURN_IF_ERROR(resolveStream(stream, &target));
  *out = *target.device;
  return Status::Ok();
}

}  // namespace kiln
