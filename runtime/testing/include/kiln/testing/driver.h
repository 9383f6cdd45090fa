// Test hooks for the runtime's driver access: install a fake DriverApi, point the loader at
// another library than libcuda.so.1, and forget every cache between tests.
//
// These exist so that the loader logic (lazy load, capture guard, retry, poison, SM dispatch,
// the context rule) is tested on machines without a GPU. They belong to kiln's own build only:
// runtime/testing/ is compiled into the kiln_runtime CMake target, and `kiln build` neither
// copies this header into an artifact nor compiles the hooks into its library. None of them may
// race with a launch, a preload, a resolve or a doctor call in another thread.
#pragma once

#include <string>

#include "kiln/driver_api.h"
#include "kiln/status.h"

namespace kiln::testing {

// Forgets the driver table (and a cached load failure), every loaded module and known context
// (without unloading anything), the per-device cache and every poisoned variant. The process's
// libcuda stays open.
void resetRuntime();

// The library the real driver table is loaded from; "" restores "libcuda.so.1". Resets the
// runtime (above) so the next call loads from `library`.
void setDriverLibrary(const std::string& library);

// The table the runtime uses now, loading (and cuInit-ing) it on first use; for tests of the
// symbol resolution.
Status activeDriver(const DriverApi** out);

// Installs `api` (copied) for its lifetime, in place of the real driver, and resets the runtime
// on entry and on exit. Not nestable.
class ScopedDriver {
 public:
  explicit ScopedDriver(const DriverApi& api);
  ~ScopedDriver();
  ScopedDriver(const ScopedDriver&) = delete;
  ScopedDriver& operator=(const ScopedDriver&) = delete;
};

}  // namespace kiln::testing
