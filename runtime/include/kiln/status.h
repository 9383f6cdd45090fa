// Status: what every kiln entry point returns. Nothing in kiln prints, exits or aborts; a
// failure is a Status whose message names the offending value and the limit it broke.
#pragma once

#include <string>
#include <utility>

namespace kiln {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // a problem the caller described wrongly (shape, alignment, null)
  kNotSupported,       // a valid problem that this artifact has no variant for
  kNoKernelImage,      // the artifact has no image for this device's SM
  kDriverError,        // a CUDA driver call failed (message names the call and the CUresult)
  kDriverUnavailable,  // libcuda.so.1 could not be loaded or lacks a symbol
  kCaptureRefused,     // first module load requested while the stream is being captured
  kPoisoned,           // a failed module cleanup left this variant unusable in this process
  kInternal,
  kDriverTooOld,  // the artifact was built with a newer CUDA than the driver supports
};

const char* statusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "ok".
  std::string toString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

}  // namespace kiln

// Propagates a non-ok Status to the caller.
#define KILN_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kiln::Status kiln_status_ = (expr);        \
    if (!kiln_status_.ok()) return kiln_status_; \
  } while (0)
