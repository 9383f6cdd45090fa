// A fake CUDA driver for the runtime's CPU tests: devices with chosen SMs, contexts, streams
// that can be "captured", modules whose loads, unloads and lookups are counted and can be made
// to fail, PTX "JIT-compiled" at load (through cuModuleLoadDataEx, whose error-log buffer a
// failed JIT fills, or cuModuleLoadData), and tensor-map encoding that records its arguments. It
// checks what the real driver checks, so the loader is tested against the driver's rules, not just
// against itself: the dynamic shared memory opt-in, and the current context, kept per thread (a
// stack, as cuCtxPushCurrent / cuCtxPopCurrent keep it): a load needs one, a lookup, attribute,
// unload or capture query needs the one its module or stream belongs to, a launch needs the
// stream's (and the function's) to be current, and so does a tensor-map encode
// (encode_needs_context).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kiln/driver_api.h"
#include "kiln/testing/driver.h"
#include "kiln/variant.h"

namespace kiln::fake {

// A cubin the fake loads: this prefix, then the entry names it holds, space-separated.
inline constexpr char kCubinMagic[] = "FAKECUBIN";
// PTX the fake JIT-compiles at load, by either load call: this prefix, then the entry names.
inline constexpr char kPtxMagic[] = "FAKEPTX";

struct Device {
  std::string name;
  int major = 9;
  int minor = 0;
  int multiprocessors = 132;
  int shared_optin = 232448;
};

struct Context {
  int device = 0;
};
struct Module {
  Context* context = nullptr;
  std::string image;
  bool live = true;
};
struct Function {
  Module* module = nullptr;
  std::string name;
  int max_dynamic_shared = 48 * 1024;
};
struct Stream {
  Context* context = nullptr;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
};

struct LaunchRecord {
  std::string function;
  std::string image;  // the text of the image its module was loaded from
  int device = -1;
  unsigned grid[3] = {0, 0, 0};
  unsigned block[3] = {0, 0, 0};
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  void** args = nullptr;
  bool programmatic = false;  // through cuLaunchKernelEx with programmatic stream serialization
};

// One successful launch, with the first `record_first_arg_bytes` bytes its first parameter pointed
// to (empty when that is 0): what a runner test checks of each launch of a run.
struct RecordedLaunch {
  LaunchRecord launch;
  std::vector<unsigned char> first_arg;
};

// The arguments of the last cuTensorMapEncodeTiled call, copied (entries past the rank stay 0).
struct TensorMapRecord {
  void* map = nullptr;
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  cuuint32_t rank = 0;
  void* address = nullptr;
  cuuint64_t dims[5] = {};
  cuuint64_t strides[4] = {};
  cuuint32_t box[5] = {};
  cuuint32_t element_strides[5] = {};
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_NONE;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
  CUcontext current_context = nullptr;  // the calling thread's context at the call
};

// What the fake writes into an encoded map: this word, then the address, then zeros.
inline constexpr std::uint64_t kTensorMapMagic = 0x6b696c6e544d4150ULL;  // "kilnTMAP"

class Driver;
inline Driver* g_driver = nullptr;
inline thread_local std::vector<CUcontext> t_context_stack;

// One per test; installs itself as the process's driver (kiln::testing::ScopedDriver) for its
// lifetime.
class Driver {
 public:
  explicit Driver(std::vector<Device> devices) : devices_(std::move(devices)) {
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      auto context = std::make_unique<Context>();
      context->device = static_cast<int>(i);
      contexts_.push_back(std::move(context));
    }
    t_context_stack.clear();
    g_driver = this;
    scope_ = std::make_unique<kiln::testing::ScopedDriver>(api());
  }
  ~Driver() {
    scope_.reset();
    g_driver = nullptr;
    t_context_stack.clear();
  }
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // The primary context of device `ordinal`.
  CUcontext context(int ordinal) {
    return reinterpret_cast<CUcontext>(contexts_.at(static_cast<std::size_t>(ordinal)).get());
  }
  CUstream makeStream(int ordinal) {
    std::lock_guard<std::mutex> lock(mu_);
    auto stream = std::make_unique<Stream>();
    stream->context = contexts_.at(static_cast<std::size_t>(ordinal)).get();
    streams_.push_back(std::move(stream));
    return reinterpret_cast<CUstream>(streams_.back().get());
  }
  void setCapturing(CUstream stream, bool capturing) {
    reinterpret_cast<Stream*>(stream)->capture =
        capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  }
  // Make `ordinal`'s context current on this thread (cuCtxSetCurrent).
  void makeCurrent(int ordinal) {
    t_context_stack.clear();
    t_context_stack.push_back(context(ordinal));
  }
  // The calling thread's current context (null: none).
  static CUcontext currentContext() { return current(); }

