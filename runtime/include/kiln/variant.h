// The C ABI between a generated variant shim and the kiln runtime.
//
// `kiln build` generates, per variant and SM, a host shim that embeds the image (a cubin, or PTX
// for a `compute_NN` target) and exports
// `kiln_<variant>__arch<NN>_image()`; per variant it generates `kiln_<variant>_variant()`, which
// returns a kiln_variant listing every SM image the artifact carries. The runtime picks the
// image for the device that owns the caller's stream and loads it lazily (see loader.h).
// Plain C so that any host compiler (and any generated code) can produce these tables.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One image compiled for one SM. `sm` is the numeric SM (90 for sm_90 / sm_90a, 80 for
// compute_80); `arch_specific` is 1 for the `a` targets (sm_90a), whose code runs on that exact
// SM only. `ptx` is 0 for a cubin (SASS) and 1 for PTX text for the virtual architecture
// compute_<sm>, which the driver JIT-compiles at module load for any device of that SM or newer;
// PTX data is NUL-terminated (data[size] == 0: cuModuleLoadData reads it as a C string) and
// `size` and `sha256` cover the text without that NUL, as metadata.json records them.
typedef struct kiln_image {
  int sm;
  int arch_specific;
  const unsigned char* data;
  size_t size;
  const char* sha256;  // hex digest of data[0, size), as recorded in metadata.json
  int ptx;
} kiln_image;

// One variant: its name (the grammar of docs/naming.md), its group, its entry kernels (the
// __global__ functions of the image, extern "C" names), its images, one per SM, and the CUDA
// version of the toolkit that built them, spelled as cuDriverGetVersion spells a driver's (12060
// for 12.6, 13000 for 13.0; kiln build writes metadata.json's cuda_version here). Before the first
// load the runtime refuses the variant on a driver of an older CUDA major, or an older version for
// a PTX image (docs/runtime.md, "Driver version"); 0 means unknown and is not checked.
typedef struct kiln_variant {
  const char* name;
  const char* group;
  const char* const* entries;
  int num_entries;
  const kiln_image* images;
  int num_images;
  int cuda_version;
} kiln_variant;

#ifdef __cplusplus
}  // extern "C"
#endif
