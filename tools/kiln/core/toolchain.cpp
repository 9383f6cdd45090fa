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
#include <fmt/ranges.h>

#include "core/naming.h"
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

int CudaToolchain::major() const {
  static const std::regex leading(R"(^([0-9]{1,3})\.)");
  std::smatch match;
  if (!std::regex_search(version, match, leading)) return 0;
  return std::stoi(match[1]);
}

Result<int> parseCudaMajor(const std::string& text) {
  for (int major : kCudaMajors) {
    if (text == std::to_string(major)) return major;
  }
  return makeError(fmt::format("--cuda-version {}: kiln builds with CUDA {} (allowed values: {})",
                               text.empty() ? "''" : text, fmt::join(kCudaMajors, " or "),
                               fmt::join(kCudaMajors, ", ")),
                   ErrorKind::kUsage);
}

std::vector<int> parsePtxasArchList(const std::string& text) {
  // The allowed values of --gpu-name only: the text from that option to the next one.
  size_t begin = text.find("--gpu-name");
  if (begin == std::string::npos) return {};
  size_t end = text.find("\n--", begin + 1);
  const std::string part = text.substr(begin, end == std::string::npos ? end : end - begin);
  std::set<int> sms;
  static const std::regex sm(R"('sm_([0-9]+)a?')");
  for (auto it = std::sregex_iterator(part.begin(), part.end(), sm); it != std::sregex_iterator();
       ++it)
    sms.insert(std::stoi((*it)[1]));
  return {sms.begin(), sms.end()};
}

std::string ptxIsaOf(const std::string& cuda_version) {
  // PTX ISA of each CUDA 12 release (the PTX ISA document's release history).
  static const std::pair<const char*, const char*> kIsa[] = {
      {"12.0", "8.0"}, {"12.1", "8.1"}, {"12.2", "8.2"}, {"12.3", "8.3"}, {"12.4", "8.4"},
      {"12.5", "8.5"}, {"12.6", "8.5"}, {"12.8", "8.7"}, {"12.9", "8.8"}};
  for (const auto& [cuda, isa] : kIsa) {
    const std::string prefix = std::string(cuda) + ".";
    if (cuda_version == cuda || cuda_version.rfind(prefix, 0) == 0) return isa;
  }
  return {};
}

Result<std::string> retargetPtx(const std::string& text, const std::string& isa) {
  static const std::regex directive(R"((^|\n)\.version ([0-9]+)\.([0-9]+)[ \t]*(\r?\n))");
  std::smatch match;
  if (!std::regex_search(text, match, directive))
    return makeError("the PTX has no .version directive");
  const size_t dot = isa.find('.');
  const int want_major = std::stoi(isa.substr(0, dot));
  const int want_minor = std::stoi(isa.substr(dot + 1));
  const int have_major = std::stoi(match[2]);
  const int have_minor = std::stoi(match[3]);
  if (have_major < want_major || (have_major == want_major && have_minor <= want_minor))
    return text;
  return match.prefix().str() + match[1].str() + ".version " + isa + match[4].str() +
         match.suffix().str();
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

Result<CudaToolchain> selectCuda(io::ProcessRunner& runner, const CudaSearch& search,
                                 const fs::path& root, int major) {
  const auto wrongMajor = [major](const CudaToolchain& cuda, const std::string& what) {
    return envError(fmt::format(
        "--cuda-version {}: {} is CUDA {}; {}", major, what, cuda.version,
        major == 12 ? "set KILN_CUDA12_HOME to a CUDA 12 toolkit, or run scripts/setup.sh"
                    : "set KILN_NVCC or CUDA_HOME to a CUDA 13 toolkit"));
  };
  if (major != 12) {
    auto cuda = detectCuda(runner, search.nvcc, search.cuda_home);
    if (!cuda) return cuda.failure();
    if (cuda->major() != major) return wrongMajor(*cuda, cuda->nvcc);
    return cuda;
  }
  const fs::path home =
      search.cuda12_home.empty() ? root / kCuda12Toolkit : fs::path(search.cuda12_home);
  const std::string nvcc12 = (home / "bin" / "nvcc").string();
  if (runner.available(nvcc12)) {
    auto cuda = detectCuda(runner, nvcc12, "");
    if (!cuda) return cuda.failure();
    if (cuda->major() != 12) return wrongMajor(*cuda, nvcc12);
    return cuda;
  }
  const std::string ptxas = (home / "bin" / "ptxas").string();
  if (!runner.available(ptxas)) {
    return envError(fmt::format(
        "--cuda-version 12: no CUDA 12 toolkit at {} (neither bin/nvcc nor bin/ptxas); run "
        "scripts/setup.sh (it installs nvidia-cuda-nvcc-cu12=={} into {}/) or set "
        "KILN_CUDA12_HOME",
        home.string(), kCuda12NvccWheelVersion, kCuda12Dir));
  }
  auto cuda = detectCuda(runner, search.nvcc, search.cuda_home);
  if (!cuda) return cuda.failure();
  auto version = query(runner, {ptxas, "--version"});
  if (!version) return version.failure();
  CudaToolchain split = *cuda;
  split.ptxas = ptxas;
  split.frontend_version = cuda->version;
  split.version = parseNvccVersion(*version);
  if (split.major() != 12) {
    return envError(fmt::format("--cuda-version 12: {} is CUDA {}; {}", ptxas,
                                split.version.empty() ? "of no readable version" : split.version,
                                "run scripts/setup.sh or set KILN_CUDA12_HOME"));
  }
  split.ptx_isa = ptxIsaOf(split.version);
  if (split.ptx_isa.empty()) {
    return envError(fmt::format(
        "--cuda-version 12: {} is CUDA {}, whose PTX ISA kiln does not know; use the pinned "
        "nvidia-cuda-nvcc-cu12=={} (scripts/setup.sh)",
        ptxas, split.version, kCuda12NvccWheelVersion));
  }
  auto help = query(runner, {ptxas, "--help"});
  if (!help) return help.failure();
  const std::vector<int> assembles = parsePtxasArchList(*help);
  split.sms.clear();
  for (int sm : cuda->sms) {
    if (std::find(assembles.begin(), assembles.end(), sm) != assembles.end())
      split.sms.push_back(sm);
  }
  if (split.sms.empty()) {
    return envError(
        fmt::format("--cuda-version 12: {} and {} share no sm_NN target", cuda->nvcc, ptxas));
  }
  return split;
}

}  // namespace kiln::core
