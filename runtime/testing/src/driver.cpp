// kiln/testing/driver.h: the test hooks, over the runtime's internal seam (runtime/src/driver.h).
// Compiled into kiln's own kiln_runtime target only; an artifact's library has the seam but no
// hooks, and its headers do not declare either.
#include "kiln/testing/driver.h"

#include "driver.h"

namespace kiln::testing {

void resetRuntime() {
  detail::resetRuntimeState();
}

void setDriverLibrary(const std::string& library) {
  detail::setDriverLibraryPath(library);
}

Status activeDriver(const DriverApi** out) {
  return detail::acquireDriver(out);
}

ScopedDriver::ScopedDriver(const DriverApi& api) {
  detail::overrideDriver(&api);
}

ScopedDriver::~ScopedDriver() {
  detail::overrideDriver(nullptr);
}

}  // namespace kiln::testing
