// Internal access to the CUDA driver: the one loaded table, the one macro that checks every
// driver call, and a scoped context push. Every runtime source reaches the driver through here.
#pragma once

#include <cuda.h>

#include <string>

#include "kiln/driver_api.h"
#include "kiln/status.h"

namespace kiln::detail {

// The driver table: the real one, dlopen-ed from libcuda.so.1, resolved and cuInit-ed once per
// process (thread-safe), or the table kiln's own tests installed (overrideDriver). A failure to
// load is remembered and returned again (kDriverUnavailable or kDriverError).
Status acquireDriver(const DriverApi** out);

// The kDriverError status of a failed driver call: the statement, the CUresult's name, number
// and text, and file:line. Use it through KILN_CU_CHECK.
Status driverError(CUresult result, const char* statement, const char* file, int line);

// `status` with `prefix` put in front of its message (ok stays ok): "rmsnorm_h4096_bf16: ...".
Status withPrefix(const Status& status, const std::string& prefix);

// Makes a context current for a scope, and the caller's current again after it (the driver's
// context stack: push, then pop). The destructor pops if pop() was not called (on an error path,
// whose status is already being returned; the pop's own result is then dropped).
class ScopedContext {
 public:
  ScopedContext() = default;
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

  Status push(const DriverApi& api, CUcontext context);
  // push, unless `current` (the thread's current context, as the caller knows it) already is
  // `context`: then nothing to do, and pop() does nothing either.
  Status enter(const DriverApi& api, CUcontext context, CUcontext current);
  Status pop();

 private:
  const DriverApi* api_ = nullptr;
};

// ---- The seam for kiln's own tests ------------------------------------------------------------
// The hooks of kiln/testing/driver.h (runtime/testing/, compiled into kiln's own kiln_runtime
// target, never into an artifact) reach the runtime through these, and nothing else calls them.
// None may race with any other kiln call.

// The table acquireDriver returns from now on: `table` (copied), or with null the real driver
// again. Then resetRuntimeState().
void overrideDriver(const DriverApi* table);
// The library the real driver is dlopen-ed from ("" restores libcuda.so.1). Then
// resetRuntimeState().
void setDriverLibraryPath(const std::string& library);
// Forgets the loaded table (and a remembered load failure), every context and module record
// (without unloading), every poison and every cached device.
void resetRuntimeState();

// The parts of resetRuntimeState kept by each source file.
void resetLoaderState();
void resetDeviceState();

}  // namespace kiln::detail

// Checks one driver call; on failure returns its kDriverError status from the enclosing
// function, naming the statement, the CUresult and file:line.
#define KILN_CU_CHECK(call)                                                           \
  do {                                                                                \
    const CUresult kiln_cu_result_ = (call);                                          \
    if (kiln_cu_result_ != CUDA_SUCCESS)                                              \
      return ::kiln::detail::driverError(kiln_cu_result_, #call, __FILE__, __LINE__); \
  } while (0)
