// selectImage: which of a variant's images runs on a device of a given SM. The rule is the
// driver's own compatibility rule, so that "supported?" here and "will it load?" on the device
// never disagree. SASS (cubins) first, by the binary-compatibility rule:
//   - an image for the exact SM runs (an arch-specific sm_NNa image is preferred to a plain one);
//   - a plain (not arch-specific) image runs on a newer minor of the same major (sm_80 on sm_86,
//     sm_87, sm_89), and the newest such minor is picked;
//   - nothing runs across majors (sm_80 does not run on sm_90), and an arch-specific image runs
//     on its own SM only (sm_90a does not run on a later sm_9x).
// Only when no SASS image runs, PTX (compute_NN, JIT-compiled by the driver at load): a PTX image
// runs on any device of its SM or newer, across majors (compute_80 on sm_90, sm_120), and the
// newest such is picked; PTX for a newer SM than the device's never runs. kiln builds no
// arch-specific PTX (compute_90a would JIT on sm_90 only), so PTX has no arch-specific case.
// SASS wins over PTX because it is what ptxas compiled and kiln measured for that SM, and a JIT
// costs time at the first load of every process.
#include <string>

#include "device.h"
#include "kiln/runtime.h"

namespace kiln {

Status selectImage(const kiln_variant& variant, int device_sm, const kiln_image** out) {
  const char* name = variant.name != nullptr ? variant.name : "<unnamed variant>";
  if (out == nullptr)
    return Status(StatusCode::kInvalidArgument, std::string(name) + ": selectImage out is null");
  if (device_sm <= 0)
    return Status(StatusCode::kInvalidArgument,
                  std::string(name) + ": device SM " + std::to_string(device_sm) +
                      " is not a valid SM (10 * major + minor, e.g. 90)");
  if (variant.num_images < 0 || (variant.num_images > 0 && variant.images == nullptr))
    return Status(StatusCode::kInvalidArgument,
                  std::string(name) + ": variant lists " + std::to_string(variant.num_images) +
                      " images but its image table is " +
                      (variant.images == nullptr ? "null" : "present"));

  const kiln_image* exact = nullptr;
  const kiln_image* same_major = nullptr;
  const kiln_image* ptx = nullptr;
  for (int i = 0; i < variant.num_images; ++i) {
    const kiln_image& image = variant.images[i];
    if (image.ptx != 0) {
      if (image.sm <= device_sm && (ptx == nullptr || image.sm > ptx->sm)) ptx = &image;
    } else if (image.sm == device_sm) {
      if (exact == nullptr || (image.arch_specific != 0 && exact->arch_specific == 0))
        exact = &image;
    } else if (image.arch_specific == 0 && image.sm / 10 == device_sm / 10 &&
               image.sm < device_sm) {
      if (same_major == nullptr || image.sm > same_major->sm) same_major = &image;
    }
  }
  if (exact != nullptr || same_major != nullptr || ptx != nullptr) {
    *out = exact != nullptr ? exact : same_major != nullptr ? same_major : ptx;
    return Status::Ok();
  }

  std::string message = std::string(name) + ": artifact has ";
  if (variant.num_images == 0) {
    message += "no images";
  } else {
    for (int i = 0; i < variant.num_images; ++i) {
      if (i > 0) message += ", ";
      message += detail::imageName(variant.images[i]);
    }
    message += " only";
  }
  message += "; device is " + detail::smName(device_sm);
  return Status(StatusCode::kNoKernelImage, std::move(message));
}

namespace {

// 12060 -> "12.6", as CUDA names its versions.
std::string versionName(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace

Status checkDriverVersion(const kiln_variant& variant, const kiln_image& image,
                          int driver_version) {
  const int built = variant.cuda_version;
  if (built <= 0 || driver_version <= 0) return Status::Ok();
  const bool newer_major = built / 1000 > driver_version / 1000;
  const bool newer_ptx =
      image.ptx != 0 && built / 1000 == driver_version / 1000 && built > driver_version;
  if (!newer_major && !newer_ptx) return Status::Ok();
  const int driver_major = driver_version / 1000;
  std::string message = std::string(variant.name != nullptr ? variant.name : "<unnamed variant>") +
                        ": artifact built with CUDA " + versionName(built) + "; driver supports " +
                        versionName(driver_version) + "; ";
  if (newer_ptx) {
    message += "its " + detail::imageName(image) + " image needs a driver of CUDA " +
               versionName(built) +
               " or newer to JIT-compile it; update the driver or use a cubin for this SM";
  } else if (driver_major >= 12) {
    message += "use the cuda" + std::to_string(driver_major) + " tarball or update the driver";
  } else {
    message += "update the driver (kiln builds for CUDA 12 and 13)";
  }
  return Status(StatusCode::kDriverTooOld, std::move(message));
}

}  // namespace kiln
