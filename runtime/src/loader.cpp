// The module table: per CUDA context kiln has seen, one entry per variant launched there, loaded on
// first use and kept until unloadAll/unloadContext. Lazy loading keeps start-up cheap and loads
// only the variants a process uses; one entry per context because a CUmodule belongs to the
// context it was loaded in. A PTX image loads the same way (the driver JIT-compiles it inside the
// load); a failed JIT is a failed load: nothing stays loaded, the next launch tries again, and only
// a failed unload poisons.
//
// Why the layout: a runner launches on every call of its run(), so a launch of a loaded variant
// must cost no lock and no driver call (kiln/loader.h). Hence:
//   - Contexts are records in a list that only grows (a forgotten one is reused, never freed),
//     found by comparing one atomic per record; a StreamTarget carries its record, so a launch
//     does not even search.
//   - A context's modules are an open-addressing table from the variant's address to its entry,
//     read with atomic loads; a writer fills an empty slot, or publishes a bigger copy and keeps
//     the old array alive for readers still probing it. Entries are never freed while the record
//     lives, so a pointer read from the table stays valid.
//   - An entry's state (loaded, poisoned) is one atomic word: a launch reads it once; its
//     functions and image, written before it says "loaded", are then read without a lock.
// Locks remain for what is rare: Registry::mu for adding a context, an entry or a poison;
// Module::mu to serialise one entry's load, opt-in and unload, so concurrent first launches load
// once while launches of other variants go on.
#include "loader.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "device.h"
#include "kiln/loader.h"

namespace kiln::detail {
namespace {

// Launches with more dynamic shared memory than this must opt in per function.
constexpr unsigned kDefaultDynamicSharedLimit = 48 * 1024;

// Module::flags.
constexpr unsigned kLoaded = 1;
constexpr unsigned kPoisoned = 2;

// What poisons a name: shared by the module entries of every variant of that name, in every
// context (a name is what isPoisoned and the messages know a variant by).
struct VariantRecord {
  explicit VariantRecord(std::string n) : name(std::move(n)) {}
  const std::string name;
  bool poisoned = false;  // guarded by Registry::mu
  std::string message;    // the kPoisoned message, once poisoned
};

// One variant in one context.
struct Module {
  Module(const kiln_variant& v, VariantRecord* r)
      : variant(&v),
        record(r),
        functions(new CUfunction[static_cast<std::size_t>(v.num_entries)]()),
        shared_opt_in(new std::atomic<unsigned>[static_cast<std::size_t>(v.num_entries)]) {
    for (int i = 0; i < v.num_entries; ++i) shared_opt_in[i].store(kDefaultDynamicSharedLimit);
  }
  const kiln_variant* const variant;
  VariantRecord* const record;
  std::atomic<unsigned> flags{0};  // kLoaded | kPoisoned
  std::mutex mu;                   // serialises this entry's load, opt-in and unload
  // Written under mu before kLoaded is set (release); read without the lock by a launch that saw
  // kLoaded (acquire). Unloading must not race with launches in the context (kiln/loader.h).
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  int image_sm = 0;
  // Per entry, sized once (a variant's entry count never changes): the function, and the dynamic
  // shared bytes opted into so far.
  const std::unique_ptr<CUfunction[]> functions;
  const std::unique_ptr<std::atomic<unsigned>[]> shared_opt_in;
};

std::size_t hashVariant(const kiln_variant* v) {
  // Variants are static tables a few dozen bytes apart: mix the address (Fibonacci hashing).
  const auto bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(v));
  return static_cast<std::size_t>((bits * 0x9E3779B97F4A7C15ULL) >> 32);
}

// variant -> Module of one context, read without a lock (see the file comment). Written under
// Registry::mu only; at most half full, so a probe always reaches an empty slot.
class ModuleTable {
 public:
  ModuleTable() { publish(16); }

