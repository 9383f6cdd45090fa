// Result<T>: a value or an error message, for the builder's core library. The builder's errors
// are for people at a terminal, so an error is a message; main() prints it and picks the exit code.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace kiln::core {

// What kind of failure an error is; the CLI maps it to the exit code (docs/cli.md).
enum class ErrorKind {
  kFailure,      // a build or compile step failed
  kUsage,        // the command line or the registry is wrong
  kEnvironment,  // a tool, header set or device the command needs is missing
};

struct Error {
  std::string message;
  ErrorKind kind = ErrorKind::kFailure;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error)                            // NOLINT(google-explicit-constructor)
      : error_(std::move(error.message)), kind_(error.kind) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& error() const { return error_; }
  ErrorKind errorKind() const { return kind_; }
  // The error, to pass up unchanged: `if (!r) return r.failure();`
  Error failure() const { return Error{error_, kind_}; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  std::string error_;
  ErrorKind kind_ = ErrorKind::kFailure;
};

// Result<void>
template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error)  // NOLINT(google-explicit-constructor)
      : error_(std::move(error.message)), kind_(error.kind), ok_(false) {}

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const std::string& error() const { return error_; }
  ErrorKind errorKind() const { return kind_; }
  Error failure() const { return Error{error_, kind_}; }

 private:
  std::string error_;
  ErrorKind kind_ = ErrorKind::kFailure;
  bool ok_ = true;
};

inline Error makeError(std::string message, ErrorKind kind = ErrorKind::kFailure) {
  return Error{std::move(message), kind};
}

}  // namespace kiln::core
