// selectImage: which of a variant's cubins runs on a device of a given SM. The rule is the
// driver's own binary-compatibility rule, so that "supported?" here and "will it load?" on the
// device never disagree:
//   - an image for the exact SM runs (an arch-specific sm_NNa image is preferred to a plain one);
//   - a plain (not arch-specific) image runs on a newer minor of the same major (sm_80 on sm_86,
//     sm_87, sm_89), and the newest such minor is picked;
//   - nothing runs across majors (sm_80 does not run on sm_90), and an arch-specific image runs
//     on its own SM only (sm_90a does not run on a later sm_9x).
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
  for (int i = 0; i < variant.num_images; ++i) {
    const kiln_image& image = variant.images[i];
    if (image.sm == device_sm) {
      if (exact == nullptr || (image.arch_specific != 0 && exact->arch_specific == 0))
        exact = &image;
    } else if (image.arch_specific == 0 && image.sm / 10 == device_sm / 10 &&
               image.sm < device_sm) {
      if (same_major == nullptr || image.sm > same_major->sm) same_major = &image;
    }
  }
  if (exact != nullptr || same_major != nullptr) {
    *out = exact != nullptr ? exact : same_major;
    return Status::Ok();
  }

  std::string message = std::string(name) + ": artifact has ";
  if (variant.num_images == 0) {
    message += "no images";
  } else {
    for (int i = 0; i < variant.num_images; ++i) {
      if (i > 0) message += ", ";
      message += detail::smName(variant.images[i].sm, variant.images[i].arch_specific != 0);
    }
    message += " only";
  }
  message += "; device is " + detail::smName(device_sm);
  return Status(StatusCode::kNoKernelImage, std::move(message));
}

}  // namespace kiln