  Module* find(const kiln_variant* v) const {
    const Slots* t = slots_.load(std::memory_order_acquire);
    for (std::size_t i = hashVariant(v) & t->mask;; i = (i + 1) & t->mask) {
      const kiln_variant* key = t->slot[i].key.load(std::memory_order_acquire);
      if (key == v) return t->slot[i].module.load(std::memory_order_relaxed);
      if (key == nullptr) return nullptr;
    }
  }

  // Adds `m` for `v` (absent); the caller holds Registry::mu.
  void insert(const kiln_variant* v, std::unique_ptr<Module> m) {
    if (2 * (modules_.size() + 1) > slots_.load(std::memory_order_relaxed)->mask + 1)
      publish(2 * (slots_.load(std::memory_order_relaxed)->mask + 1));
    place(*slots_.load(std::memory_order_relaxed), v, m.get());
    modules_.push_back(std::move(m));
  }

  // Every entry; the caller holds Registry::mu.
  const std::vector<std::unique_ptr<Module>>& modules() const { return modules_; }

 private:
  struct Slot {
    std::atomic<const kiln_variant*> key{nullptr};
    std::atomic<Module*> module{nullptr};
  };
  struct Slots {
    explicit Slots(std::size_t n) : mask(n - 1), slot(new Slot[n]) {}
    const std::size_t mask;
    const std::unique_ptr<Slot[]> slot;
  };

