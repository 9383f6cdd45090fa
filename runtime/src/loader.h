// Internal: the module table behind launch, preload and unload (rules in kiln/loader.h).
#pragma once

#include <cuda.h>

#include "driver.h"
#include "kiln/runtime.h"

namespace kiln::detail {

// Makes sure `image` of `variant` is loaded in `context` (refusing a first load while `stream`
// is being captured), and returns the CUfunction of entry `entry` with dynamic shared memory
// opted into up to `shared_bytes`. entry == -1 (and function == nullptr) only loads.
Status acquireFunction(const DriverApi& api, const kiln_variant& variant, const kiln_image& image,
                       CUcontext context, Stream stream, int entry, unsigned shared_bytes,
                       CUfunction* function);

// Loads `image` into the current context: a cubin through cuModuleLoadData; PTX through
// cuModuleLoadDataEx with an error-log buffer (cuModuleLoadData when the table has no Ex), so a
// JIT failure is a kDriverError "PTX JIT failed: <the driver's error>; JIT log: <the log>".
// Shared by the module table and doctor's probe, so both report a failed load alike.
Status loadImageModule(const DriverApi& api, const kiln_image& image, CUmodule* module);

// kPoisoned naming the variant when a failed unload has poisoned it; ok otherwise.
Status checkNotPoisoned(const kiln_variant& variant);

// Records that unloading a module of `name` failed with `why`.
void poison(const std::string& name, const Status& why);

// The variant's name, and the name of its entry `entry`, for messages; never null.
const char* variantName(const kiln_variant& variant);
const char* entryName(const kiln_variant& variant, int entry);

}  // namespace kiln::detail
