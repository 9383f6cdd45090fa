// How kiln and tools/kiln-verify end (docs/cli.md): the exit codes, the one mapping from an
// error's kind to its code, and the guard every main() runs its work under, so that a bound not
// enforced or the machine running out of memory is one error line and a documented code, never
// an abort. Header-only: kiln-verify links kiln_verify, not kiln_cli.
#pragma once

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/result.h"

namespace kiln::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;      // a build, compile, verify or coverage check failed
inline constexpr int kExitUsage = 2;        // bad command line or registry
inline constexpr int kExitEnvironment = 3;  // a tool, header set, driver or device is missing

inline int exitCode(core::ErrorKind kind) {
  switch (kind) {
    case core::ErrorKind::kUsage:
      return kExitUsage;
    case core::ErrorKind::kEnvironment:
      return kExitEnvironment;
    case core::ErrorKind::kFailure:
      break;
  }
  return kExitFailure;
}

// Prints "<program>: error: <message>" to stderr and returns the exit code for its kind.
inline int printError(std::string_view program, const std::string& message, core::ErrorKind kind) {
  fmt::print(stderr, "{}: error: {}\n", program, message);
  return exitCode(kind);
}

// body(), with an exception that reaches here reported as one line: out of memory exits 3, any
// other 1 (the library reports errors as Results; an exception is a bound that was not enforced).
template <typename Body>
int runGuarded(std::string_view program, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return printError(program, "out of memory", core::ErrorKind::kEnvironment);
  } catch (const std::exception& e) {
    return printError(program, e.what(), core::ErrorKind::kFailure);
  }
}

}  // namespace kiln::cli