  // The module first, the key last (release): a reader that finds the key finds the module.
  static void place(Slots& t, const kiln_variant* v, Module* m) {
    std::size_t i = hashVariant(v) & t.mask;
    while (t.slot[i].key.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & t.mask;
    t.slot[i].module.store(m, std::memory_order_relaxed);
    t.slot[i].key.store(v, std::memory_order_release);
  }

  // A new array of `n` slots holding every entry, published whole; the old one stays readable.
  void publish(std::size_t n) {
    auto t = std::make_unique<Slots>(n);
    for (const auto& m : modules_) place(*t, m->variant, m.get());
    slots_.store(t.get(), std::memory_order_release);
    arrays_.push_back(std::move(t));
  }

  std::atomic<Slots*> slots_{nullptr};
  std::vector<std::unique_ptr<Slots>> arrays_;    // every array ever published, the current last
  std::vector<std::unique_ptr<Module>> modules_;  // the entries, owned
};

}  // namespace

// A StreamTarget's `state`: one context kiln has seen, its device and its module table.
struct ContextState {
  // Null while the record is free (never used, or forgotten by unloadContext): then it may be
  // claimed for another context. Published last (release), after `device`.
  std::atomic<CUcontext> context{nullptr};
  std::atomic<const DeviceInfo*> device{nullptr};
  ModuleTable modules;
  ContextState* next = nullptr;  // the registry's list; set before the record is published
};

namespace {

struct Registry {
  // Guards every change of the lists, tables and records below; taken after a Module::mu, never
  // before one. Readers of `contexts` and of the tables take no lock.
  std::mutex mu;
  std::atomic<ContextState*> contexts{nullptr};  // a list that only grows at its head
  std::vector<std::unique_ptr<ContextState>> owned;
  std::map<std::string, std::unique_ptr<VariantRecord>, std::less<>> records;  // by name
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: usable from static destructors
  return *r;
}

ContextState* findKnown(CUcontext context) {
  for (ContextState* s = registry().contexts.load(std::memory_order_acquire); s != nullptr;
       s = s->next) {
    if (s->context.load(std::memory_order_acquire) == context) return s;
  }
  return nullptr;
}

// The record of `name`, created if absent; the caller holds Registry::mu.
VariantRecord* recordFor(Registry& r, const std::string& name) {
  auto it = r.records.find(name);
  if (it == r.records.end())
    it = r.records.emplace(name, std::make_unique<VariantRecord>(name)).first;
  return it->second.get();
}

// The entry of `variant` in `state`, created (poisoned if its name is) when absent.
Module* findModule(ContextState& state, const kiln_variant& variant) {
  if (Module* m = state.modules.find(&variant)) return m;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (Module* m = state.modules.find(&variant)) return m;
  VariantRecord* record = recordFor(r, variantName(variant));
  auto m = std::make_unique<Module>(variant, record);
  if (record->poisoned) m->flags.store(kPoisoned, std::memory_order_relaxed);
  Module* found = m.get();
  state.modules.insert(&variant, std::move(m));
  return found;
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

// Unloads `module` in the current context; a failure poisons the variant.
Status unloadCurrent(const DriverApi& api, const kiln_variant& variant, CUmodule module) {
  Status status = [&]() -> Status {
    KILN_CU_CHECK(api.moduleUnload(module));
    return Status::Ok();
  }();
  if (!status.ok()) {
    poison(variantName(variant), status);
    status = withPrefix(status, std::string(variantName(variant)) +
                                    ": unloading its module failed, so it is now poisoned: ");
  }
  return status;
}

// Loads the module and looks up every entry, in the current context, into `m` (under m->mu).
// On failure nothing stays loaded.
Status loadModule(const DriverApi& api, const kiln_variant& variant, const kiln_image& image,
                  CUcontext context, Module* m) {
  CUmodule module = nullptr;
  KILN_RETURN_IF_ERROR(loadImageModule(api, image, &module));
  for (int i = 0; i < variant.num_entries; ++i) {
    Status found = [&]() -> Status {
      KILN_CU_CHECK(api.moduleGetFunction(&m->functions[i], module, variant.entries[i]));
      return Status::Ok();
    }();
    if (!found.ok()) {
      Status unloaded = unloadCurrent(api, variant, module);
      return withPrefix(found, std::string("entry ") + entryName(variant, i) + ": " +
                                   (unloaded.ok() ? "" : unloaded.message() + "; "));
    }
  }
  m->context = context;
  m->module = module;
  m->image_sm = image.sm;
  for (int i = 0; i < variant.num_entries; ++i)
    m->shared_opt_in[i].store(kDefaultDynamicSharedLimit, std::memory_order_relaxed);
  m->flags.fetch_or(kLoaded, std::memory_order_release);
  return Status::Ok();
}

// kPoisoned with the record's message when `m` is poisoned; the caller holds m->mu.
Status checkModule(const Module& m) {
  if ((m.flags.load(std::memory_order_acquire) & kPoisoned) == 0) return Status::Ok();
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return Status(StatusCode::kPoisoned, m.record->message);
}

// The part of acquireFunction that runs with the target's context pushed, under m->mu.
Status acquireLocked(const DriverApi& api, const StreamTarget& target, const DeviceInfo& device,
                     const kiln_variant& variant, int entry, unsigned shared_bytes, Module* m) {
  if ((m->flags.load(std::memory_order_relaxed) & kLoaded) == 0) {
    const kiln_image* image = nullptr;
    KILN_RETURN_IF_ERROR(selectImage(variant, device.sm, &image));
    if (variant.cuda_version > 0) {
      int driver_version = 0;
      Status asked = [&]() -> Status {
        KILN_CU_CHECK(api.driverGetVersion(&driver_version));
        return Status::Ok();
      }();
      if (!asked.ok()) return withPrefix(asked, imageLabel(variant, *image));
      KILN_RETURN_IF_ERROR(checkDriverVersion(variant, *image, driver_version));
    }
    if (image->data == nullptr)
      return Status(StatusCode::kInvalidArgument,
                    imageLabel(variant, *image) + "image data is null");
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    Status checked = [&]() -> Status {
      KILN_CU_CHECK(api.streamIsCapturing(target.stream, &capture));
      return Status::Ok();
    }();
    if (!checked.ok()) return withPrefix(checked, imageLabel(variant, *image));
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE)
      return Status(StatusCode::kCaptureRefused,
                    std::string(variantName(variant)) +
                        ": its module is not loaded in this context yet, and loading is not "
                        "allowed while the stream is being captured; launch it once, or call "
                        "kiln::preload, before capture begins");
    Status loaded = loadModule(api, variant, *image, target.context, m);
    if (!loaded.ok()) return withPrefix(loaded, imageLabel(variant, *image));
  }
  if (entry < 0) return Status::Ok();
  if (shared_bytes > m->shared_opt_in[entry].load(std::memory_order_relaxed)) {
    Status opted = [&]() -> Status {
      KILN_CU_CHECK(api.funcSetAttribute(m->functions[entry],
                                         CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(shared_bytes)));
      return Status::Ok();
    }();
    if (!opted.ok())
      return withPrefix(opted, std::string(variantName(variant)) + " entry " +
                                   entryName(variant, entry) + ": opting into " +
                                   std::to_string(shared_bytes) +
                                   " bytes of dynamic shared memory: ");
    m->shared_opt_in[entry].store(shared_bytes, std::memory_order_release);
  }
  return Status::Ok();
}

// Unloads the entries of the contexts `match` selects; with `forget`, those contexts' records are
// freed for other contexts first. The first error wins.
template <typename Match>
Status unloadMatching(Match match, bool forget) {
  std::vector<Module*> victims;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (ContextState* s = r.contexts.load(std::memory_order_relaxed); s != nullptr; s = s->next) {
      CUcontext context = s->context.load(std::memory_order_relaxed);
      if (context == nullptr || !match(context)) continue;
      for (const auto& m : s->modules.modules()) victims.push_back(m.get());
      if (forget) s->context.store(nullptr, std::memory_order_release);
    }
  }
  bool loaded = false;
  for (Module* m : victims)
    loaded = loaded || (m->flags.load(std::memory_order_acquire) & kLoaded) != 0;
  if (!loaded) return Status::Ok();
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(acquireDriver(&api));
  Status first;
  for (Module* m : victims) {
    std::lock_guard<std::mutex> lock(m->mu);
    if ((m->flags.load(std::memory_order_relaxed) & kLoaded) == 0) continue;
    m->flags.fetch_and(~kLoaded, std::memory_order_release);
    Status status = [&]() -> Status {
      ScopedContext scope;
      KILN_RETURN_IF_ERROR(scope.push(*api, m->context));
      KILN_RETURN_IF_ERROR(unloadCurrent(*api, *m->variant, m->module));
      return scope.pop();
    }();
    m->module = nullptr;
    if (!status.ok() && first.ok()) first = status;
  }
  return first;
}

}  // namespace

