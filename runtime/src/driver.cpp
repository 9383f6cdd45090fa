// Reaching the CUDA driver without linking it: dlopen("libcuda.so.1") once, resolve each entry
// point through cuGetProcAddress at a fixed ABI version, cuInit, and keep the table for the
// process. Also the seam that kiln's own tests install a fake table through (driver.h); the hooks
// themselves (kiln/testing/driver.h) live in runtime/testing/, which no artifact ships.
//
// Why a fixed ABI version (12000) and not CUDA_VERSION: cuGetProcAddress returns the newest
// variant of a base name that the requested version knows, and some of ours changed signature
// later (cuStreamGetCtx_v2 in 12.5 takes a green context; cuCtxGetDevice_v2 in 13.0 takes the
// context). DriverApi spells the 12.0 signatures, so 12000 is the version that matches them.
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "driver.h"

namespace kiln::detail {
namespace {

constexpr int kDriverAbiVersion = 12000;
constexpr const char kDefaultLibrary[] = "libcuda.so.1";

using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

struct DriverState {
  std::mutex mu;
  // The table launches use; set once it is loaded and initialised (the lock-free fast path).
  std::atomic<const DriverApi*> ready{nullptr};
  // The table as soon as it is loaded, before cuInit: driverError names CUresults through it.
  std::atomic<const DriverApi*> named{nullptr};
  bool has_override = false;  // a table installed by kiln's own tests (overrideDriver)
  DriverApi override_api;
  DriverApi real_api;
  std::string library = kDefaultLibrary;
  bool attempted = false;
  Status status;  // of the attempt to load and initialise, once attempted
};

// Never destroyed, so that a static object of the application may still use kiln at exit.
DriverState& state() {
  static DriverState* s = new DriverState;
  return *s;
}

struct Resolver {
  void* handle = nullptr;
  GetProcAddressV2 get_v2 = nullptr;
  GetProcAddressV1 get_v1 = nullptr;

  // `base` through cuGetProcAddress, else `exported` (the versioned symbol that cuda.h maps the
  // base name to, such as cuCtxPushCurrent_v2) through dlsym.
  void* find(const char* base, const char* exported) const {
    void* fn = nullptr;
    if (get_v2 != nullptr) {
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      if (get_v2(base, &fn, kDriverAbiVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) ==
              CUDA_SUCCESS &&
          found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr)
        return fn;
    } else if (get_v1 != nullptr) {
      if (get_v1(base, &fn, kDriverAbiVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM) == CUDA_SUCCESS &&
          fn != nullptr)
        return fn;
    }
    return dlsym(handle, exported);
  }
};

template <typename Fn>
Status resolve(const Resolver& resolver, const std::string& library, const char* base,
               const char* exported, Fn* slot) {
  void* fn = resolver.find(base, exported);
  if (fn == nullptr)
    return Status(StatusCode::kDriverUnavailable,
                  library + " has no " + base + " (asked cuGetProcAddress at CUDA version " +
                      std::to_string(kDriverAbiVersion) + ", then dlsym for " + exported +
                      "); the NVIDIA driver is too old for kiln");
  *slot = reinterpret_cast<Fn>(fn);
  return Status::Ok();
}

Status loadDriver(const std::string& library, DriverApi* api) {
  dlerror();
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::kDriverUnavailable,
                  "cannot load " + library + ": " +
                      (why != nullptr ? why : "unknown dlopen error") +
                      "; is the NVIDIA driver installed?");
  }
  Resolver r;
  r.handle = handle;
  r.get_v2 = reinterpret_cast<GetProcAddressV2>(dlsym(handle, "cuGetProcAddress_v2"));
  if (r.get_v2 == nullptr)
    r.get_v1 = reinterpret_cast<GetProcAddressV1>(dlsym(handle, "cuGetProcAddress"));

