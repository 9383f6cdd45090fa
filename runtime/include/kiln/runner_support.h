// What every group's runner shares: the pointer check, entry lookup and device check whose
// messages must read the same in every group ("rmsnorm: pointer x (0x7f..01) is not 16-byte
// aligned"). Runners are compiled into artifacts with the runtime, so this lives in the runtime.
#pragma once

#include <cstddef>

#include "kiln/status.h"
#include "kiln/variant.h"

namespace kiln::runner {

// kInvalidArgument "<group>: <name> is null" or "<group>: pointer <name> (0x...) is not
// <alignment>-byte aligned"; Ok otherwise. A caller with an optional pointer skips null itself.
Status checkPointer(const char* group, const char* name, const void* p, std::size_t alignment);

// The index of entry kernel `entry` in `variant.entries`, or -1.
int findEntry(const kiln_variant& variant, const char* entry);

// Whether `variant` has an image for a device of SM `device_sm` (selectImage's verdict and
// message); the device check behind every runner's canImplement(problem, device_sm).
Status checkImage(const kiln_variant& variant, int device_sm);

}  // namespace kiln::runner
