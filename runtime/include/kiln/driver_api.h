// DriverApi: the table of CUDA driver entry points the kiln runtime calls, and nothing else.
//
// The runtime never links libcuda: it fills this table once from dlopen("libcuda.so.1") (see
// runtime/src/driver.cpp), asking cuGetProcAddress for each entry point at the CUDA 12.0 ABI so
// that every pointer matches the signature written here. kiln's own tests install a fake table
// (runtime/testing/, not part of an artifact). Members drop the `cu` prefix on purpose: cuda.h
// #defines several of those names to versioned symbols (cuCtxPushCurrent ->
// cuCtxPushCurrent_v2), which must not leak into member names.
#pragma once

#include <cuda.h>

namespace kiln {

struct DriverApi {
  CUresult (*init)(unsigned int flags) = nullptr;
  CUresult (*driverGetVersion)(int* version) = nullptr;
  CUresult (*deviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*deviceGetCount)(int* count) = nullptr;
  CUresult (*deviceGetAttribute)(int* value, CUdevice_attribute attribute,
                                 CUdevice device) = nullptr;
  CUresult (*deviceGetName)(char* name, int length, CUdevice device) = nullptr;
  CUresult (*ctxGetCurrent)(CUcontext* context) = nullptr;
  CUresult (*ctxPushCurrent)(CUcontext context) = nullptr;  // cuCtxPushCurrent_v2
  CUresult (*ctxPopCurrent)(CUcontext* context) = nullptr;  // cuCtxPopCurrent_v2
  CUresult (*ctxGetDevice)(CUdevice* device) = nullptr;     // the 12.0 ABI: current context
  CUresult (*streamGetCtx)(CUstream stream, CUcontext* context) = nullptr;  // not _v2 (12.5)
  CUresult (*streamIsCapturing)(CUstream stream, CUstreamCaptureStatus* status) = nullptr;
  CUresult (*devicePrimaryCtxRetain)(CUcontext* context, CUdevice device) = nullptr;
  CUresult (*devicePrimaryCtxRelease)(CUdevice device) = nullptr;  // _v2
  CUresult (*moduleLoadData)(CUmodule* module, const void* image) = nullptr;
  // For PTX images: the same load with JIT options, so a JIT failure comes with the JIT's error
  // log. Optional in a test's table: when null, PTX loads through moduleLoadData, without a log.
  CUresult (*moduleLoadDataEx)(CUmodule* module, const void* image, unsigned int num_options,
                               CUjit_option* options, void** option_values) = nullptr;
  CUresult (*moduleUnload)(CUmodule module) = nullptr;
  CUresult (*moduleGetFunction)(CUfunction* function, CUmodule module, const char* name) = nullptr;
  CUresult (*funcSetAttribute)(CUfunction function, CUfunction_attribute attribute,
                               int value) = nullptr;
  CUresult (*launchKernel)(CUfunction function, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                           unsigned block_x, unsigned block_y, unsigned block_z,
                           unsigned shared_bytes, CUstream stream, void** params,
                           void** extra) = nullptr;
  // For LaunchConfig::programmatic_dependency (CUDA 11.8+ drivers). Optional in a test's table:
  // when null, every launch goes through launchKernel.
  CUresult (*launchKernelEx)(const CUlaunchConfig* config, CUfunction function, void** params,
                             void** extra) = nullptr;
  // cuTensorMapEncodeTiled (since 12.0): needs a current context (CUDA_ERROR_INVALID_CONTEXT
  // without one); kiln::encodeTensorMap(target, ...) makes the stream's current for it.
  CUresult (*tensorMapEncodeTiled)(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                   void* address, const cuuint64_t* dims, const cuuint64_t* strides,
                                   const cuuint32_t* box, const cuuint32_t* element_strides,
                                   CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                   CUtensorMapL2promotion l2_promotion,
                                   CUtensorMapFloatOOBfill oob_fill) = nullptr;
  CUresult (*getErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*getErrorString)(CUresult error, const char** text) = nullptr;
};

}  // namespace kiln
