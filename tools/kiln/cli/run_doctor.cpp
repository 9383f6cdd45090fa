// runDoctor (see run_doctor.h). A PTX image is handed to the runtime NUL-terminated and marked
// ptx, as the generated shim does (codegen.h), so the driver JIT-compiles it.
#include "cli/run_doctor.h"

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/codegen.h"
#include "core/naming.h"
#include "core/report.h"
#include "core/tarball.h"
#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::cli {

core::Result<DoctorReport> runDoctor(const fs::path& dir, int ordinal) {
  auto metadata = core::loadArtifactMetadata(dir);
  if (!metadata) return metadata.failure();
  // Owning storage for the C tables; deque keeps element addresses stable.
  std::deque<std::string> strings;
  std::deque<std::string> blobs;
  std::deque<std::vector<const char*>> entry_tables;
  std::deque<std::vector<kiln_image>> image_tables;
  std::deque<kiln_variant> variants;
  std::vector<const kiln_variant*> pointers;
  // Every image is checked before any is handed to the runtime: its path is the one verify
  // expects (cubins/<variant>.sm_<NN>.cubin, so metadata cannot point at /dev/zero or outside the
  // artifact), it is a regular file (no link, FIFO or device) of the recorded size, and its sha256
  // is the recorded one.
  std::map<std::pair<std::string, int>, std::string> loaded;
  for (const auto& [name, v] : metadata->variants) {
    for (const auto& [sm, image] : v.images) {
      const std::string expected = core::imagePath(name, sm, image.isPtx());
      if (image.cubin != expected) {
        return core::makeError(fmt::format(
            "{}: metadata.json: variant {} sm_{} records image '{}', expected '{}'; not loading it",
            dir.string(), name, sm, image.cubin, expected));
      }
      const fs::path path = dir / image.cubin;
      auto bytes = io::readRegularFile(
          path, std::min(image.size, core::TarLimits{}.max_entry_bytes), io::Links::kRefuse);
      if (!bytes) return bytes.failure();
      if (bytes->size() != image.size) {
        return core::makeError(
            fmt::format("{}: {} bytes, metadata.json records {}; the artifact "
                        "was modified",
                        path.string(), bytes->size(), image.size));
      }
      if (io::sha256Hex(*bytes) != image.sha256) {
        return core::makeError(
            fmt::format("{}: sha256 differs from metadata.json ({}); the artifact was modified",
                        path.string(), image.sha256));
      }
      loaded.emplace(std::pair(name, sm), std::move(bytes).value());
    }
  }
  for (const auto& [name, v] : metadata->variants) {
    auto& entries = entry_tables.emplace_back();
    for (const auto& e : v.entries) entries.push_back(strings.emplace_back(e).c_str());
    auto& images = image_tables.emplace_back();
    for (const auto& [sm, image] : v.images) {
      // A std::string's data() is NUL-terminated, which a PTX image needs (kiln/variant.h);
      // size excludes that NUL, as in the generated shim.
      const std::string& blob = blobs.emplace_back(std::move(loaded.at({name, sm})));
      images.push_back({sm, image.archSpecific() ? 1 : 0,
                        reinterpret_cast<const unsigned char*>(blob.data()), blob.size(),
                        strings.emplace_back(image.sha256).c_str(), image.isPtx() ? 1 : 0});
    }
    variants.push_back({strings.emplace_back(name).c_str(), strings.emplace_back(v.group).c_str(),
                        entries.data(), static_cast<int>(entries.size()), images.data(),
                        static_cast<int>(images.size()),
                        core::cudaVersionNumber(metadata->provenance.cuda_version)});
    pointers.push_back(&variants.back());
  }
  DoctorReport report;
  kiln::Status status = kiln::doctor(pointers, ordinal, &report);
  if (!status.ok()) return core::makeError(status.toString(), core::ErrorKind::kEnvironment);
  return report;
}

}  // namespace kiln::cli
