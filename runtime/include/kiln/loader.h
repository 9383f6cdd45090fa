// The module loader's rules, and the calls that end a module's life.
//
// kiln::launch and kiln::preload (runtime.h) load a variant's image lazily, once per
// (variant, CUDA context), and keep it until one of the calls below:
//   - The image is the one selectImage picks for the context's device, chosen at the load.
//   - Concurrent first launches of one variant in one context load it exactly once; launches of
//     other variants, or in other contexts, do not wait for that load.
//   - A launch of a variant already loaded in the context takes no lock and makes no driver call
//     but the launch itself: the runtime keeps, per context, a table from the variant to its
//     loaded functions that is read without a lock (a lock is taken only to add to it).
//   - Every driver call of a load, a lookup, an opt-in or an unload runs with the module's
//     context current on the calling thread, which gets its own current context (or none) back.
//   - A first load while the caller's stream is being captured is refused (kCaptureRefused):
//     loading a module is not a capturable operation. Launch once, or call kiln::preload, before
//     capture begins.
//   - A failed load leaves nothing behind: the next launch tries again.
//   - A failed unload (cuModuleUnload, here or in kiln::doctor's probe) poisons the variant for the
//     rest of the process: a flag on its module entries, in every context and under its name, so
//     every later launch, preload and doctor check of a variant of that name returns kPoisoned,
//     naming it, since the driver's state for it is no longer known.
//   - The CUfunction of each entry is looked up once per loaded module; dynamic shared memory
//     above 48 KiB is opted into (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) once per
//     function and size, before the first launch that needs it.
// Unloading must not race with launches, preloads or resolves in the same context (unloadAll: in
// any context).
#pragma once

#include "kiln/status.h"

struct CUctx_st;

namespace kiln {

// Unloads every module kiln loaded, in every context. Tries all of them; on failure returns the
// first error, and the variants whose unload failed are poisoned. Contexts stay known (their
// devices cached); the next launch in one loads again.
Status unloadAll();

// Unloads the modules kiln loaded in `context` (a CUcontext) and forgets the context (its device,
// its StreamTargets). Call it before destroying a context you created (or resetting a device's
// primary context: cudaDeviceReset, cuDevicePrimaryCtxReset), so that a later context at the same
// address inherits nothing from it.
Status unloadContext(CUctx_st* context);

// Whether a failed unload has poisoned the variant named `name` (a scan of the variants kiln has
// seen; not for a hot path).
bool isPoisoned(const char* name);

}  // namespace kiln
