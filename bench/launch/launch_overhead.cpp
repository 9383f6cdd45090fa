// bench/launch: the host time per call of a kiln launch of a loaded variant on a real GPU, against
// a bare cuLaunchKernel of the same CUfunction on the same stream (issue 24 part 3: "one resolve
// per launch"; the goal is resolve + launch <= 1.3x the bare launch). Prints one JSON object.
//
// Self-contained: the kernel is an empty one (one pointer parameter) embedded as PTX (compute_50
// and compute_90, JIT-compiled by the driver at the first load), so no nvcc is needed; the program
// needs the CUDA headers (cuda.h) to build and only libcuda.so.1 to run, which it and the runtime
// both dlopen (the bare calls resolve through the same cuGetProcAddress as the runtime's).
//
// Build, from the kiln checkout's root (any C++20 compiler; the runtime's sources as `kiln build`
// compiles them into an artifact, without kiln's test hooks):
//   g++ -std=c++20 -O2 -DNDEBUG -Iruntime/include -Iruntime/src -I/usr/local/cuda/include
//       bench/launch/launch_overhead.cpp runtime/src/*.cpp -ldl -pthread -o launch_overhead
// (one command line; wrapped here).
// (kiln's own CMake builds the same program as build/release/tests/runtime/kiln_launch_overhead.)
// Run:
//   ./launch_overhead [--device 0] [--batches 3000] [--calls 32] [--pdl]
// Each mode launches `calls` kernels back to back, timed together with steady_clock, then waits
// for the stream (not timed), so the launch queue never fills; the modes take turns batch by
// batch (so clock and boost drift hit all alike), after 10% of the batches as warm-up. Reported:
// the median (and 10th / 90th percentile) over batches of the time per call, and each kiln mode's
// median divided by the bare one's. --pdl launches all modes with programmatic stream
// serialization (cuLaunchKernelEx), as decodeattn's merge kernel is launched.
//   bare_cuLaunchKernel          the driver call alone (cuLaunchKernelEx with --pdl)
//   kiln_launch_target           kiln::launch(target, ...) with a target resolved once
//   kiln_resolve_and_launch      kiln::resolveStream + kiln::launch(target, ...): one runner run()
//   kiln_one_call_launch         kiln::launch(variant, entry, config, stream, args)
//   kiln_resolve_and_launch_no_current_context   the same from a thread with no current context
//                                (kiln pushes the stream's context around the launch)
// Exit status: 0 measured, 77 no driver or no device (skipped), 1 any other failure.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/loader.h"
#include "kiln/runtime.h"
#include "loader.h"  // runtime/src: detail::findLoaded gives the very CUfunction kiln launches

namespace {

// An empty kernel with one pointer parameter, as PTX for any GPU (compute_50) and for Hopper and
// later (compute_90; what selectImage picks there, so --pdl really is a programmatic launch).
const char kPtx50[] =
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry kiln_bench_empty(.param .u64 kiln_bench_empty_param_0)\n{\n\tret;\n}\n";
const char kPtx90[] =
    ".version 7.8\n.target sm_90\n.address_size 64\n"
    ".visible .entry kiln_bench_empty(.param .u64 kiln_bench_empty_param_0)\n{\n\tret;\n}\n";
const char* const kEntries[] = {"kiln_bench_empty"};
const kiln_image kImages[] = {
    {50, 0, reinterpret_cast<const unsigned char*>(kPtx50), sizeof(kPtx50) - 1, "", 1},
    {90, 0, reinterpret_cast<const unsigned char*>(kPtx90), sizeof(kPtx90) - 1, "", 1},
};
const kiln_variant kVariant = {"kiln_bench_empty", "bench", kEntries, 1, kImages, 2, 0};

struct Driver {
  CUresult (*init)(unsigned);
  CUresult (*driverGetVersion)(int*);
  CUresult (*deviceGetCount)(int*);
  CUresult (*deviceGet)(CUdevice*, int);
  CUresult (*primaryRetain)(CUcontext*, CUdevice);
  CUresult (*primaryRelease)(CUdevice);
  CUresult (*ctxSetCurrent)(CUcontext);
  CUresult (*streamCreate)(CUstream*, unsigned);
  CUresult (*streamDestroy)(CUstream);
  CUresult (*streamSynchronize)(CUstream);
  CUresult (*launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void**, void**);
  CUresult (*launchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
};

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

// `base` at the CUDA 12.0 ABI, as the runtime asks (runtime/src/driver.cpp), else `exported`.
template <typename Fn>
bool find(void* lib, GetProcAddress get, const char* base, const char* exported, Fn* out) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (get == nullptr ||
      get(base, &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) != CUDA_SUCCESS ||
      found != CU_GET_PROC_ADDRESS_SUCCESS)
    fn = dlsym(lib, exported);
  *out = reinterpret_cast<Fn>(fn);
  return fn != nullptr;
}

bool loadDriver(Driver* d) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return false;
  auto get = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  return find(lib, get, "cuInit", "cuInit", &d->init) &&
         find(lib, get, "cuDriverGetVersion", "cuDriverGetVersion", &d->driverGetVersion) &&
         find(lib, get, "cuDeviceGetCount", "cuDeviceGetCount", &d->deviceGetCount) &&
         find(lib, get, "cuDeviceGet", "cuDeviceGet", &d->deviceGet) &&
         find(lib, get, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain",
              &d->primaryRetain) &&
         find(lib, get, "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2",
              &d->primaryRelease) &&
         find(lib, get, "cuCtxSetCurrent", "cuCtxSetCurrent", &d->ctxSetCurrent) &&
         find(lib, get, "cuStreamCreate", "cuStreamCreate", &d->streamCreate) &&
         find(lib, get, "cuStreamDestroy", "cuStreamDestroy_v2", &d->streamDestroy) &&
         find(lib, get, "cuStreamSynchronize", "cuStreamSynchronize", &d->streamSynchronize) &&
         find(lib, get, "cuLaunchKernel", "cuLaunchKernel", &d->launchKernel) &&
         find(lib, get, "cuLaunchKernelEx", "cuLaunchKernelEx", &d->launchKernelEx);
}

