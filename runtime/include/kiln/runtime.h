// The kiln runtime's public surface: launch a variant's entry kernel on the caller's stream,
// find out which device a stream belongs to, and ask which variants this device can run.
//
// Modules load lazily, once per (variant, CUDA context), thread-safely; see loader.h for the
// rules (capture guard, retry after a failed load, poison after a failed cleanup). The driver is
// reached through dlopen("libcuda.so.1"): nothing here links against a CUDA library.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kiln/status.h"
#include "kiln/variant.h"

struct CUstream_st;

namespace kiln {

// The caller's stream; the same type as cudaStream_t and CUstream. nullptr is the legacy
// default stream of the calling thread's current context.
using Stream = CUstream_st*;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned shared_bytes = 0;  // dynamic shared memory
};

struct DeviceInfo {
  int ordinal = -1;  // the CUdevice (the driver's device ordinal)
  std::string name;
  int sm = 0;  // 10 * major + minor: 90 for an H200, 87 for Jetson Orin
  int multiprocessors = 0;
  int max_shared_bytes_per_block_optin = 0;  // static + dynamic shared memory a block may opt into
};

// The device that owns `stream` (its context's device), cached per device.
Status deviceForStream(Stream stream, DeviceInfo* out);

// The image of `variant` that runs on a device of SM `device_sm`: an exact match first, then
// (for images that are not arch-specific) the newest image of the same major and a lower minor.
// On a miss: kNoKernelImage, "rmsnorm_h4096_bf16: artifact has sm_80 only; device is sm_90".
Status selectImage(const kiln_variant& variant, int device_sm, const kiln_image** out);

// Launches entry `entry` (an index into variant.entries) on `stream` with `args` (the kernel's
// parameter pointers, as cuLaunchKernel takes them). Loads the module on first use. Dynamic
// shared memory above 48 KiB is opted into for the kernel; above the device's per-block limit it
// is refused (kInvalidArgument, naming both).
Status launch(const kiln_variant& variant, int entry, const LaunchConfig& config, Stream stream,
              void** args);

// Loads the module of `variant` for the current context now (e.g. before stream capture).
Status preload(const kiln_variant& variant, Stream stream);

struct VariantReport {
  std::string name;
  std::string group;
  bool runnable = false;
  int image_sm = 0;    // the SM of the image that would run, when runnable
  std::string reason;  // why not, when not runnable
};

struct DoctorReport {
  DeviceInfo device;
  int driver_version = 0;  // as cuDriverGetVersion reports it: 13000 for CUDA 13.0
  std::vector<VariantReport> variants;
};

// Which of `variants` the device `ordinal` can run, and why not for the others. Selects an image
// and loads it (then unloads it) in the device's primary context, so "no kernel image" and a
// corrupt cubin are both found before any launch.
Status doctor(std::span<const kiln_variant* const> variants, int ordinal, DoctorReport* out);

}  // namespace kiln
