// Toolchain discovery. Every failure here is an environment error (exit code 3) that names the
// tool that is missing and what to install or set, because it is the first thing a new user of
// a fresh machine or container sees.
#include "core/toolchain.h"

#include <sys/utsname.h>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "core/registry.h"

namespace fs = std::filesystem;

namespace kiln::core {

std::string hostArch() {
  utsname info{};
  if (::uname(&info) != 0) return "x86_64";
  std::string machine = info.machine;
  if (machine == "arm64") return "aarch64";
  return machine;
}

std::string parseNvccVersion(const std::string& text) {
  std::smatch match;
  static const std::regex full(R"(V(\d+\.\d+\.\d+))");
  static const std::regex release(R"(release (\d+\.\d+))");
  if (std::regex_search(text, match, full)) return match[1];
  if (std::regex_search(text, match, release)) return match[1];
  return {};
}

std::vector<int> parseGpuCodeList(const std::string& text) {
  std::set<int> sms;
  std::istringstream in(text);
  std::string word;
  while (in >> word) {
    if (word.rfind("sm_", 0) != 0) continue;
    if (int sm = parseSm(word); sm > 0) sms.insert(sm);
  }
  return {sms.begin(), sms.end()};
}

namespace {

Error envError(std::string message) {
  return makeError(std::move(message), ErrorKind::kEnvironment);
}

std::string firstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

Result<std::string> query(io::ProcessRunner& runner, const std::vector<std::string>& argv) {
  auto result = runner.run(argv);
  if (!result) return envError(result.error());
  if (result->exit_code != 0) {
    return envError(fmt::format("`{}` failed with exit code {}: {}", io::shellJoin(argv),
                                result->exit_code, firstLine(result->stderr_text)));
  }
  return result->stdout_text;
}

}  // namespace

Result<CudaToolchain> detectCuda(io::ProcessRunner& runner, const std::string& nvcc,
                                 const std::string& cuda_home) {
  CudaToolchain cuda;
  std::vector<std::string> candidates;
  if (!nvcc.empty()) {
    candidates.push_back(nvcc);
  } else {
    if (!cuda_home.empty()) candidates.push_back(cuda_home + "/bin/nvcc");
    candidates.push_back("/usr/local/cuda/bin/nvcc");
    candidates.push_back("nvcc");
  }
  for (const auto& candidate : candidates) {
    if (runner.available(candidate)) {
      cuda.nvcc = candidate;
      break;
    }
  }
  if (cuda.nvcc.empty()) {
    return envError(fmt::format(
        "nvcc not found (tried {}); install the CUDA toolkit or set KILN_NVCC or CUDA_HOME",
        fmt::join(candidates, ", ")));
  }
  auto version = query(runner, {cuda.nvcc, "--version"});
  if (!version) return version.failure();
  cuda.version = parseNvccVersion(*version);
  if (cuda.version.empty()) {
    return envError(fmt::format("`{} --version` printed no release number: {}", cuda.nvcc,
                                firstLine(*version)));
  }
  auto codes = query(runner, {cuda.nvcc, "--list-gpu-code"});
  if (!codes) return codes.failure();
  cuda.sms = parseGpuCodeList(*codes);
  if (cuda.sms.empty()) {
    return envError(fmt::format("`{} --list-gpu-code` listed no sm_NN targets", cuda.nvcc));
  }
  if (cuda.nvcc.find('/') != std::string::npos) {
    cuda.include_dir = fs::path(cuda.nvcc).parent_path().parent_path() / "include";
  } else {
    cuda.include_dir =
        (cuda_home.empty() ? fs::path("/usr/local/cuda") : fs::path(cuda_home)) / "include";
  }
  return cuda;
}

Result<HostToolchain> detectHost(io::ProcessRunner& runner, const std::string& arch,
                                 const std::string& cxx) {
  HostToolchain host;
  host.arch = arch;
  if (arch != "x86_64" && arch != "aarch64") {
    return makeError(
        fmt::format("--arch {}: unknown host arch; kiln builds for x86_64 or aarch64", arch),
        ErrorKind::kUsage);
  }
  std::string prefix = arch == hostArch() ? "" : arch + "-linux-gnu-";
  host.cxx = cxx.empty() ? prefix + "g++" : cxx;
  if (!cxx.empty()) {
    // "aarch64-linux-gnu-g++" -> prefix "aarch64-linux-gnu-"
    std::string name = fs::path(cxx).filename().string();
    size_t dash = name.rfind('-');
    std::string dir =
        fs::path(cxx).has_parent_path() ? fs::path(cxx).parent_path().string() + "/" : "";
    prefix = dir + (dash == std::string::npos ? "" : name.substr(0, dash + 1));
  }
  host.ar = prefix + "ar";
  for (const auto& tool : {host.cxx, host.ar}) {
    if (!runner.available(tool)) {
      return envError(fmt::format(
          "{} not found: the {} host toolchain is needed for --arch {}{}", tool, arch, arch,
          arch == hostArch() ? "" : fmt::format(" (install g++-{}-linux-gnu)", arch)));
    }
  }
  auto version = query(runner, {host.cxx, "--version"});
  if (!version) return version.failure();
  host.version = firstLine(*version);
  auto target = query(runner, {host.cxx, "-dumpmachine"});
  if (!target) return target.failure();
  host.target = firstLine(*target);
  if (host.target.rfind(arch, 0) != 0) {
    return envError(
        fmt::format("{} targets {}, not {} (--arch {})", host.cxx, host.target, arch, arch));
  }
  return host;
}

Result<std::string> checkLauncher(io::ProcessRunner& runner, const std::string& launcher) {
  if (runner.available(launcher)) return launcher;
  if (launcher.find('/') != std::string::npos) {
    return envError(
        fmt::format("compiler launcher '{}' not found or not executable (--compiler-launcher or "
                    "KILN_COMPILER_LAUNCHER; empty disables it)",
                    launcher));
  }
  return envError(
      fmt::format("compiler launcher '{}' not found on PATH (--compiler-launcher or "
                  "KILN_COMPILER_LAUNCHER; empty disables it)",
                  launcher));
}

Result<CutlassHeaders> detectCutlass(const fs::path& root, const std::string& env_include) {
  CutlassHeaders headers;
  std::vector<fs::path> tried;
  if (!env_include.empty()) {
    headers.include_dir = env_include;
    if (!fs::is_regular_file(headers.include_dir / "cutlass" / "cutlass.h")) {
      return envError(
          fmt::format("KILN_CUTLASS_INCLUDE={}: no cutlass/cutlass.h there", env_include));
    }
    return headers;
  }
  std::error_code ec;
  const fs::path lib = root / ".venv" / "lib";
  if (fs::is_directory(lib, ec)) {
    for (const auto& python : fs::directory_iterator(lib, ec)) {
      if (python.path().filename().string().rfind("python3", 0) != 0) continue;
      const fs::path site = python.path() / "site-packages";
      const fs::path include = site / "cutlass_library" / "source" / "include";
      tried.push_back(include);
      if (!fs::is_regular_file(include / "cutlass" / "cutlass.h")) continue;
      headers.include_dir = include;
      for (const auto& entry : fs::directory_iterator(site, ec)) {
        const std::string name = entry.path().filename().string();
        static const std::regex dist(R"(nvidia_cutlass-([0-9][^-]*)\.dist-info)");
        std::smatch match;
        if (std::regex_match(name, match, dist)) headers.version = match[1];
      }
      return headers;
    }
  }
  return envError(fmt::format(
      "CUTLASS headers not found (looked in {}/.venv/lib/python3*/site-packages/cutlass_library/"
      "source/include); run scripts/setup.sh or set KILN_CUTLASS_INCLUDE",
      root.string()));
}

}  // namespace kiln::core
