// Internal: the per-context records behind StreamTarget, and the module table behind launch,
// preload and unload (rules in kiln/loader.h).
#pragma once

#include <cuda.h>

#include <string>

#include "driver.h"
#include "kiln/runtime.h"

namespace kiln::detail {

// What a launch needs of a loaded entry.
struct LoadedFunction {
  CUfunction function = nullptr;
  int image_sm = 0;  // the SM of the image it was loaded from (decides programmatic launch)
};

// The record of `context` (a StreamTarget's `state`) and its device: found without a lock once
// known; on first sight its device is queried (the context pushed for cuCtxGetDevice) and the
// record created. A context forgotten by unloadContext is new again.
Status findContext(const DriverApi& api, CUcontext context, ContextState** state,
                   const DeviceInfo** device);

// The fast path of a launch: entry `entry` (in range) of `variant` when it is loaded in the
// target's context, not poisoned, and opted into `shared_bytes` of dynamic shared memory. No lock,
// no driver call, no allocation; false when any of that does not hold (then acquireFunction).
bool findLoaded(const StreamTarget& target, const kiln_variant& variant, int entry,
                unsigned shared_bytes, LoadedFunction* out);

// The slow path: finds or creates the module entry of `variant` in the target's context, refuses a
// poisoned variant, loads the image selectImage picks for the context's device (refusing a first
// load while the target's stream is being captured), opts into `shared_bytes` when needed, and
// returns entry `entry`. entry == -1 (out may then be null) only loads. Every driver call runs
// with the target's context pushed.
Status acquireFunction(const DriverApi& api, const StreamTarget& target,
                       const kiln_variant& variant, int entry, unsigned shared_bytes,
                       LoadedFunction* out);

// Loads `image` into the current context: a cubin through cuModuleLoadData; PTX through
// cuModuleLoadDataEx with an error-log buffer (cuModuleLoadData when the table has no Ex), so a
// JIT failure is a kDriverError "PTX JIT failed: <the driver's error>; JIT log: <the log>".
// Shared by the module table and doctor's probe, so both report a failed load alike.
Status loadImageModule(const DriverApi& api, const kiln_image& image, CUmodule* module);

// kPoisoned naming the variant when a failed unload has poisoned its name; ok otherwise.
Status checkNotPoisoned(const kiln_variant& variant);

// Records that unloading a module of the variant named `name` failed with `why`: every module
// entry of that name, in every context, now and later, is poisoned.
void poison(const std::string& name, const Status& why);

// The variant's name, and the name of its entry `entry`, for messages; never null.
const char* variantName(const kiln_variant& variant);
const char* entryName(const kiln_variant& variant, int entry);

}  // namespace kiln::detail