[[noreturn]] void fail(int code, const std::string& what) {
  std::printf("{\"error\": \"%s\"}\n", what.c_str());
  std::exit(code);
}

void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) fail(1, std::string(what) + " failed: CUresult " + std::to_string(r));
}

void check(const kiln::Status& s, const char* what) {
  if (!s.ok()) fail(1, std::string(what) + ": " + s.toString());
}

struct Stats {
  double median = 0, p10 = 0, p90 = 0;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1))];
  };
  return Stats{at(0.5), at(0.1), at(0.9)};
}

}  // namespace

int main(int argc, char** argv) {
  int ordinal = 0;
  int batches = 3000;
  int calls = 32;
  bool pdl = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--pdl") {
      pdl = true;
    } else if ((a == "--device" || a == "--batches" || a == "--calls") && i + 1 < argc) {
      const int v = std::atoi(argv[++i]);
      (a == "--device" ? ordinal : a == "--batches" ? batches : calls) = v;
    } else {
      fail(1, "usage: launch_overhead [--device N] [--batches N] [--calls N] [--pdl]");
    }
  }
  if (batches < 10 || calls < 1) fail(1, "--batches must be >= 10 and --calls >= 1");

  Driver d{};
  if (!loadDriver(&d)) fail(77, "libcuda.so.1 (or one of its entry points) is not available");
  if (d.init(0) != CUDA_SUCCESS) fail(77, "cuInit failed: no usable GPU");
  int count = 0;
  check(d.deviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count) fail(77, "no device " + std::to_string(ordinal));
  int driver_version = 0;
  check(d.driverGetVersion(&driver_version), "cuDriverGetVersion");
  CUdevice device = 0;
  check(d.deviceGet(&device, ordinal), "cuDeviceGet");
  CUcontext context = nullptr;
  check(d.primaryRetain(&context, device), "cuDevicePrimaryCtxRetain");
  check(d.ctxSetCurrent(context), "cuCtxSetCurrent");
  CUstream stream = nullptr;
  check(d.streamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  kiln::LaunchConfig config;
  config.grid = {1, 1, 1};
  config.block = {32, 1, 1};
  config.programmatic_dependency = pdl;
  unsigned long long param = 0;  // never read by the kernel
  void* args[] = {&param};

  // The first launch loads (and JIT-compiles) the module; then the function kiln launches.
  kiln::StreamTarget target;
  check(kiln::resolveStream(stream, &target), "kiln::resolveStream");
  check(kiln::launch(target, kVariant, 0, config, args), "kiln::launch (first, loads)");
  check(d.streamSynchronize(stream), "cuStreamSynchronize");
  kiln::detail::LoadedFunction loaded;
  if (!kiln::detail::findLoaded(target, kVariant, 0, 0, &loaded))
    fail(1, "the loaded function was not found after the first launch");
  const CUfunction function = loaded.function;
  const bool programmatic = pdl && loaded.image_sm >= 90;

  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attribute.value.programmaticStreamSerializationAllowed = 1;
  CUlaunchConfig ex{};
  ex.gridDimX = ex.gridDimY = ex.gridDimZ = 1;
  ex.blockDimX = 32;
  ex.blockDimY = ex.blockDimZ = 1;
  ex.hStream = stream;
  ex.attrs = &attribute;
  ex.numAttrs = 1;

  enum Mode { kBare, kTarget, kResolve, kOneCall, kNoContext, kModes };
  const char* const names[kModes] = {"bare_cuLaunchKernel", "kiln_launch_target",
                                     "kiln_resolve_and_launch", "kiln_one_call_launch",
                                     "kiln_resolve_and_launch_no_current_context"};
  auto batch = [&](int mode) -> double {
    if (mode == kNoContext) check(d.ctxSetCurrent(nullptr), "cuCtxSetCurrent(nullptr)");
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) {
      switch (mode) {
        case kBare:
          if (programmatic) {
            check(d.launchKernelEx(&ex, function, args, nullptr), "cuLaunchKernelEx");
          } else {
            check(d.launchKernel(function, 1, 1, 1, 32, 1, 1, 0, stream, args, nullptr),
                  "cuLaunchKernel");
          }
          break;
        case kTarget:
          check(kiln::launch(target, kVariant, 0, config, args), "kiln::launch(target)");
          break;
        case kResolve:
        case kNoContext: {
          kiln::StreamTarget t;
          check(kiln::resolveStream(stream, &t), "kiln::resolveStream");
          check(kiln::launch(t, kVariant, 0, config, args), "kiln::launch(target)");
          break;
        }
        case kOneCall:
          check(kiln::launch(kVariant, 0, config, stream, args), "kiln::launch(stream)");
          break;
      }
    }
    const auto stop = std::chrono::steady_clock::now();
    if (mode == kNoContext) check(d.ctxSetCurrent(context), "cuCtxSetCurrent");
    check(d.streamSynchronize(stream), "cuStreamSynchronize");
    return std::chrono::duration<double, std::nano>(stop - start).count() / calls;
  };

  std::vector<double> samples[kModes];
  const int warmup = batches / 10;
  for (int b = 0; b < warmup + batches; ++b) {
    for (int m = 0; m < kModes; ++m) {
      const double ns = batch(m);
      if (b >= warmup) samples[m].push_back(ns);
    }
  }

  Stats s[kModes];
  for (int m = 0; m < kModes; ++m) s[m] = stats(samples[m]);
  std::printf("{\n  \"device\": \"%s\",\n  \"sm\": %d,\n  \"multiprocessors\": %d,\n",
              target.device->name.c_str(), target.device->sm, target.device->multiprocessors);
  std::printf("  \"driver_version\": %d,\n  \"image_sm\": %d,\n  \"image_ptx\": true,\n",
              driver_version, loaded.image_sm);
  std::printf("  \"programmatic\": %s,\n  \"calls_per_batch\": %d,\n  \"batches\": %d,\n",
              programmatic ? "true" : "false", calls, batches);
  const char* const fields[] = {"median_ns_per_call", "p10_ns_per_call", "p90_ns_per_call"};
  for (int f = 0; f < 3; ++f) {
    std::printf("  \"%s\": {", fields[f]);
    for (int m = 0; m < kModes; ++m) {
      const double v = f == 0 ? s[m].median : f == 1 ? s[m].p10 : s[m].p90;
      std::printf("%s\"%s\": %.1f", m == 0 ? "" : ", ", names[m], v);
    }
    std::printf("},\n");
  }
  std::printf("  \"median_ratio_to_bare\": {");
  for (int m = 1; m < kModes; ++m)
    std::printf("%s\"%s\": %.3f", m == 1 ? "" : ", ", names[m], s[m].median / s[kBare].median);
  const double ratio = s[kResolve].median / s[kBare].median;
  std::printf("},\n  \"goal\": {\"kiln_resolve_and_launch_max_ratio\": 1.3, \"met\": %s}\n}\n",
              ratio <= 1.3 ? "true" : "false");

  check(d.streamDestroy(stream), "cuStreamDestroy");
  check(kiln::unloadAll(), "kiln::unloadAll");
  check(d.primaryRelease(device), "cuDevicePrimaryCtxRelease");
  return 0;
}
