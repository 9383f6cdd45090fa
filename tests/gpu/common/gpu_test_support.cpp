#include "common/gpu_test_support.h"

// The driver API's types and entry-point typedefs only: the tests link cudart alone, and reach
// the few driver calls runOnFreshThreads makes through cudaGetDriverEntryPointByVersion.
#include <cudaTypedefs.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <latch>
#include <mutex>
#include <sstream>
#include <thread>

namespace kiln::gpu_test {

bool Counts::record(bool ok, const std::string& what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    notes.push_back(what);
  }
  return ok;
}

void Counts::recordCase(const std::string& failure, const std::string& pass_note,
                        const std::string& label) {
  if (failure.empty()) {
    ++passed;
    if (!pass_note.empty()) notes.push_back(pass_note);
  } else {
    ++failed;
    notes.push_back(failure);
    ADD_FAILURE() << label << ": " << failure;
  }
}

Run& run() {
  static Run r;
  return r;
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

Totals report(const ReportFormat& f, bool gtest_ok) {
  const Run& r = run();
  const char* tag = f.artifact_tag;
  const char* fingerprint = f.artifact_fingerprint;
  Totals t;
  std::printf("\nkiln %s GPU numerics\n", f.group.c_str());
  if (f.show_multiprocessors) {
    std::printf("gpu: %s (sm_%d, %d SMs), driver %d, runtime %d\n", r.gpu_name.c_str(), r.sm,
                r.multiprocessors, r.driver_version, r.runtime_version);
  } else {
    std::printf("gpu: %s (sm_%d), driver %d, runtime %d\n", r.gpu_name.c_str(), r.sm,
                r.driver_version, r.runtime_version);
  }
  std::printf("artifact: tag %s, fingerprint %s\n", tag, fingerprint);
  std::printf("seed: %" PRIu64 " (KILN_SEED=%" PRIu64 " replays it)\n", r.seed, r.seed);
  if (f.per_variant_totals) {
    // Per (SM, dtype, variant): totals over its cases, then one line per case.
    std::map<std::tuple<int, std::string, std::string>, Counts> per_variant;
    for (const auto& [key, c] : r.results) {
      const auto& [sm, dtype, variant, what] = key;
      Counts& v = per_variant[{sm, dtype, variant}];
      v.passed += c.passed;
      v.failed += c.failed;
      v.skipped += c.skipped;
    }
    for (const auto& [key, v] : per_variant) {
      const auto& [sm, dtype, variant] = key;
      std::printf("sm_%d %s %s: %d passed, %d failed, %d skipped\n", sm, dtype.c_str(),
                  variant.c_str(), v.passed, v.failed, v.skipped);
    }
  }
  const char* line_indent = f.per_variant_totals ? "  " : "";
  const char* note_indent = f.per_variant_totals ? "      " : "    ";
  std::ostringstream rows_json;
  for (const auto& [key, c] : r.results) {
    const auto& [sm, dtype, variant, what] = key;
    std::printf("%ssm_%d %s %s %s: %d passed, %d failed, %d skipped\n", line_indent, sm,
                dtype.c_str(), variant.c_str(), what.c_str(), c.passed, c.failed, c.skipped);
    for (const std::string& note : c.notes) std::printf("%s%s\n", note_indent, note.c_str());
    t.passed += c.passed;
    t.failed += c.failed;
    t.skipped += c.skipped;
    rows_json << (rows_json.tellp() > 0 ? ",\n    " : "\n    ") << "{\"sm\": " << sm
              << ", \"dtype\": \"" << dtype << "\", \"variant\": \"" << variant << "\", \""
              << f.case_key << "\": \"" << what << "\", \"passed\": " << c.passed
              << ", \"failed\": " << c.failed << ", \"skipped\": " << c.skipped << ", \"notes\": [";
    for (std::size_t i = 0; i < c.notes.size(); ++i) {
      rows_json << (i ? ", " : "") << '"' << jsonEscape(c.notes[i]) << '"';
    }
    rows_json << "]}";
  }
  if (!gtest_ok && t.failed == 0) t.failed = 1;  // a gtest failure outside the counted cases
  std::printf("%d passed, %d failed, %d skipped\n", t.passed, t.failed, t.skipped);

  if (const char* path = std::getenv("KILN_EVIDENCE_OUT"); path != nullptr && *path != '\0') {
    std::ofstream json(path);
    json << "{\n  \"suite\": \"" << f.group << "_numerics\",\n  \"gpu\": \""
         << jsonEscape(r.gpu_name) << "\",\n  \"sm\": " << r.sm;
    if (f.show_multiprocessors) json << ",\n  \"multiprocessors\": " << r.multiprocessors;
    json << ",\n  \"driver_version\": " << r.driver_version
         << ",\n  \"runtime_version\": " << r.runtime_version << ",\n  \"artifact_tag\": \""
         << jsonEscape(tag) << "\",\n  \"artifact_fingerprint\": \"" << jsonEscape(fingerprint)
         << "\",\n  \"seed\": " << r.seed;
    if (!f.extra_json.empty()) json << ",\n  " << f.extra_json;
    json << ",\n  \"bounds\": {\"fp16\": " << f.bound_fp16 << ", \"bf16\": " << f.bound_bf16
         << "},\n  \"results\": [" << rows_json.str() << "\n  ],\n  \"passed\": " << t.passed
         << ",\n  \"failed\": " << t.failed << ",\n  \"skipped\": " << t.skipped << "\n}\n";
    if (!json)
      std::fprintf(stderr, "could not write %s\n", path);
    else
      std::printf("evidence: %s\n", path);
  }
  return t;
}

int numericsSetUp(int* argc, char** argv) {
  ::testing::InitGoogleTest(argc, argv);
  if (GTEST_FLAG_GET(list_tests)) return RUN_ALL_TESTS();  // listing needs no device
  Run& r = run();
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) {
    std::printf("no usable CUDA device\n0 passed, 1 failed, 0 skipped\n");
    return 1;
  }
  r.gpu_name = prop.name;
  r.sm = prop.major * 10 + prop.minor;
  r.multiprocessors = prop.multiProcessorCount;
  (void)cudaDriverGetVersion(&r.driver_version);
  (void)cudaRuntimeGetVersion(&r.runtime_version);
  if (const char* seed = std::getenv("KILN_SEED"); seed != nullptr && *seed != '\0') {
    r.seed = std::strtoull(seed, nullptr, 10);
  } else {
    r.seed =
        static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  }
  std::printf("seed %" PRIu64 "\n", r.seed);
  return -1;
}