  DriverApi t;
  Status s = [&]() -> Status {
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuInit", "cuInit", &t.init));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuDriverGetVersion", "cuDriverGetVersion", &t.driverGetVersion));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuDeviceGet", "cuDeviceGet", &t.deviceGet));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuDeviceGetCount", "cuDeviceGetCount", &t.deviceGetCount));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuDeviceGetAttribute", "cuDeviceGetAttribute", &t.deviceGetAttribute));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuDeviceGetName", "cuDeviceGetName", &t.deviceGetName));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuCtxGetCurrent", "cuCtxGetCurrent", &t.ctxGetCurrent));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuCtxPushCurrent", "cuCtxPushCurrent_v2", &t.ctxPushCurrent));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuCtxPopCurrent", "cuCtxPopCurrent_v2", &t.ctxPopCurrent));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuCtxGetDevice", "cuCtxGetDevice", &t.ctxGetDevice));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuStreamGetCtx", "cuStreamGetCtx", &t.streamGetCtx));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuStreamIsCapturing", "cuStreamIsCapturing", &t.streamIsCapturing));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain",
                                 &t.devicePrimaryCtxRetain));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuDevicePrimaryCtxRelease",
                                 "cuDevicePrimaryCtxRelease_v2", &t.devicePrimaryCtxRelease));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuModuleLoadData", "cuModuleLoadData", &t.moduleLoadData));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuModuleLoadDataEx", "cuModuleLoadDataEx", &t.moduleLoadDataEx));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuModuleUnload", "cuModuleUnload", &t.moduleUnload));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuModuleGetFunction", "cuModuleGetFunction", &t.moduleGetFunction));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuFuncSetAttribute", "cuFuncSetAttribute", &t.funcSetAttribute));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuLaunchKernel", "cuLaunchKernel", &t.launchKernel));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuLaunchKernelEx", "cuLaunchKernelEx", &t.launchKernelEx));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuTensorMapEncodeTiled", "cuTensorMapEncodeTiled",
                                 &t.tensorMapEncodeTiled));
    KILN_RETURN_IF_ERROR(resolve(r, library, "cuGetErrorName", "cuGetErrorName", &t.getErrorName));
    KILN_RETURN_IF_ERROR(
        resolve(r, library, "cuGetErrorString", "cuGetErrorString", &t.getErrorString));
    return Status::Ok();
  }();
  if (!s.ok()) {
    dlclose(handle);
    return s;
  }
  *api = t;  // the handle stays open for the life of the process
  return Status::Ok();
}

Status initDriver(const DriverApi& api) {
  KILN_CU_CHECK(api.init(0));
  return Status::Ok();
}

// Forgets the table; the loader and device caches are reset by the caller, outside the lock.
void forgetDriver(DriverState& s) {
  s.ready.store(nullptr, std::memory_order_release);
  s.named.store(nullptr, std::memory_order_release);
  s.attempted = false;
  s.status = Status::Ok();
}

}  // namespace

Status acquireDriver(const DriverApi** out) {
  DriverState& s = state();
  if (const DriverApi* api = s.ready.load(std::memory_order_acquire)) {
    *out = api;
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.attempted) {
    s.attempted = true;
    const DriverApi* api = s.has_override ? &s.override_api : &s.real_api;
    s.status = s.has_override ? Status::Ok() : loadDriver(s.library, &s.real_api);
    if (s.status.ok()) {
      s.named.store(api, std::memory_order_release);
      s.status = initDriver(*api);
    }
    if (s.status.ok()) s.ready.store(api, std::memory_order_release);
  }
  if (!s.status.ok()) return s.status;
  *out = s.ready.load(std::memory_order_acquire);
  return Status::Ok();
}

Status driverError(CUresult result, const char* statement, const char* file, int line) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const DriverApi* api = state().named.load(std::memory_order_acquire)) {
    if (api->getErrorName == nullptr || api->getErrorName(result, &name) != CUDA_SUCCESS)
      name = nullptr;
    if (api->getErrorString == nullptr || api->getErrorString(result, &text) != CUDA_SUCCESS)
      text = nullptr;
  }
  const char* base = std::strrchr(file, '/');
  std::string message = statement;
  message += " failed: ";
  message += name != nullptr ? name : "unrecognized CUresult";
  message += " (" + std::to_string(static_cast<int>(result)) + ")";
  if (text != nullptr) {
    message += ", \"";
    message += text;
    message += "\"";
  }
  message += ", at ";
  message += base != nullptr ? base + 1 : file;
  message += ":" + std::to_string(line);
  return Status(StatusCode::kDriverError, std::move(message));
}

Status withPrefix(const Status& status, const std::string& prefix) {
  if (status.ok()) return status;
  return Status(status.code(), prefix + status.message());
}

ScopedContext::~ScopedContext() {
  if (api_ != nullptr) {
    CUcontext popped = nullptr;
    (void)api_->ctxPopCurrent(&popped);
  }
}

Status ScopedContext::push(const DriverApi& api, CUcontext context) {
  if (api_ != nullptr)
    return Status(StatusCode::kInternal, "ScopedContext::push called twice without pop");
  KILN_CU_CHECK(api.ctxPushCurrent(context));
  api_ = &api;
  return Status::Ok();
}

Status ScopedContext::enter(const DriverApi& api, CUcontext context, CUcontext current) {
  if (context == current) return Status::Ok();
  return push(api, context);
}

Status ScopedContext::pop() {
  if (api_ == nullptr) return Status::Ok();
  const DriverApi& api = *api_;
  api_ = nullptr;
  CUcontext popped = nullptr;
  KILN_CU_CHECK(api.ctxPopCurrent(&popped));
  return Status::Ok();
}

void overrideDriver(const DriverApi* table) {
  {
    DriverState& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.has_override = table != nullptr;
    s.override_api = table != nullptr ? *table : DriverApi{};
  }
  resetRuntimeState();
}

void setDriverLibraryPath(const std::string& library) {
  {
    DriverState& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.library = library.empty() ? std::string(kDefaultLibrary) : library;
  }
  resetRuntimeState();
}

void resetRuntimeState() {
  {
    DriverState& s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    forgetDriver(s);
  }
  resetLoaderState();
  resetDeviceState();
}

}  // namespace kiln::detail
