// The module table: one entry per (variant, CUDA context), loaded on first use and kept until
// unloadAll/unloadContext. Lazy loading keeps start-up cheap and loads only the variants a
// process uses; one entry per context because a CUmodule belongs to the context it was loaded
// in. A mutex guards the table; a mutex per entry serialises its load, so concurrent first
// launches load once while launches of other variants go on. A PTX image loads the same way
// (the driver JIT-compiles it inside the load); a failed JIT is a failed load: nothing stays
// loaded, the next launch tries again, and only a failed unload poisons.
#include "loader.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "device.h"
#include "kiln/loader.h"

namespace kiln::detail {
namespace {

// Launches with more dynamic shared memory than this must opt in per function.
constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;

struct Module {
  std::mutex mu;
  bool retired = false;                 // removed from the table by an unload; look it up again
  CUmodule module = nullptr;            // null until loaded
  std::vector<CUfunction> functions;    // per entry, looked up at load
  std::vector<unsigned> shared_opt_in;  // per entry, the dynamic shared bytes opted into so far
};

using ModuleKey = std::pair<const kiln_variant*, CUcontext>;

struct LoaderState {
  std::mutex mu;  // guards the two maps; taken after a Module::mu, never before one
  std::map<ModuleKey, std::shared_ptr<Module>> modules;
  std::map<std::string, std::string> poisoned;  // variant name -> why
};

LoaderState& loader() {
  static LoaderState* s = new LoaderState;  // never destroyed: usable from static destructors
  return *s;
}

std::string imageLabel(const kiln_variant& variant, const kiln_image& image) {
  return std::string(variantName(variant)) + " (" + imageName(image) + " image): ";
}

// The JIT's error log: the text up to its first NUL, without trailing whitespace.
std::string trimLog(const char* log, std::size_t capacity) {
  std::string text(log, strnlen(log, capacity));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  return text;
}

Status loadPtx(const DriverApi& api, const kiln_image& image, CUmodule* module) {
  // cuModuleLoadData(Ex) reads PTX as a C string (kiln/variant.h: data[size] is its NUL).
  if (image.data[image.size] != '\0')
    return Status(StatusCode::kInvalidArgument,
                  "PTX data is not NUL-terminated (data[size] must be 0; kiln/variant.h)");
  if (api.moduleLoadDataEx == nullptr) {
    Status loaded = [&]() -> Status {
      KILN_CU_CHECK(api.moduleLoadData(module, image.data));
      return Status::Ok();
    }();
    return withPrefix(loaded, "PTX JIT failed: ");
  }
  constexpr std::size_t kLogBytes = 8192;
  std::vector<char> log(kLogBytes, '\0');
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<std::uintptr_t>(kLogBytes))};
  Status loaded = [&]() -> Status {
    KILN_CU_CHECK(api.moduleLoadDataEx(module, image.data, 2, options, values));
    return Status::Ok();
  }();
  if (loaded.ok()) return loaded;
  const std::string text = trimLog(log.data(), kLogBytes);
  return Status(loaded.code(),
                "PTX JIT failed: " + loaded.message() + (text.empty() ? "" : "; JIT log: " + text));
}

// Unloads `module` in `context`; a failure poisons the variant.
Status unloadModule(const DriverApi& api, const kiln_variant& variant, CUcontext context,
                    CUmodule module) {
  Status status = [&]() -> Status {
    ScopedContext scope;
    KILN_RETURN_IF_ERROR(scope.push(api, context));
    KILN_CU_CHECK(api.moduleUnload(module));
    return scope.pop();
  }();
  if (!status.ok()) {
    poison(variantName(variant), status);
    status = withPrefix(status, std::string(variantName(variant)) +
                                    ": unloading its module failed, so it is now poisoned: ");
  }
  return status;
}