std::string allocate(DeviceBuffer* b, std::size_t bytes, const void* data, std::size_t data_bytes) {
  b->bytes = std::max<std::size_t>(bytes, 16);
  if (cudaMalloc(&b->ptr, b->bytes) != cudaSuccess) {
    return "cudaMalloc of " + std::to_string(b->bytes) + " bytes failed";
  }
  if (cudaMemset(b->ptr, 0xff, b->bytes) != cudaSuccess) return "cudaMemset failed";
  if (data != nullptr && data_bytes > 0 &&
      cudaMemcpy(b->ptr, data, data_bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    return "cudaMemcpy to device failed";
  }
  // Both calls above run on the legacy default stream, and neither is guaranteed complete when it
  // returns (a device memset is asynchronous; a pageable upload may still be in DMA). The tests
  // launch on cudaStreamNonBlocking streams, which do not wait for the legacy stream: without this,
  // a kernel raced the poisoning memset of a buffer allocated just before it (gdn mtp at batch 256,
  // where a 512 MiB cache memset delayed the output's: its writes were overwritten with poison).
  if (cudaDeviceSynchronize() != cudaSuccess) return "cudaDeviceSynchronize after allocate failed";
  return "";
}

::testing::AssertionResult allocate(DeviceBuffer* b, std::size_t elements, std::size_t guard,
                                    const std::vector<std::uint16_t>* data) {
  b->bytes = (elements + guard) * sizeof(std::uint16_t);
  if (cudaMalloc(&b->ptr, b->bytes) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMalloc of " << b->bytes << " bytes failed";
  }
  if (cudaMemset(b->ptr, 0xff, b->bytes) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemset failed";
  }
  if (data != nullptr && data->size() > elements + guard) {
    return ::testing::AssertionFailure()
           << data->size() << " values do not fit a buffer of " << elements + guard << " elements";
  }
  if (data != nullptr && cudaMemcpy(b->ptr, data->data(), data->size() * sizeof(std::uint16_t),
                                    cudaMemcpyHostToDevice) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMemcpy to device failed";
  }
  if (cudaDeviceSynchronize() != cudaSuccess) {  // as above: ready for a non-blocking stream
    return ::testing::AssertionFailure() << "cudaDeviceSynchronize after allocate failed";
  }
  return ::testing::AssertionSuccess();
}

bool allPoison(const std::vector<std::uint16_t>& values) {
  bool untouched = !values.empty();
  for (std::uint16_t v : values) untouched = untouched && v == kPoison;
  return untouched;
}

std::size_t countChanged(const std::vector<std::uint16_t>& values, std::size_t begin,
                         std::size_t end) {
  std::size_t changed = 0;
  for (std::size_t i = begin; i < end; ++i) changed += values[i] != kPoison;
  return changed;
}

void describe(std::ostream& err, const OutputScan& s, std::size_t n) {
  if (s.unwritten) err << s.unwritten << " of " << n << " outputs not written (still poison); ";
  if (s.nonfinite) err << s.nonfinite << " outputs not finite; ";
  if (s.guard_changed) err << s.guard_changed << " elements written past the end of out; ";
}

namespace {

// The driver's entry points at the CUDA 11.0 ABI, the newest before cuCtxCreate took exec-affinity
// parameters (cuCtxCreate_v3, 11.4): cuCtxCreate(pctx, flags, dev).
constexpr unsigned kDriverAbi = 11000;

struct Driver {
  PFN_cuCtxGetCurrent_v4000 ctx_get_current = nullptr;
  PFN_cuCtxGetDevice_v2000 ctx_get_device = nullptr;
  PFN_cuCtxCreate_v3020 ctx_create = nullptr;
  PFN_cuCtxDestroy_v4000 ctx_destroy = nullptr;
};

template <typename Fn>
std::string entryPoint(const char* name, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &p, kDriverAbi, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    return std::string("driver entry point ") + name + " (CUDA " + std::to_string(kDriverAbi) +
           " ABI): " + cudaGetErrorString(e) + ", query result " +
           std::to_string(static_cast<int>(found));
  }
  *fn = reinterpret_cast<Fn>(p);
  return "";
}

std::string driverError(const char* call, CUresult r) {
  return std::string(call) + " failed: CUresult " + std::to_string(static_cast<int>(r));
}

}  // namespace

