// Status: the names of the codes and the one-line rendering that main() prints.
#include "kiln/status.h"

namespace kiln {

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotSupported:
      return "not supported";
    case StatusCode::kNoKernelImage:
      return "no kernel image";
    case StatusCode::kDriverError:
      return "driver error";
    case StatusCode::kDriverUnavailable:
      return "driver unavailable";
    case StatusCode::kCaptureRefused:
      return "capture refused";
    case StatusCode::kPoisoned:
      return "poisoned";
    case StatusCode::kInternal:
      return "internal error";
    case StatusCode::kDriverTooOld:
      return "driver too old";
  }
  return "unknown status code";
}

std::string Status::toString() const {
  if (ok()) return "ok";
  std::string text = statusCodeName(code_);
  text += ": ";
  text += message_;
  return text;
}

}  // namespace kiln
