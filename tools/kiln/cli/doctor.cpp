// `kiln doctor <artifact-dir>`: the runtime's doctor report for this machine's GPU. Exit 0 when
// every variant is runnable, 1 when some are not, 3 when there is no driver or device.
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/run_doctor.h"

namespace kiln::cli {

Handler setupDoctor(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  auto device = std::make_shared<int>(0);
  app.add_option("artifact-dir", *dir, "an artifact directory (artifacts/<arch>/<tag>)")
      ->required();
  app.add_option("--device", *device, "CUDA device ordinal")->capture_default_str();
  return [dir, device]() -> int {
    auto report = runDoctor(*dir, *device);
    if (!report) return reportError(report);
    fmt::print("device {}: {} (sm_{}, {} SMs), driver {}.{}\n", report->device.ordinal,
               report->device.name, report->device.sm, report->device.multiprocessors,
               report->driver_version / 1000, (report->driver_version % 1000) / 10);
    int failed = 0;
    for (const auto& v : report->variants) {
      if (v.runnable) {
        if (v.image_ptx) {
          fmt::print("  {:<40} runnable (compute_{} PTX image, JIT-compiled by the driver)\n",
                     v.name, v.image_sm);
        } else {
          fmt::print("  {:<40} runnable (sm_{} image)\n", v.name, v.image_sm);
        }
      } else {
        ++failed;
        fmt::print("  {:<40} NOT runnable: {}\n", v.name, v.reason);
      }
    }
    fmt::print("{} of {} variants runnable\n",
               report->variants.size() - static_cast<size_t>(failed), report->variants.size());
    return failed == 0 ? kExitOk : kExitFailure;
  };
}

}  // namespace kiln::cli