// Loads the module and looks up every entry, in `context`. On failure nothing stays loaded.
Status loadModule(const DriverApi& api, const kiln_variant& variant, const kiln_image& image,
                  CUcontext context, Module* m) {
  ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.push(api, context));
  CUmodule module = nullptr;
  KILN_RETURN_IF_ERROR(loadImageModule(api, image, &module));
  std::vector<CUfunction> functions(static_cast<std::size_t>(variant.num_entries), nullptr);
  for (int i = 0; i < variant.num_entries; ++i) {
    Status found = [&]() -> Status {
      KILN_CU_CHECK(api.moduleGetFunction(&functions[static_cast<std::size_t>(i)], module,
                                          variant.entries[i]));
      return Status::Ok();
    }();
    if (!found.ok()) {
      Status unloaded = unloadModule(api, variant, context, module);
      return withPrefix(found, std::string("entry ") + entryName(variant, i) + ": " +
                                   (unloaded.ok() ? "" : unloaded.message() + "; "));
    }
  }
  // Recorded before the pop, so that even a failed pop cannot leave an untracked module.
  m->module = module;
  m->functions = std::move(functions);
  m->shared_opt_in.assign(m->functions.size(), kDefaultDynamicSharedLimit);
  return scope.pop();
}

// The table entry for (variant, context), created empty if absent.
Status findModule(const kiln_variant& variant, CUcontext context, std::shared_ptr<Module>* out) {
  LoaderState& s = loader();
  std::lock_guard<std::mutex> lock(s.mu);
  auto poisoned = s.poisoned.find(variantName(variant));
  if (poisoned != s.poisoned.end()) return Status(StatusCode::kPoisoned, poisoned->second);
  std::shared_ptr<Module>& slot = s.modules[ModuleKey(&variant, context)];
  if (!slot) slot = std::make_shared<Module>();
  *out = slot;
  return Status::Ok();
}

Status setSharedOptIn(const DriverApi& api, CUcontext context, CUfunction function,
                      unsigned shared_bytes) {
  ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.push(api, context));
  KILN_CU_CHECK(api.funcSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     static_cast<int>(shared_bytes)));
  return scope.pop();
}

Status captureStatus(const DriverApi& api, Stream stream, CUstreamCaptureStatus* capture) {
  KILN_CU_CHECK(api.streamIsCapturing(stream, capture));
  return Status::Ok();
}

// Removes the entries that `match` selects and unloads their modules; the first error wins.
template <typename Match>
Status unloadMatching(Match match) {
  const DriverApi* api = nullptr;
  std::vector<std::pair<ModuleKey, std::shared_ptr<Module>>> victims;
  {
    LoaderState& s = loader();
    std::lock_guard<std::mutex> lock(s.mu);
    for (auto it = s.modules.begin(); it != s.modules.end();) {
      if (match(it->first)) {
        victims.emplace_back(it->first, std::move(it->second));
        it = s.modules.erase(it);
      } else {
        ++it;
      }
    }
  }
  if (victims.empty()) return Status::Ok();
  KILN_RETURN_IF_ERROR(acquireDriver(&api));
  Status first;
  for (auto& [key, m] : victims) {
    std::lock_guard<std::mutex> lock(m->mu);
    m->retired = true;
    if (m->module == nullptr) continue;
    Status status = unloadModule(*api, *key.first, key.second, m->module);
    m->module = nullptr;
    m->functions.clear();
    if (!status.ok() && first.ok()) first = status;
  }
  return first;
}

}  // namespace

Status loadImageModule(const DriverApi& api, const kiln_image& image, CUmodule* module) {
  if (image.ptx != 0) return loadPtx(api, image, module);
  KILN_CU_CHECK(api.moduleLoadData(module, image.data));
  return Status::Ok();
}

const char* variantName(const kiln_variant& variant) {
  return variant.name != nullptr ? variant.name : "<unnamed variant>";
}

const char* entryName(const kiln_variant& variant, int entry) {
  if (variant.entries == nullptr || entry < 0 || entry >= variant.num_entries ||
      variant.entries[entry] == nullptr)
    return "<unnamed entry>";
  return variant.entries[entry];
}