Status findContext(const DriverApi& api, CUcontext context, ContextState** state,
                   const DeviceInfo** device) {
  if (ContextState* s = findKnown(context)) {
    *state = s;
    *device = s->device.load(std::memory_order_relaxed);
    return Status::Ok();
  }
  // First sight: ask for the device outside the lock (it is the same answer for every thread).
  CUdevice ordinal = 0;
  KILN_RETURN_IF_ERROR(deviceOfContext(api, context, &ordinal));
  const DeviceInfo* info = nullptr;
  KILN_RETURN_IF_ERROR(deviceInfo(api, ordinal, &info));
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  ContextState* s = findKnown(context);
  if (s == nullptr) {
    for (ContextState* free = r.contexts.load(std::memory_order_relaxed); free != nullptr;
         free = free->next) {
      if (free->context.load(std::memory_order_relaxed) == nullptr) {
        s = free;
        break;
      }
    }
    if (s == nullptr) {
      r.owned.push_back(std::make_unique<ContextState>());
      s = r.owned.back().get();
      s->next = r.contexts.load(std::memory_order_relaxed);
      r.contexts.store(s, std::memory_order_release);
    }
    s->device.store(info, std::memory_order_relaxed);
    s->context.store(context, std::memory_order_release);
  }
  *state = s;
  *device = s->device.load(std::memory_order_relaxed);
  return Status::Ok();
}

