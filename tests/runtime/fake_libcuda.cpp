// A stand-in for libcuda.so.1, built as a loadable module for driver_test: it exports the entry
// points the runtime resolves, under their real versioned names, and a cuGetProcAddress_v2 that
// follows the real driver's rule (the newest ABI of a base name that the requested CUDA version
// knows: cuStreamGetCtx_v2 from 12050, cuCtxGetDevice_v2 from 13000). It records every request,
// so the test can check the version and flags the runtime asked with. Built without cuda.h so
// that its #defines cannot rename the symbols defined here; the types are ABI-equivalent.
// With KILN_FAKE_NO_PROC_ADDRESS it exports no cuGetProcAddress, as a pre-11.3 driver.
//
// Built a third time as libcuda.so.1 (build/fake_libcuda/), for the e2e tests of an artifact's
// bin/kiln-doctor, which finds it through LD_LIBRARY_PATH. The environment sets what it shows:
// KILN_FAKE_SM (e.g. 90: every device is sm_90; unset, the attributes are 0 as for driver_test),
// KILN_FAKE_DEVICES (the device count, default 1), KILN_FAKE_LOAD_ERROR (set: every module
// load fails with CUDA_ERROR_INVALID_IMAGE, as for a cubin the driver cannot load) and
// KILN_FAKE_DRIVER_VERSION (what cuDriverGetVersion reports, default 12080: CUDA 12.8).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {
constexpr int kSuccess = 0;
constexpr int kNotFoundStatus = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND

constexpr int kInvalidImage = 200;  // CUDA_ERROR_INVALID_IMAGE
// cuDeviceAttribute numbers (cuda.h is not included, see above).
constexpr int kAttributeMultiprocessors = 16;
constexpr int kAttributeMajor = 75;
constexpr int kAttributeMinor = 76;

// KILN_FAKE_SM as a number; 0 when unset.
int fakeSm() {
  const char* sm = std::getenv("KILN_FAKE_SM");
  return sm != nullptr ? std::atoi(sm) : 0;
}

int loadResult() {
  return std::getenv("KILN_FAKE_LOAD_ERROR") != nullptr ? kInvalidImage : kSuccess;
}

std::mutex g_mu;
std::string g_log;  // "name@version/flags;" per cuGetProcAddress request
int g_inits = 0;
}  // namespace

extern "C" {

int cuInit(unsigned) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_inits;
  return kSuccess;
}
int cuDriverGetVersion(int* version) {
  const char* forced = std::getenv("KILN_FAKE_DRIVER_VERSION");
  *version = forced != nullptr ? std::atoi(forced) : 12080;
  return kSuccess;
}
int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return kSuccess;
}
int cuDeviceGetCount(int* count) {
  const char* devices = std::getenv("KILN_FAKE_DEVICES");
  *count = devices != nullptr ? std::atoi(devices) : 1;
  return kSuccess;
}
int cuDeviceGetAttribute(int* value, int attribute, int) {
  const int sm = fakeSm();
  *value = 0;
  if (sm == 0) return kSuccess;
  if (attribute == kAttributeMajor) *value = sm / 10;
  if (attribute == kAttributeMinor) *value = sm % 10;
  if (attribute == kAttributeMultiprocessors) *value = 4;
  return kSuccess;
}
int cuDeviceGetName(char* name, int length, int) {
  const char* fake = fakeSm() != 0 ? "kiln fake GPU" : "";
  std::strncpy(name, fake, static_cast<std::size_t>(length));
  return kSuccess;
}
int cuCtxGetCurrent(void** context) {
  *context = nullptr;
  return kSuccess;
}
int cuCtxPushCurrent(void*) {
  return kSuccess;
}
int cuCtxPushCurrent_v2(void*) {
  return kSuccess;
}
int cuCtxPopCurrent(void**) {
  return kSuccess;
}
int cuCtxPopCurrent_v2(void**) {
  return kSuccess;
}
int cuCtxGetDevice(int*) {
  return kSuccess;
}
int cuCtxGetDevice_v2(int*, void*) {
  return kSuccess;
}
int cuStreamGetCtx(void*, void**) {
  return kSuccess;
}
int cuStreamGetCtx_v2(void*, void**, void**) {
  return kSuccess;
}
int cuStreamIsCapturing(void*, int*) {
  return kSuccess;
}
int cuDevicePrimaryCtxRetain(void**, int) {
  return kSuccess;
}
int cuDevicePrimaryCtxRelease(int) {
  return kSuccess;
}
int cuDevicePrimaryCtxRelease_v2(int) {
  return kSuccess;
}
int cuModuleLoadData(void**, const void*) {
  return loadResult();
}
int cuModuleLoadDataEx(void**, const void*, unsigned, void*, void**) {
  return loadResult();
}
int cuModuleUnload(void*) {
  return kSuccess;
}
int cuModuleGetFunction(void**, void*, const char*) {
  return kSuccess;
}
int cuFuncSetAttribute(void*, int, int) {
  return kSuccess;
}
int cuLaunchKernel(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                   void*, void**, void**) {
  return kSuccess;
}
int cuLaunchKernelEx(const void*, void*, void**, void**) {
  return kSuccess;
}
int cuTensorMapEncodeTiled(void*, int, unsigned, void*, const std::uint64_t*, const std::uint64_t*,
                           const unsigned*, const unsigned*, int, int, int, int) {
  return kSuccess;
}
int cuGetErrorName(int, const char** name) {
  *name = "CUDA_ERROR_FAKE";
  return kSuccess;
}
int cuGetErrorString(int, const char** text) {
  *text = "fake";
  return kSuccess;
}