void poison(const std::string& name, const Status& why) {
  LoaderState& s = loader();
  std::lock_guard<std::mutex> lock(s.mu);
  s.poisoned.emplace(name, name +
                               " is poisoned: unloading its module failed earlier in this "
                               "process (" +
                               why.message() +
                               "), so the driver's state for it is unknown; restart the process");
}

Status checkNotPoisoned(const kiln_variant& variant) {
  LoaderState& s = loader();
  std::lock_guard<std::mutex> lock(s.mu);
  auto poisoned = s.poisoned.find(variantName(variant));
  if (poisoned != s.poisoned.end()) return Status(StatusCode::kPoisoned, poisoned->second);
  return Status::Ok();
}

Status acquireFunction(const DriverApi& api, const kiln_variant& variant, const kiln_image& image,
                       CUcontext context, Stream stream, int entry, unsigned shared_bytes,
                       CUfunction* function) {
  if (variant.num_entries < 0 || (variant.num_entries > 0 && variant.entries == nullptr))
    return Status(StatusCode::kInvalidArgument,
                  std::string(variantName(variant)) + ": variant lists " +
                      std::to_string(variant.num_entries) + " entries but its entry table is " +
                      (variant.entries == nullptr ? "null" : "present"));
  if (image.data == nullptr)
    return Status(StatusCode::kInvalidArgument, imageLabel(variant, image) + "image data is null");
  if (entry < -1 || entry >= variant.num_entries)
    return Status(StatusCode::kInvalidArgument,
                  std::string(variantName(variant)) + ": entry " + std::to_string(entry) +
                      " is out of range; the variant has " + std::to_string(variant.num_entries) +
                      " entries");

  for (;;) {
    std::shared_ptr<Module> m;
    KILN_RETURN_IF_ERROR(findModule(variant, context, &m));
    std::lock_guard<std::mutex> lock(m->mu);
    if (m->retired) continue;  // unloaded between the lookup and the lock: look it up again

    if (m->module == nullptr) {
      CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
      Status checked = captureStatus(api, stream, &capture);
      if (!checked.ok()) return withPrefix(checked, imageLabel(variant, image));
      if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return Status(StatusCode::kCaptureRefused,
                      std::string(variantName(variant)) +
                          ": its module is not loaded in this context yet, and loading is not "
                          "allowed while the stream is being captured; launch it once, or call "
                          "kiln::preload, before capture begins");
      Status loaded = loadModule(api, variant, image, context, m.get());
      if (!loaded.ok()) return withPrefix(loaded, imageLabel(variant, image));
    }
    if (entry < 0) return Status::Ok();

    const std::size_t index = static_cast<std::size_t>(entry);
    if (shared_bytes > m->shared_opt_in[index]) {
      Status opted = setSharedOptIn(api, context, m->functions[index], shared_bytes);
      if (!opted.ok())
        return withPrefix(opted, std::string(variantName(variant)) + " entry " +
                                     entryName(variant, entry) + ": opting into " +
                                     std::to_string(shared_bytes) +
                                     " bytes of dynamic shared memory: ");
      m->shared_opt_in[index] = shared_bytes;
    }
    *function = m->functions[index];
    return Status::Ok();
  }
}

void resetLoaderForTesting() {
  LoaderState& s = loader();
  std::lock_guard<std::mutex> lock(s.mu);
  s.modules.clear();
  s.poisoned.clear();
}

}  // namespace kiln::detail

namespace kiln {

Status unloadAll() {
  return detail::unloadMatching([](const detail::ModuleKey&) { return true; });
}

Status unloadContext(CUctx_st* context) {
  return detail::unloadMatching(
      [context](const detail::ModuleKey& key) { return key.second == context; });
}

bool isPoisoned(const char* name) {
  if (name == nullptr) return false;
  detail::LoaderState& s = detail::loader();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.poisoned.count(name) != 0;
}

}  // namespace kiln
