// The module loader's rules, and the calls that end a module's life.
//
// kiln::launch and kiln::preload (runtime.h) load a variant's image lazily, once per
// (variant, CUDA context), and keep it until one of the calls below:
//   - Concurrent first launches of one variant in one context load it exactly once.
//   - A first load while the caller's stream is being captured is refused (kCaptureRefused):
//     loading a module is not a capturable operation. Launch once, or call kiln::preload, before
//     capture begins.
//   - A failed load leaves nothing behind: the next launch tries again.
//   - A failed unload (cuModuleUnload) poisons the variant for the rest of the process: every
//     later launch, preload and doctor check of it returns kPoisoned, naming it, since the
//     driver's state for it is no longer known.
//   - The CUfunction of each entry is looked up once per loaded module; dynamic shared memory
//     above 48 KiB is opted into (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) once per
//     function and size, before the first launch that needs it.
// Unloading must not race with launches in the same context.
#pragma once

#include "kiln/status.h"

struct CUctx_st;

namespace kiln {

// Unloads every module kiln loaded, in every context. Tries all of them; on failure returns the
// first error, and the variants whose unload failed are poisoned.
Status unloadAll();

// Unloads the modules kiln loaded in `context` (a CUcontext). Call it before destroying a
// context you created, so that a later context at the same address does not inherit them.
Status unloadContext(CUctx_st* context);

// Whether a failed unload has poisoned the variant named `name`.
bool isPoisoned(const char* name);

}  // namespace kiln
