// Internal access to the CUDA driver: the one loaded table, the one macro that checks every
// driver call, and a scoped context push. Every runtime source reaches the driver through here.
#pragma once

#include <cuda.h>

#include <string>

#include "kiln/driver_api.h"
#include "kiln/status.h"

namespace kiln::detail {

// The driver table: a test's fake (kiln/testing/driver.h), or the real one, dlopen-ed from
// libcuda.so.1, resolved and cuInit-ed once per process (thread-safe). A failure to load is
// remembered and returned again (kDriverUnavailable or kDriverError).
Status acquireDriver(const DriverApi** out);

// The kDriverError status of a failed driver call: the statement, the CUresult's name, number
// and text, and file:line. Use it through KILN_CU_CHECK.
Status driverError(CUresult result, const char* statement, const char* file, int line);

// `status` with `prefix` put in front of its message (ok stays ok): "rmsnorm_h4096_bf16: ...".
Status withPrefix(const Status& status, const std::string& prefix);

// Makes a context current for a scope. The destructor pops it if pop() was not called (on an
// error path, whose status is already being returned; the pop's own result is then dropped).
class ScopedContext {
 public:
  ScopedContext() = default;
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

  Status push(const DriverApi& api, CUcontext context);
  Status pop();

 private:
  const DriverApi* api_ = nullptr;
};

// Forget cached state; called by kiln::testing::resetRuntime() only.
void resetLoaderForTesting();
void resetDevicesForTesting();

}  // namespace kiln::detail

// Checks one driver call; on failure returns its kDriverError status from the enclosing
// function, naming the statement, the CUresult and file:line.
#define KILN_CU_CHECK(call)                                                           \
  do {                                                                                \
    const CUresult kiln_cu_result_ = (call);                                          \
    if (kiln_cu_result_ != CUDA_SUCCESS)                                              \
      return ::kiln::detail::driverError(kiln_cu_result_, #call, __FILE__, __LINE__); \
  } while (0)
