// bin/kiln-doctor: the doctor of one artifact, for the machine the artifact runs on. `kiln build`
// compiles this file with the artifact's host compiler and links it with the artifact's own
// lib/libkiln.a (the runtime, every variant and its images, the artifact table) and the C and C++
// runtimes only: so it starts on a GPU machine or a Jetson that has no kiln, no libarchive and no
// CUDA toolkit, only the NVIDIA driver (libcuda.so.1, dlopen-ed by the runtime). It asks
// the runtime's doctor (kiln/runtime.h) about every variant of kiln_artifact_variants() on every
// visible device, or on --device N only: each variant's image is selected as a launch selects it,
// loaded into the device's primary context and its entry kernels looked up, so what it reports
// runnable is what a runner can launch.
//
// Exit codes, as `kiln doctor`'s: 0 every variant runs on every device checked; 1 some variant
// does not (its reason is printed); 2 a usage error; 3 no driver, no device, or a driver call
// failed.
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "kiln/kiln_all.h"
#include "kiln/runtime.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitNotRunnable = 1;
constexpr int kExitUsage = 2;
constexpr int kExitEnvironment = 3;

#if defined(__aarch64__)
constexpr const char kArch[] = "aarch64";
#elif defined(__x86_64__)
constexpr const char kArch[] = "x86_64";
#else
constexpr const char kArch[] = "unknown";
#endif

constexpr const char kUsage[] =
    "usage: kiln-doctor [--device N]\n"
    "Loads every variant of this artifact on each visible CUDA device (or device N only) and\n"
    "says which run and why the others do not. Exit 0: all run; 1: some do not; 2: usage error;\n"
    "3: no driver or device.\n";

int usageError(const std::string& message) {
  std::fprintf(stderr, "kiln-doctor: %s\n%s", message.c_str(), kUsage);
  return kExitUsage;
}

// A device ordinal: decimal digits only, at most INT_MAX.
bool parseOrdinal(const char* text, int* out) {
  if (text == nullptr || *text == '\0') return false;
  for (const char* c = text; *c != '\0'; ++c)
    if (*c < '0' || *c > '9') return false;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value > 2147483647L) return false;
  *out = static_cast<int>(value);
  return true;
}

// Prints one device's report; returns how many variants do not run on it.
int printReport(const kiln::DoctorReport& report) {
  std::printf("device %d: %s (sm_%d, %d SMs), driver %d.%d\n", report.device.ordinal,
              report.device.name.c_str(), report.device.sm, report.device.multiprocessors,
              report.driver_version / 1000, (report.driver_version % 1000) / 10);
  int failed = 0;
  for (const kiln::VariantReport& v : report.variants) {
    if (v.runnable && v.image_ptx) {
      std::printf("  %-40s runnable (compute_%d PTX image, JIT-compiled by the driver)\n",
                  v.name.c_str(), v.image_sm);
    } else if (v.runnable) {
      std::printf("  %-40s runnable (sm_%d image)\n", v.name.c_str(), v.image_sm);
    } else {
      ++failed;
      std::printf("  %-40s NOT runnable: %s\n", v.name.c_str(), v.reason.c_str());
    }
  }
  std::printf("device %d: %zu of %zu variants runnable\n", report.device.ordinal,
              report.variants.size() - static_cast<std::size_t>(failed), report.variants.size());
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  int only_device = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return kExitOk;
    }
    if (arg == "--device" || arg.rfind("--device=", 0) == 0) {
      const char* value = nullptr;
      if (arg == "--device") {
        if (i + 1 >= argc) return usageError("--device needs a device ordinal");
        value = argv[++i];
      } else {
        value = argv[i] + std::strlen("--device=");
      }
      if (!parseOrdinal(value, &only_device))
        return usageError("--device '" + std::string(value) +
                          "' is not a device ordinal (a number from 0 to 2147483647)");
      continue;
    }
    return usageError("unknown argument '" + arg + "'");
  }

  std::size_t count = 0;
  const kiln_variant* const* table = kiln_artifact_variants(&count);
  const std::span<const kiln_variant* const> variants(table, count);
  std::printf("kiln-doctor: artifact %s (%s), fingerprint %s, %zu variant%s\n", kiln_artifact_tag(),
              kArch, kiln_artifact_fingerprint(), count, count == 1 ? "" : "s");

  // The report so far before any error, also when stdout is a file (block buffered).
  std::fflush(stdout);
  int devices = 0;
  if (kiln::Status s = kiln::deviceCount(&devices); !s.ok()) {
    std::fprintf(stderr, "kiln-doctor: %s\n", s.toString().c_str());
    return kExitEnvironment;
  }
  if (devices == 0) {
    std::fprintf(stderr, "kiln-doctor: the driver shows no CUDA device (CUDA_VISIBLE_DEVICES?)\n");
    return kExitEnvironment;
  }
  if (only_device >= devices) {
    std::fprintf(stderr, "kiln-doctor: --device %d is out of range; %d CUDA device%s present\n",
                 only_device, devices, devices == 1 ? "" : "s");
    return kExitUsage;
  }
  int first = only_device >= 0 ? only_device : 0;
  int last = only_device >= 0 ? only_device : devices - 1;
  int not_runnable = 0;
  for (int ordinal = first; ordinal <= last; ++ordinal) {
    kiln::DoctorReport report;
    if (kiln::Status s = kiln::doctor(variants, ordinal, &report); !s.ok()) {
      std::fflush(stdout);
      std::fprintf(stderr, "kiln-doctor: device %d: %s\n", ordinal, s.toString().c_str());
      return kExitEnvironment;
    }
    not_runnable += printReport(report);
  }
  return not_runnable == 0 ? kExitOk : kExitNotRunnable;
}
