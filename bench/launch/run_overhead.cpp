// bench/launch/run_overhead: the host time per call of a runner's whole run() for a loaded variant
// on a real GPU, against a bare cuLaunchKernel of the same kernel on the same stream: what a
// runtime pays per decode-size RMSNorm (rows 1, hidden 4096, bf16: launch-bound). run() is host
// admission (the selector), one resolve of the stream and the launch (kiln/runner_entry.h); the
// goal is at most 1.3x the bare launch. Prints one JSON object.
//
// A consumer of an artifact with the rmsnorm group: the bench project builds it
// (build/bench/kiln_run_overhead) when the artifact has rmsnorm_h4096_bf16. The bare launch loads
// the variant's own image (the artifact's cubin for this SM) into a module of its own and launches
// its kiln_rmsnorm entry with the parameters run() builds. launch_overhead.cpp, beside this file,
// measures the runtime's launch alone on an empty kernel.
//
//   build/bench/kiln_run_overhead [--batches 2000] [--calls 32]
// Each mode launches `calls` kernels back to back, timed together with steady_clock, then waits
// for the stream (not timed); the modes take turns batch by batch, after 10% warm-up batches.
// Exit status: 0 measured, 77 no device, 1 any other failure.
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/groups/rmsnorm.h"
#include "kiln/kiln_all.h"
#include "kiln/runners/rmsnorm.h"
#include "kiln/runtime.h"
#include "rmsnorm/launch.h"
#include "rmsnorm/params.h"

namespace {

int fail(const std::string& what, CUresult r = CUDA_SUCCESS) {
  std::printf("{\"error\": \"%s (CUresult %d)\"}\n", what.c_str(), static_cast<int>(r));
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int batches = 2000, calls = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--batches") == 0) batches = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
  }
  int devices = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&devices) != CUDA_SUCCESS || devices == 0) {
    std::printf("{\"skipped\": \"no CUDA device\"}\n");
    return 77;
  }
  CUdevice device;
  CUcontext context;
  CUstream stream;
  CUdeviceptr buffer;
  if (CUresult r = cuDeviceGet(&device, 0); r != CUDA_SUCCESS) return fail("cuDeviceGet", r);
  if (CUresult r = cuDevicePrimaryCtxRetain(&context, device); r != CUDA_SUCCESS)
    return fail("cuDevicePrimaryCtxRetain", r);
  if (CUresult r = cuCtxSetCurrent(context); r != CUDA_SUCCESS) return fail("cuCtxSetCurrent", r);
  if (CUresult r = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING); r != CUDA_SUCCESS)
    return fail("cuStreamCreate", r);
  constexpr int kHidden = 4096;
  if (CUresult r = cuMemAlloc(&buffer, 3 * kHidden * 2); r != CUDA_SUCCESS)
    return fail("cuMemAlloc", r);
  if (CUresult r = cuMemsetD8(buffer, 0x3c, 3 * kHidden * 2); r != CUDA_SUCCESS)  // 1.0-ish bf16
    return fail("cuMemsetD8", r);

  kiln::rmsnorm::Problem p;
  p.dtype = kiln::DType::kBFloat16;
  p.rows = 1;
  p.hidden = kHidden;
  p.out = reinterpret_cast<void*>(buffer);
  p.x = reinterpret_cast<const void*>(buffer + kHidden * 2);
  p.weight = reinterpret_cast<const void*>(buffer + 2 * kHidden * 2);
  const auto s = static_cast<kiln::Stream>(stream);
  // The first run() loads the module; everything timed below is a loaded variant.
  if (const kiln::Status st = kiln::rmsnorm::run(p, nullptr, 0, s); !st.ok())
    return fail("run: " + st.toString());

  // The bare side: the same image, its kiln_rmsnorm entry, the launch shape run() uses.
  int major = 0, minor = 0;
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  const kiln_variant* variant = kiln_rmsnorm_h4096_bf16_variant();
  const kiln_image* image = nullptr;
  if (const kiln::Status st = kiln::selectImage(*variant, 10 * major + minor, &image); !st.ok())
    return fail("selectImage: " + st.toString());
  CUmodule module;
  CUfunction function;
  if (CUresult r = cuModuleLoadData(&module, image->data); r != CUDA_SUCCESS)
    return fail("cuModuleLoadData", r);
  if (CUresult r = cuModuleGetFunction(&function, module, "kiln_rmsnorm"); r != CUDA_SUCCESS)
    return fail("cuModuleGetFunction", r);
  const kiln::rmsnorm::LaunchShape shape = kiln::rmsnorm::launchShape(kHidden, 2);
  kiln::rmsnorm::RmsnormParams params{p.out, p.x, nullptr, p.weight, p.rows, p.eps};
  void* args[] = {&params};
  const unsigned blocks = static_cast<unsigned>(kiln::rmsnorm::blocksForRows(p.rows, shape));
  const unsigned threads = static_cast<unsigned>(shape.threads_per_block);

  std::vector<double> bare, run;
  const int warmup = batches / 10;
  for (int b = 0; b < warmup + batches; ++b) {
    for (int mode = 0; mode < 2; ++mode) {
      const auto start = std::chrono::steady_clock::now();
      for (int c = 0; c < calls; ++c) {
        if (mode == 0) {
          if (CUresult r =
                  cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 0, stream, args, nullptr);
              r != CUDA_SUCCESS)
            return fail("cuLaunchKernel", r);
        } else if (const kiln::Status st = kiln::rmsnorm::run(p, nullptr, 0, s); !st.ok()) {
          return fail("run: " + st.toString());
        }
      }
      const auto stop = std::chrono::steady_clock::now();
      if (CUresult r = cuStreamSynchronize(stream); r != CUDA_SUCCESS)
        return fail("cuStreamSynchronize", r);
      if (b < warmup) continue;
      const double ns = std::chrono::duration<double, std::nano>(stop - start).count() / calls;
      (mode == 0 ? bare : run).push_back(ns);
    }
  }
  char name[256] = {};
  cuDeviceGetName(name, sizeof(name), device);
  const double bare_ns = median(bare), run_ns = median(run);
  std::printf(
      "{\n  \"device\": \"%s\",\n  \"sm\": %d,\n  \"problem\": \"rmsnorm rows 1 hidden 4096 "
      "bf16\",\n"
      "  \"artifact_fingerprint\": \"%s\",\n  \"calls_per_batch\": %d,\n  \"batches\": %d,\n"
      "  \"median_ns_per_call\": {\"bare_cuLaunchKernel\": %.1f, \"kiln_rmsnorm_run\": %.1f},\n"
      "  \"median_ratio_to_bare\": %.3f,\n  \"goal\": {\"max_ratio\": 1.3, \"met\": %s}\n}\n",
      name, 10 * major + minor, kiln_artifact_fingerprint(), calls, batches, bare_ns, run_ns,
      run_ns / bare_ns, run_ns / bare_ns <= 1.3 ? "true" : "false");
  return 0;
}