std::vector<std::string> runOnFreshThreads(const std::function<void(int)>& work, int timeout_s) {
  const int threads = kFreshThreads + 1;
  std::vector<std::string> errors(static_cast<std::size_t>(threads));
  Driver drv;
  std::string setup;
  for (const std::string& e :
       {entryPoint("cuCtxGetCurrent", &drv.ctx_get_current),
        entryPoint("cuCtxGetDevice", &drv.ctx_get_device),
        entryPoint("cuCtxCreate", &drv.ctx_create), entryPoint("cuCtxDestroy", &drv.ctx_destroy)}) {
    if (setup.empty()) setup = e;
  }
  CUcontext main_context = nullptr;
  CUdevice device = 0;
  if (setup.empty()) {
    if (const CUresult r = drv.ctx_get_current(&main_context); r != CUDA_SUCCESS) {
      setup = driverError("cuCtxGetCurrent on the main thread", r);
    } else if (main_context == nullptr) {
      setup = "the main thread has no current context (the streams' context)";
    } else if (const CUresult r2 = drv.ctx_get_device(&device); r2 != CUDA_SUCCESS) {
      setup = driverError("cuCtxGetDevice on the main thread", r2);
    }
  }
  if (!setup.empty()) {
    for (std::string& e : errors) e = "fresh threads: " + setup;
    return errors;
  }

  std::latch start(threads);
  std::mutex mutex;
  std::condition_variable finished_cv;
  int finished = 0;
  auto body = [&](int t) {
    std::string& err = errors[static_cast<std::size_t>(t)];
    const bool other = t == kOtherContextThread;
    CUcontext own = nullptr;
    bool ready = true;
    CUcontext before = nullptr;
    if (const CUresult r = drv.ctx_get_current(&before); r != CUDA_SUCCESS) {
      err += driverError("cuCtxGetCurrent before run", r) + "; ";
      ready = false;
    } else if (before != nullptr) {
      err += "a fresh thread has a current context; ";
      ready = false;
    }
    if (ready && other) {
      if (const CUresult r = drv.ctx_create(&own, 0, device); r != CUDA_SUCCESS) {
        err += driverError("cuCtxCreate (another context of the streams' device)", r) + "; ";
        ready = false;
      } else if (own == main_context) {
        err += "cuCtxCreate returned the primary context; ";
        ready = false;
      }
    }
    start.arrive_and_wait();  // every thread calls the runner at once
    if (ready) {
      work(t);
      CUcontext after = nullptr;
      if (const CUresult r = drv.ctx_get_current(&after); r != CUDA_SUCCESS) {
        err += driverError("cuCtxGetCurrent after run", r) + "; ";
      } else if (after != own) {
        err += other ? "the thread's own context is no longer current after run(); "
                     : "a context is current after run() on a thread that had none; ";
      }
    }
    if (own != nullptr) {
      if (const CUresult r = drv.ctx_destroy(own); r != CUDA_SUCCESS) {
        err += driverError("cuCtxDestroy of the thread's own context", r) + "; ";
      }
    }
    if (!err.empty()) {
      err = (other ? "thread with another context of the device: " : "fresh thread: ") + err;
    }
    const std::lock_guard<std::mutex> lock(mutex);
    ++finished;
    finished_cv.notify_all();
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
  {
    std::unique_lock<std::mutex> lock(mutex);
    if (!finished_cv.wait_for(lock, std::chrono::seconds(timeout_s),
                              [&] { return finished == threads; })) {
      std::fprintf(stderr,
                   "fresh threads: %d of %d threads still running after %d s (a deadlock in "
                   "run()?); aborting\n",
                   threads - finished, threads, timeout_s);
      std::fflush(stdout);
      std::abort();
    }
  }
  for (std::thread& th : pool) th.join();
  return errors;
}

void parallelFor(std::size_t n,
                 const std::function<void(std::size_t, std::size_t, std::size_t)>& fn) {
  const std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 32);
  const std::size_t per = (n + workers - 1) / workers;
  if (n == 0) return;
  std::vector<std::thread> pool;
  for (std::size_t part = 0; part * per < n; ++part) {
    pool.emplace_back(fn, part * per, std::min(n, (part + 1) * per), part);
  }
  for (std::thread& t : pool) t.join();
}

}  // namespace kiln::gpu_test