const char* kiln_fake_log() {
  return g_log.c_str();
}
int kiln_fake_inits() {
  return g_inits;
}

}  // extern "C"

#ifndef KILN_FAKE_NO_PROC_ADDRESS
namespace {

void* lookup(const char* name, int version) {
  struct Symbol {
    const char* base;
    int since;  // the CUDA version that introduced this ABI of the base name
    void* fn;
  };
  const Symbol table[] = {
      {"cuInit", 2000, reinterpret_cast<void*>(&cuInit)},
      {"cuDriverGetVersion", 2020, reinterpret_cast<void*>(&cuDriverGetVersion)},
      {"cuDeviceGet", 2000, reinterpret_cast<void*>(&cuDeviceGet)},
      {"cuDeviceGetCount", 2000, reinterpret_cast<void*>(&cuDeviceGetCount)},
      {"cuDeviceGetAttribute", 2000, reinterpret_cast<void*>(&cuDeviceGetAttribute)},
      {"cuDeviceGetName", 2000, reinterpret_cast<void*>(&cuDeviceGetName)},
      {"cuCtxGetCurrent", 4000, reinterpret_cast<void*>(&cuCtxGetCurrent)},
      {"cuCtxPushCurrent", 2000, reinterpret_cast<void*>(&cuCtxPushCurrent)},
      {"cuCtxPushCurrent", 4000, reinterpret_cast<void*>(&cuCtxPushCurrent_v2)},
      {"cuCtxPopCurrent", 2000, reinterpret_cast<void*>(&cuCtxPopCurrent)},
      {"cuCtxPopCurrent", 4000, reinterpret_cast<void*>(&cuCtxPopCurrent_v2)},
      {"cuCtxGetDevice", 2000, reinterpret_cast<void*>(&cuCtxGetDevice)},
      {"cuCtxGetDevice", 13000, reinterpret_cast<void*>(&cuCtxGetDevice_v2)},
      {"cuStreamGetCtx", 9020, reinterpret_cast<void*>(&cuStreamGetCtx)},
      {"cuStreamGetCtx", 12050, reinterpret_cast<void*>(&cuStreamGetCtx_v2)},
      {"cuStreamIsCapturing", 10000, reinterpret_cast<void*>(&cuStreamIsCapturing)},
      {"cuDevicePrimaryCtxRetain", 7000, reinterpret_cast<void*>(&cuDevicePrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", 7000, reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease)},
      {"cuDevicePrimaryCtxRelease", 11000, reinterpret_cast<void*>(&cuDevicePrimaryCtxRelease_v2)},
      {"cuModuleLoadData", 2000, reinterpret_cast<void*>(&cuModuleLoadData)},
      {"cuModuleLoadDataEx", 2010, reinterpret_cast<void*>(&cuModuleLoadDataEx)},
      {"cuModuleUnload", 2000, reinterpret_cast<void*>(&cuModuleUnload)},
      {"cuModuleGetFunction", 2000, reinterpret_cast<void*>(&cuModuleGetFunction)},
      {"cuFuncSetAttribute", 9000, reinterpret_cast<void*>(&cuFuncSetAttribute)},
      {"cuLaunchKernel", 4000, reinterpret_cast<void*>(&cuLaunchKernel)},
      {"cuLaunchKernelEx", 11060, reinterpret_cast<void*>(&cuLaunchKernelEx)},
      {"cuTensorMapEncodeTiled", 12000, reinterpret_cast<void*>(&cuTensorMapEncodeTiled)},
      {"cuGetErrorName", 6000, reinterpret_cast<void*>(&cuGetErrorName)},
      {"cuGetErrorString", 6000, reinterpret_cast<void*>(&cuGetErrorString)},
  };
  void* best = nullptr;
  int best_since = 0;
  for (const Symbol& s : table)
    if (std::strcmp(s.base, name) == 0 && s.since <= version && s.since >= best_since) {
      best = s.fn;
      best_since = s.since;
    }
  return best;
}

}  // namespace

extern "C" int cuGetProcAddress_v2(const char* symbol, void** pfn, int version, std::uint64_t flags,
                                   int* status) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_log +=
        std::string(symbol) + "@" + std::to_string(version) + "/" + std::to_string(flags) + ";";
  }
  *pfn = lookup(symbol, version);
  if (status != nullptr) *status = *pfn != nullptr ? kSuccess : kNotFoundStatus;
  return kSuccess;
}
#endif