  int liveModules() {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& m : modules_) n += m->live ? 1 : 0;
    return n;
  }
  // Live modules loaded in device `ordinal`'s context.
  int liveModulesOn(int ordinal) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& m : modules_) n += (m->live && m->context->device == ordinal) ? 1 : 0;
    return n;
  }
  LaunchRecord lastLaunch() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_launch_;
  }
  // Every successful launch since the driver was made or the history was last cleared, in order
  // (cuLaunchKernel and cuLaunchKernelEx alike).
  std::vector<RecordedLaunch> launchHistory() {
    std::lock_guard<std::mutex> lock(mu_);
    return launch_history_;
  }
  void clearLaunchHistory() {
    std::lock_guard<std::mutex> lock(mu_);
    launch_history_.clear();
  }
  TensorMapRecord lastTensorMap() {
    std::lock_guard<std::mutex> lock(mu_);
    return tensor_maps_.empty() ? TensorMapRecord{} : tensor_maps_.back();
  }
  // Every successful cuTensorMapEncodeTiled call, in order.
  std::vector<TensorMapRecord> tensorMaps() {
    std::lock_guard<std::mutex> lock(mu_);
    return tensor_maps_;
  }
  // The first `record_first_arg_bytes` bytes that the last launch's first parameter pointed to
  // (the caller's args die with its frame; a test of a by-value struct parameter reads this).
  std::vector<unsigned char> lastLaunchFirstArg() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_first_arg_;
  }
  int functionSharedOptIn(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& f : functions_)
      if (f->name == name && f->module->live) return f->max_dynamic_shared;
    return -1;
  }

  // Counters. load_attempts and loads count both load calls; ex_* count cuModuleLoadDataEx's
  // share of them.
  std::atomic<int> ex_load_attempts{0}, ex_loads{0};
  std::atomic<int> inits{0}, load_attempts{0}, loads{0}, unloads{0}, get_functions{0},
      set_attributes{0}, launches{0}, retains{0}, releases{0}, pushes{0}, pops{0},
      attribute_queries{0}, capture_queries{0}, tensor_map_encodes{0}, current_queries{0},
      stream_context_queries{0}, device_queries{0};
  // Every call of the table, whichever: what a launch of a loaded variant must not add to.
  std::atomic<int> calls{0};
  // Failure injection: the next N loads / unloads fail; every load sleeps this long (to widen
  // the window in which concurrent first launches race); results to return instead of success.
  std::atomic<int> fail_loads{0}, fail_unloads{0}, load_delay_ms{0};
  // The next N loads of PTX fail their JIT: CUDA_ERROR_INVALID_PTX, and through
  // cuModuleLoadDataEx `jit_log` in its CU_JIT_ERROR_LOG_BUFFER (at most the SIZE_BYTES option's
  // bytes, NUL included, as the driver writes it).
  std::atomic<int> fail_jit{0};
  std::string jit_log = "ptxas application ptx input, line 12; fatal   : Unsupported .version 9.9";
  // The options of the last cuModuleLoadDataEx call, and the log buffer size it gave.
  std::vector<CUjit_option> last_jit_options;
  std::size_t last_log_buffer_bytes = 0;
  CUresult init_result = CUDA_SUCCESS;
  CUresult launch_result = CUDA_SUCCESS;
  CUresult tensor_map_result = CUDA_SUCCESS;
  std::size_t record_first_arg_bytes = 0;
  int driver_version = 13000;
  // Whether cuTensorMapEncodeTiled fails with CUDA_ERROR_INVALID_CONTEXT on a thread with no
  // current context, as the real driver does (issue 33). The tests of the context-free
  // kiln::encodeTensorMap(spec, out), called from a thread without one, turn it off.
  bool encode_needs_context = true;

  DriverApi api() const {
    DriverApi a;
    a.init = &Driver::init;
    a.driverGetVersion = &Driver::driverGetVersion;
    a.deviceGet = &Driver::deviceGet;
    a.deviceGetCount = &Driver::deviceGetCount;
    a.deviceGetAttribute = &Driver::deviceGetAttribute;
    a.deviceGetName = &Driver::deviceGetName;
    a.ctxGetCurrent = &Driver::ctxGetCurrent;
    a.ctxPushCurrent = &Driver::ctxPushCurrent;
    a.ctxPopCurrent = &Driver::ctxPopCurrent;
    a.ctxGetDevice = &Driver::ctxGetDevice;
    a.streamGetCtx = &Driver::streamGetCtx;
    a.streamIsCapturing = &Driver::streamIsCapturing;
    a.devicePrimaryCtxRetain = &Driver::devicePrimaryCtxRetain;
    a.devicePrimaryCtxRelease = &Driver::devicePrimaryCtxRelease;
    a.moduleLoadData = &Driver::moduleLoadData;
    a.moduleLoadDataEx = &Driver::moduleLoadDataEx;
    a.moduleUnload = &Driver::moduleUnload;
    a.moduleGetFunction = &Driver::moduleGetFunction;
    a.funcSetAttribute = &Driver::funcSetAttribute;
    a.launchKernel = &Driver::launchKernel;
    a.launchKernelEx = &Driver::launchKernelEx;
    a.tensorMapEncodeTiled = &Driver::tensorMapEncodeTiled;
    a.getErrorName = &Driver::getErrorName;
    a.getErrorString = &Driver::getErrorString;
    return a;
  }

  // Reinstalls the table with one optional entry null (a table from before it existed), e.g.
  // &DriverApi::moduleLoadDataEx: PTX then loads through moduleLoadData. Resets the runtime, so
  // call it before any launch.
  template <typename Entry>
  void dropEntry(Entry DriverApi::*entry) {
    DriverApi a = api();
    a.*entry = nullptr;
    install(a);
  }
  // Reinstalls `table` (api() with some entries replaced) as the process's driver. Resets the
  // runtime, so call it before any launch.
  void install(const DriverApi& table) {
    scope_.reset();
    scope_ = std::make_unique<kiln::testing::ScopedDriver>(table);
  }

 private:
  static Driver& d() { return *g_driver; }
  // The first statement of every entry point of the table.
  static void countCall() { g_driver->calls.fetch_add(1, std::memory_order_relaxed); }
  static CUcontext current() { return t_context_stack.empty() ? nullptr : t_context_stack.back(); }
  static CUcontext contextOf(const Module* m) { return reinterpret_cast<CUcontext>(m->context); }
  // What the real driver answers a call about a module, function or stream of another context
  // than the current one (or with none current).
  static CUresult needCurrent(CUcontext owner) {
    if (current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    return current() == owner ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  }
  bool validDevice(CUdevice device) const {
    return device >= 0 && static_cast<std::size_t>(device) < devices_.size();
  }

  static CUresult init(unsigned) {
    countCall();
    ++d().inits;
    return d().init_result;
  }
  static CUresult driverGetVersion(int* version) {
    countCall();
    *version = d().driver_version;
    return CUDA_SUCCESS;
  }
  static CUresult deviceGet(CUdevice* device, int ordinal) {
    countCall();
    ++d().device_queries;
    if (!d().validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
  }
  static CUresult deviceGetCount(int* count) {
    countCall();
    *count = static_cast<int>(d().devices_.size());
    return CUDA_SUCCESS;
  }
  static CUresult deviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
    countCall();
    ++d().attribute_queries;
    if (!d().validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    const Device& info = d().devices_[static_cast<std::size_t>(device)];
    switch (attribute) {
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        *value = info.major;
        return CUDA_SUCCESS;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        *value = info.minor;
        return CUDA_SUCCESS;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        *value = info.multiprocessors;
        return CUDA_SUCCESS;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        *value = info.shared_optin;
        return CUDA_SUCCESS;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  static CUresult deviceGetName(char* name, int length, CUdevice device) {
    countCall();
    if (!d().validDevice(device) || length <= 0) return CUDA_ERROR_INVALID_VALUE;
    const std::string& text = d().devices_[static_cast<std::size_t>(device)].name;
    const std::size_t n = std::min(text.size(), static_cast<std::size_t>(length - 1));
    std::memcpy(name, text.data(), n);
    name[n] = '\0';
    return CUDA_SUCCESS;
  }
  static CUresult ctxGetCurrent(CUcontext* context) {
    countCall();
    ++d().current_queries;
    *context = current();
    return CUDA_SUCCESS;
  }
  static CUresult ctxPushCurrent(CUcontext context) {
    countCall();
    if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    ++d().pushes;
    t_context_stack.push_back(context);
    return CUDA_SUCCESS;
  }
  static CUresult ctxPopCurrent(CUcontext* context) {
    countCall();
    if (t_context_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
    ++d().pops;
    if (context != nullptr) *context = t_context_stack.back();
    t_context_stack.pop_back();
    return CUDA_SUCCESS;
  }
  static CUresult ctxGetDevice(CUdevice* device) {
    countCall();
    ++d().device_queries;
    CUcontext context = current();
    if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    *device = reinterpret_cast<Context*>(context)->device;
    return CUDA_SUCCESS;
  }
  static CUresult streamGetCtx(CUstream stream, CUcontext* context) {
    countCall();
    ++d().stream_context_queries;
    if (stream == nullptr) {
      if (current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
      *context = current();
      return CUDA_SUCCESS;
    }
    *context = reinterpret_cast<CUcontext>(reinterpret_cast<Stream*>(stream)->context);
    return CUDA_SUCCESS;
  }
  static CUresult streamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
    countCall();
    ++d().capture_queries;
    if (stream == nullptr) {
      if (current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
      *status = CU_STREAM_CAPTURE_STATUS_NONE;
      return CUDA_SUCCESS;
    }
    const Stream* s = reinterpret_cast<Stream*>(stream);
    if (const CUresult r = needCurrent(reinterpret_cast<CUcontext>(s->context)); r != CUDA_SUCCESS)
      return r;
    *status = s->capture;
    return CUDA_SUCCESS;
  }
  static CUresult devicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
    countCall();
    if (!d().validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    ++d().retains;
    *context = d().context(device);
    return CUDA_SUCCESS;
  }
  static CUresult devicePrimaryCtxRelease(CUdevice device) {
    countCall();
    if (!d().validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
    ++d().releases;
    return CUDA_SUCCESS;
  }
  static CUresult moduleLoadData(CUmodule* module, const void* image) {
    countCall();
    return load(module, image, nullptr, 0);
  }
  // The JIT options the fake reads: CU_JIT_ERROR_LOG_BUFFER and its _SIZE_BYTES.
  static CUresult moduleLoadDataEx(CUmodule* module, const void* image, unsigned int num_options,
                                   CUjit_option* options, void** option_values) {
    countCall();
    Driver& self = d();
    ++self.ex_load_attempts;
    char* log = nullptr;
    std::size_t log_bytes = 0;
    {
      std::lock_guard<std::mutex> lock(self.mu_);
      self.last_jit_options.assign(options, options + num_options);
      for (unsigned int i = 0; i < num_options; ++i) {
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER) log = static_cast<char*>(option_values[i]);
        if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
          log_bytes = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(option_values[i]));
      }
      self.last_log_buffer_bytes = log_bytes;
    }
    const CUresult result = load(module, image, log, log_bytes);
    if (result == CUDA_SUCCESS) ++self.ex_loads;
    return result;
  }
  static CUresult load(CUmodule* module, const void* image, char* log, std::size_t log_bytes) {
    Driver& self = d();
    ++self.load_attempts;
    if (self.load_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(self.load_delay_ms.load()));
    CUcontext context = current();
    if (context == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (self.fail_loads > 0) {
      --self.fail_loads;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const char* text = static_cast<const char*>(image);
    const bool ptx = std::strncmp(text, kPtxMagic, sizeof(kPtxMagic) - 1) == 0;
    if (!ptx && std::strncmp(text, kCubinMagic, sizeof(kCubinMagic) - 1) != 0)
      return CUDA_ERROR_INVALID_IMAGE;
    if (ptx && self.fail_jit > 0) {
      --self.fail_jit;
      if (log != nullptr && log_bytes > 0) {
        const std::size_t n = std::min(self.jit_log.size(), log_bytes - 1);
        std::memcpy(log, self.jit_log.data(), n);
        log[n] = '\0';
      }
      return CUDA_ERROR_INVALID_PTX;
    }
    std::lock_guard<std::mutex> lock(self.mu_);
    auto m = std::make_unique<Module>();
    m->context = reinterpret_cast<Context*>(context);
    m->image = text;
    *module = reinterpret_cast<CUmodule>(m.get());
    self.modules_.push_back(std::move(m));
    ++self.loads;
    return CUDA_SUCCESS;
  }
  static CUresult moduleUnload(CUmodule module) {
    countCall();
    Driver& self = d();
    std::lock_guard<std::mutex> lock(self.mu_);
    Module* m = reinterpret_cast<Module*>(module);
    if (m == nullptr || !m->live) return CUDA_ERROR_INVALID_HANDLE;
    if (const CUresult r = needCurrent(contextOf(m)); r != CUDA_SUCCESS) return r;
    if (self.fail_unloads > 0) {
      --self.fail_unloads;
      return CUDA_ERROR_UNKNOWN;
    }
    m->live = false;
    ++self.unloads;
    return CUDA_SUCCESS;
  }
  static CUresult moduleGetFunction(CUfunction* function, CUmodule module, const char* name) {
    countCall();
    Driver& self = d();
    std::lock_guard<std::mutex> lock(self.mu_);
    ++self.get_functions;
    Module* m = reinterpret_cast<Module*>(module);
    if (m == nullptr || !m->live) return CUDA_ERROR_INVALID_HANDLE;
    if (const CUresult r = needCurrent(contextOf(m)); r != CUDA_SUCCESS) return r;
    if (m->image.find(std::string(" ") + name) == std::string::npos) return CUDA_ERROR_NOT_FOUND;
    auto f = std::make_unique<Function>();
    f->module = m;
    f->name = name;
    *function = reinterpret_cast<CUfunction>(f.get());
    self.functions_.push_back(std::move(f));
    return CUDA_SUCCESS;
  }
  static CUresult funcSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
    countCall();
    Driver& self = d();
    std::lock_guard<std::mutex> lock(self.mu_);
    ++self.set_attributes;
    if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
      return CUDA_ERROR_INVALID_VALUE;
    Function* f = reinterpret_cast<Function*>(function);
    if (const CUresult r = needCurrent(contextOf(f->module)); r != CUDA_SUCCESS) return r;
    f->max_dynamic_shared = value;
    return CUDA_SUCCESS;
  }
  static CUresult launchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz,
                               unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                               CUstream stream, void** params, void** extra) {
    countCall();
    return launchChecked(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra);
  }
  // cuLaunchKernel's checks and record, shared with cuLaunchKernelEx.
  static CUresult launchChecked(CUfunction function, unsigned gx, unsigned gy, unsigned gz,
                                unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                                CUstream stream, void** params, void**) {
    Driver& self = d();
    std::lock_guard<std::mutex> lock(self.mu_);
    if (self.launch_result != CUDA_SUCCESS) return self.launch_result;
    Function* f = reinterpret_cast<Function*>(function);
    if (f == nullptr || !f->module->live) return CUDA_ERROR_INVALID_HANDLE;
    Context* stream_context = stream == nullptr ? reinterpret_cast<Context*>(current())
                                                : reinterpret_cast<Stream*>(stream)->context;
    // A stream of another context than the current one is not a valid handle here.
    if (const CUresult r = needCurrent(reinterpret_cast<CUcontext>(stream_context));
        r != CUDA_SUCCESS)
      return r;
    if (stream_context != f->module->context) return CUDA_ERROR_INVALID_HANDLE;
    if (shared_bytes > static_cast<unsigned>(f->max_dynamic_shared))
      return CUDA_ERROR_INVALID_VALUE;
    ++self.launches;
    self.last_launch_ = LaunchRecord{f->name,
                                     f->module->image,
                                     stream_context->device,
                                     {gx, gy, gz},
                                     {bx, by, bz},
                                     shared_bytes,
                                     stream,
                                     params};
    if (self.record_first_arg_bytes > 0 && params != nullptr && params[0] != nullptr) {
      const auto* first = static_cast<const unsigned char*>(params[0]);
      self.last_first_arg_.assign(first, first + self.record_first_arg_bytes);
    }
    self.launch_history_.push_back(RecordedLaunch{
        self.last_launch_,
        self.record_first_arg_bytes > 0 ? self.last_first_arg_ : std::vector<unsigned char>{}});
    return CUDA_SUCCESS;
  }
  // The same checks and record as launchKernel; accepts only the one attribute kiln sets.
  static CUresult launchKernelEx(const CUlaunchConfig* config, CUfunction function, void** params,
                                 void** extra) {
    countCall();
    if (config == nullptr || config->numAttrs != 1 || config->attrs == nullptr ||
        config->attrs[0].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION ||
        config->attrs[0].value.programmaticStreamSerializationAllowed != 1)
      return CUDA_ERROR_INVALID_VALUE;
    const CUresult result =
        launchChecked(function, config->gridDimX, config->gridDimY, config->gridDimZ,
                      config->blockDimX, config->blockDimY, config->blockDimZ,
                      config->sharedMemBytes, config->hStream, params, extra);
    if (result == CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(d().mu_);
      d().last_launch_.programmatic = true;
      d().launch_history_.back().launch.programmatic = true;
    }
    return result;
  }
  // Checks what the driver documents for the map itself (64-byte aligned, rank 1..5) and records
  // the call; kiln::encodeTensorMap checks every other limit before calling.
  static CUresult tensorMapEncodeTiled(CUtensorMap* map, CUtensorMapDataType type, cuuint32_t rank,
                                       void* address, const cuuint64_t* dims,
                                       const cuuint64_t* strides, const cuuint32_t* box,
                                       const cuuint32_t* element_strides,
                                       CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                       CUtensorMapL2promotion l2_promotion,
                                       CUtensorMapFloatOOBfill oob_fill) {
    countCall();
    Driver& self = d();
    std::lock_guard<std::mutex> lock(self.mu_);
    ++self.tensor_map_encodes;
    if (self.tensor_map_result != CUDA_SUCCESS) return self.tensor_map_result;
    if (self.encode_needs_context && current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (map == nullptr || reinterpret_cast<std::uintptr_t>(map) % 64 != 0 || rank < 1 || rank > 5)
      return CUDA_ERROR_INVALID_VALUE;
    TensorMapRecord r;
    r.map = map;
    r.type = type;
    r.rank = rank;
    r.address = address;
    for (cuuint32_t i = 0; i < rank; ++i) {
      r.dims[i] = dims[i];
      r.box[i] = box[i];
      r.element_strides[i] = element_strides[i];
      if (i + 1 < rank) r.strides[i] = strides[i];
    }
    r.interleave = interleave;
    r.swizzle = swizzle;
    r.l2_promotion = l2_promotion;
    r.oob_fill = oob_fill;
    r.current_context = current();
    self.tensor_maps_.push_back(r);
    // Through memcpy: the map is 64-byte aligned, CUDA 13's CUtensorMap type 128.
    std::uint64_t words[16] = {kTensorMapMagic, reinterpret_cast<std::uintptr_t>(address)};
    std::memcpy(static_cast<void*>(map), words, sizeof(words));
    return CUDA_SUCCESS;
  }
  static CUresult getErrorName(CUresult error, const char** name) {
    countCall();
    switch (error) {
      case CUDA_SUCCESS:
        *name = "CUDA_SUCCESS";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_VALUE:
        *name = "CUDA_ERROR_INVALID_VALUE";
        return CUDA_SUCCESS;
      case CUDA_ERROR_OUT_OF_MEMORY:
        *name = "CUDA_ERROR_OUT_OF_MEMORY";
        return CUDA_SUCCESS;
      case CUDA_ERROR_NO_DEVICE:
        *name = "CUDA_ERROR_NO_DEVICE";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_DEVICE:
        *name = "CUDA_ERROR_INVALID_DEVICE";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_IMAGE:
        *name = "CUDA_ERROR_INVALID_IMAGE";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_PTX:
        *name = "CUDA_ERROR_INVALID_PTX";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_CONTEXT:
        *name = "CUDA_ERROR_INVALID_CONTEXT";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_HANDLE:
        *name = "CUDA_ERROR_INVALID_HANDLE";
        return CUDA_SUCCESS;
      case CUDA_ERROR_NOT_FOUND:
        *name = "CUDA_ERROR_NOT_FOUND";
        return CUDA_SUCCESS;
      case CUDA_ERROR_LAUNCH_FAILED:
        *name = "CUDA_ERROR_LAUNCH_FAILED";
        return CUDA_SUCCESS;
      case CUDA_ERROR_UNKNOWN:
        *name = "CUDA_ERROR_UNKNOWN";
        return CUDA_SUCCESS;
      default:
        *name = nullptr;
        return CUDA_ERROR_INVALID_VALUE;
    }
  }
  static CUresult getErrorString(CUresult error, const char** text) {
    countCall();
    switch (error) {
      case CUDA_ERROR_INVALID_IMAGE:
        *text = "device kernel image is invalid";
        return CUDA_SUCCESS;
      case CUDA_ERROR_INVALID_PTX:
        *text = "a PTX JIT compilation failed";
        return CUDA_SUCCESS;
      case CUDA_ERROR_OUT_OF_MEMORY:
        *text = "out of memory";
        return CUDA_SUCCESS;
      case CUDA_ERROR_NOT_FOUND:
        *text = "named symbol not found";
        return CUDA_SUCCESS;
      case CUDA_ERROR_UNKNOWN:
        *text = "unknown error";
        return CUDA_SUCCESS;
      case CUDA_ERROR_LAUNCH_FAILED:
        *text = "unspecified launch failure";
        return CUDA_SUCCESS;
      default:
        *text = "fake driver error";
        return CUDA_SUCCESS;
    }
  }

  std::vector<Device> devices_;
  std::vector<std::unique_ptr<Context>> contexts_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<std::unique_ptr<Module>> modules_;
  std::vector<std::unique_ptr<Function>> functions_;
  LaunchRecord last_launch_;
  std::vector<RecordedLaunch> launch_history_;
  std::vector<TensorMapRecord> tensor_maps_;
  std::vector<unsigned char> last_first_arg_;
  std::unique_ptr<kiln::testing::ScopedDriver> scope_;
};

// A variant whose strings and tables this object owns; not copyable, as the kiln_variant
// points into it.
class TestVariant {
 public:
  // `cuda_version`: the toolkit the images claim, as cuDriverGetVersion spells it (0: unknown).
  TestVariant(std::string name, std::vector<std::string> entries, std::vector<kiln_image> images,
              std::string group = "testgroup", int cuda_version = 0)
      : name_(std::move(name)),
        group_(std::move(group)),
        entries_(std::move(entries)),
        images_(std::move(images)) {
    for (const std::string& e : entries_) entry_ptrs_.push_back(e.c_str());
    variant_.name = name_.c_str();
    variant_.group = group_.c_str();
    variant_.entries = entry_ptrs_.data();
    variant_.num_entries = static_cast<int>(entry_ptrs_.size());
    variant_.images = images_.data();
    variant_.num_images = static_cast<int>(images_.size());
    variant_.cuda_version = cuda_version;
  }
  TestVariant(const TestVariant&) = delete;
  TestVariant& operator=(const TestVariant&) = delete;

  const kiln_variant& get() const { return variant_; }
  const kiln_variant* ptr() const { return &variant_; }

 private:
  std::string name_, group_;
  std::vector<std::string> entries_;
  std::vector<const char*> entry_ptrs_;
  std::vector<kiln_image> images_;
  kiln_variant variant_{};
};

// An image of SM `sm` whose bytes are `text` (a string literal: it must outlive the image).
inline kiln_image image(int sm, bool arch_specific = false,
                        const char* text = "FAKECUBIN kernel_main kernel_aux") {
  kiln_image i{};
  i.sm = sm;
  i.arch_specific = arch_specific ? 1 : 0;
  i.data = reinterpret_cast<const unsigned char*>(text);
  i.size = std::strlen(text) + 1;
  i.sha256 = "0000";
  return i;
}

// A PTX image of SM `sm` (compute_<sm>) whose text is `text` (a string literal: it must outlive
// the image). As the generated shim lays it out: NUL-terminated, size without the NUL, ptx = 1.
inline kiln_image ptxImage(int sm, const char* text = "FAKEPTX kernel_main kernel_aux") {
  kiln_image i{};
  i.sm = sm;
  i.data = reinterpret_cast<const unsigned char*>(text);
  i.size = std::strlen(text);
  i.sha256 = "0000";
  i.ptx = 1;
  return i;
}

inline Device h200() {
  return Device{"NVIDIA H200", 9, 0, 132, 232448};
}
inline Device orin() {
  return Device{"Orin", 8, 7, 16, 166912};
}
inline Device a100() {
  return Device{"NVIDIA A100-SXM4-80GB", 8, 0, 108, 166912};
}

}  // namespace kiln::fake
