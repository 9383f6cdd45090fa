// What the two commands that run builds (`kiln build`, `kiln package --matrix`) share: the build
// options taken from the environment, and a sink that prints a build's notes and, with
// --verbose, every command and the tools' output.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/builder.h"
#include "io/process.h"

namespace kiln::cli {

// The tool paths a build takes from the environment (docs/cli.md, "Environment"); an unset
// variable leaves its option empty, which means the default.
inline void readBuildEnvironment(core::BuildOptions* options) {
  const auto env = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "");
  };
  options->nvcc = env("KILN_NVCC");
  options->cuda_home = env("CUDA_HOME");
  options->cuda12_home = env("KILN_CUDA12_HOME");
  options->cxx = env("KILN_CXX");
  options->cutlass_include = env("KILN_CUTLASS_INCLUDE");
  options->python = env("KILN_PYTHON");
  options->stage_dir = env("KILN_SOURCE_STAGE_DIR");
  options->compiler_launcher = env("KILN_COMPILER_LAUNCHER");
}

// --compiler-launcher, which wins over KILN_COMPILER_LAUNCHER (an empty value disables it).
struct LauncherOption {
  std::string value;
  CLI::Option* option = nullptr;

  void add(CLI::App& app, const std::string& scope) {
    option = app.add_option(
        "--compiler-launcher", value,
        scope +
            "a program put in front of every nvcc and host-compiler command, e.g. ccache or "
            "sccache (default: KILN_COMPILER_LAUNCHER; empty: none)");
  }
  // After readBuildEnvironment().
  void apply(core::BuildOptions* options) const {
    if (option != nullptr && option->count() > 0) options->compiler_launcher = value;
  }
  bool given() const { return option != nullptr && option->count() > 0; }
};

// A build sink (core::BuildSink or a sink derived from it) printing to stdout: notes always,
// commands and tool output only when verbose. The command adds its own progress lines.
template <typename Sink>
class ConsoleSink : public Sink {
 public:
  explicit ConsoleSink(bool verbose) : verbose_(verbose) {}
  void note(const std::string& line) override { fmt::print("note: {}\n", line); }
  void command(const std::vector<std::string>& argv) override {
    if (verbose_) fmt::print("$ {}\n", io::shellJoin(argv));
  }
  void toolOutput(const std::string& text) override {
    if (verbose_ && !text.empty()) fmt::print("{}", text.back() == '\n' ? text : text + "\n");
  }

 private:
  bool verbose_;
};

}  // namespace kiln::cli
