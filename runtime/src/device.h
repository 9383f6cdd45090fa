// Internal: from a context to its device, and the per-device cache (name, SM, multiprocessors)
// that resolveStream (through the per-context records of loader.h) and doctor share.
#pragma once

#include <cuda.h>

#include "driver.h"
#include "kiln/runtime.h"

namespace kiln::detail {

// The device of `context` (pushed for cuCtxGetDevice, then popped).
Status deviceOfContext(const DriverApi& api, CUcontext context, CUdevice* out);

// The cached description of `device`, queried on first use. The pointer stays valid for the
// life of the process (until resetRuntimeState, for kiln's own tests).
Status deviceInfo(const DriverApi& api, CUdevice device, const DeviceInfo** out);

// "sm_90", or "sm_90a" for an arch-specific image.
std::string smName(int sm, bool arch_specific = false);

// How messages name an image: "sm_90", "sm_90a", or "compute_80 PTX".
std::string imageName(const kiln_image& image);

}  // namespace kiln::detail
