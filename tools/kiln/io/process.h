// Running external tools (nvcc, the host compiler, ar) behind a small interface, so that the
// builder's planning and command construction are tested with a fake that records argv and
// answers with canned output, and only the real binary ever spawns nvcc.
#pragma once

#include <filesystem>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"

namespace kiln::io {

struct ProcessResult {
  int exit_code = 0;  // the process's exit status; 128 + N when killed by signal N
  std::string stdout_text;
  std::string stderr_text;
};

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  // Runs argv (argv[0] looked up in PATH when it has no '/'), waits, captures both streams.
  // An error only when the process could not be started at all ("nvcc: not found").
  virtual core::Result<ProcessResult> run(const std::vector<std::string>& argv) = 0;
  // Whether `program` can be started (an executable path, or found in PATH).
  virtual bool available(const std::string& program) = 0;
};

// posix_spawnp with both streams on pipes, drained with poll() so a chatty tool cannot block.
class PosixProcessRunner final : public ProcessRunner {
 public:
  core::Result<ProcessResult> run(const std::vector<std::string>& argv) override;
  bool available(const std::string& program) override;
};

// The fake: every call is recorded; `handler` answers it (it may write files, e.g. a cubin at
// the `-o` path). Thread-safe, because the builder compiles in parallel.
class FakeProcessRunner final : public ProcessRunner {
 public:
  using Handler = std::function<core::Result<ProcessResult>(const std::vector<std::string>&)>;
  explicit FakeProcessRunner(Handler handler) : handler_(std::move(handler)) {}

  core::Result<ProcessResult> run(const std::vector<std::string>& argv) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      calls_.push_back(argv);
    }
    return handler_(argv);
  }
  bool available(const std::string& program) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& missing : missing_) {
      if (missing == program) return false;
    }
    return true;
  }
  void setMissing(std::vector<std::string> programs) { missing_ = std::move(programs); }
  std::vector<std::vector<std::string>> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  Handler handler_;
  mutable std::mutex mutex_;
  std::vector<std::vector<std::string>> calls_;
  std::vector<std::string> missing_;
};

// Quotes argv for a shell, for --verbose and metadata ("nvcc -cubin ... 'a b'").
std::string shellJoin(const std::vector<std::string>& argv);

}  // namespace kiln::io