bool findLoaded(const StreamTarget& target, const kiln_variant& variant, int entry,
                unsigned shared_bytes, LoadedFunction* out) {
  const ContextState* s = target.state;
  // A record forgotten (and maybe reused) since the resolve is not the target's any more.
  if (s == nullptr || s->context.load(std::memory_order_relaxed) != target.context) return false;
  const Module* m = s->modules.find(&variant);
  if (m == nullptr || m->flags.load(std::memory_order_acquire) != kLoaded) return false;
  if (shared_bytes > m->shared_opt_in[entry].load(std::memory_order_acquire)) return false;
  out->function = m->functions[entry];
  out->image_sm = m->image_sm;
  return true;
}

Status acquireFunction(const DriverApi& api, const StreamTarget& target,
                       const kiln_variant& variant, int entry, unsigned shared_bytes,
                       LoadedFunction* out) {
  if (variant.num_entries < 0 || (variant.num_entries > 0 && variant.entries == nullptr))
    return Status(StatusCode::kInvalidArgument,
                  std::string(variantName(variant)) + ": variant lists " +
                      std::to_string(variant.num_entries) + " entries but its entry table is " +
                      (variant.entries == nullptr ? "null" : "present"));
  if (entry < -1 || entry >= variant.num_entries)
    return Status(StatusCode::kInvalidArgument,
                  std::string(variantName(variant)) + ": entry " + std::to_string(entry) +
                      " is out of range; the variant has " + std::to_string(variant.num_entries) +
                      " entries");
  // The record found again, not the target's: that one may have been forgotten since.
  ContextState* state = nullptr;
  const DeviceInfo* device = nullptr;
  KILN_RETURN_IF_ERROR(findContext(api, target.context, &state, &device));
  Module* m = findModule(*state, variant);
  std::lock_guard<std::mutex> lock(m->mu);
  KILN_RETURN_IF_ERROR(checkModule(*m));
  // Pushed whatever the target says is current: this path is rare, and so always right.
  ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.push(api, target.context));
  KILN_RETURN_IF_ERROR(acquireLocked(api, target, *device, variant, entry, shared_bytes, m));
  KILN_RETURN_IF_ERROR(scope.pop());
  if (entry >= 0 && out != nullptr) {
    out->function = m->functions[entry];
    out->image_sm = m->image_sm;
  }
  return Status::Ok();
}

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
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  VariantRecord* record = recordFor(r, name);
  if (!record->poisoned) {
    record->poisoned = true;
    record->message = name + " is poisoned: unloading its module failed earlier in this process (" +
                      why.message() +
                      "), so the driver's state for it is unknown; restart the process";
  }
  for (ContextState* s = r.contexts.load(std::memory_order_relaxed); s != nullptr; s = s->next) {
    for (const auto& m : s->modules.modules()) {
      if (m->record == record) m->flags.fetch_or(kPoisoned, std::memory_order_release);
    }
  }
}

Status checkNotPoisoned(const kiln_variant& variant) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.records.find(std::string_view(variantName(variant)));
  if (it != r.records.end() && it->second->poisoned)
    return Status(StatusCode::kPoisoned, it->second->message);
  return Status::Ok();
}

void resetLoaderState() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.contexts.store(nullptr, std::memory_order_release);
  r.owned.clear();
  r.records.clear();
}

}  // namespace kiln::detail

namespace kiln {

Status unloadAll() {
  return detail::unloadMatching([](CUcontext) { return true; }, /*forget=*/false);
}

Status unloadContext(CUctx_st* context) {
  return detail::unloadMatching([context](CUcontext c) { return c == context; },
                                /*forget=*/true);
}

bool isPoisoned(const char* name) {
  if (name == nullptr) return false;
  detail::Registry& r = detail::registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.records.find(std::string_view(name));
  return it != r.records.end() && it->second->poisoned;
}

}  // namespace kiln
