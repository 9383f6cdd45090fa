// A fake toolchain for builder tests: a FakeProcessRunner that answers nvcc, g++ and ar the way
// the real tools do (versions, target lists, ptxas reports) and writes minimal ELF files where
// the real tools write cubins, objects and archives, plus a scratch repository root. Knobs let
// a test make nvcc fail or change the compiler version between builds.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "io/fs.h"
#include "io/process.h"

namespace kiln::testing {

// A 64-byte ELF64 little-endian header with `machine` and no sections.
inline std::string minimalElf(int machine, const std::string& tag) {
  std::string bytes(64, '\0');
  bytes[0] = 0x7f;
  bytes[1] = 'E';
  bytes[2] = 'L';
  bytes[3] = 'F';
  bytes[4] = 2;
  bytes[5] = 1;
  bytes[6] = 1;
  bytes[18] = static_cast<char>(machine & 0xff);
  bytes[19] = static_cast<char>(machine >> 8);
  bytes[58] = 64;
  return bytes + tag;  // `tag` makes each file's hash distinct
}

struct FakeTools {
  std::string cxx_version = "g++ (Fake) 12.2.0";
  std::string nvcc_release = "V13.0.88";
  std::atomic<int> fail_nvcc_after{-1};  // fail every nvcc compile after this many (-1: never)
  std::atomic<int> nvcc_compiles{0};
  int object_machine = 0;  // the ELF machine g++ writes into objects (0: the right one)

  io::FakeProcessRunner runner{[this](const std::vector<std::string>& argv) { return answer(argv); }};

  static std::string valueAfter(const std::vector<std::string>& argv, const std::string& flag) {
    for (size_t i = 0; i + 1 < argv.size(); ++i)
      if (argv[i] == flag) return argv[i + 1];
    return {};
  }

  core::Result<io::ProcessResult> answer(const std::vector<std::string>& argv) {
    const std::string tool = std::filesystem::path(argv[0]).filename().string();
    io::ProcessResult r;
    if (tool == "nvcc") {
      if (argv[1] == "--version") {
        r.stdout_text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, " +
                        nvcc_release + "\n";
      } else if (argv[1] == "--list-gpu-code") {
        r.stdout_text = "sm_75\nsm_80\nsm_86\nsm_87\nsm_89\nsm_90\nsm_100\nsm_110\nsm_120\n";
      } else {
        const int n = nvcc_compiles++;
        if (fail_nvcc_after >= 0 && n >= fail_nvcc_after) {
          r.exit_code = 2;
          r.stderr_text = "fake.cu(3): error: identifier \"oops\" is undefined\n";
          return r;
        }
        const std::string out = valueAfter(argv, "-o");
        std::string arch;
        for (const auto& a : argv)
          if (a.rfind("-arch=", 0) == 0) arch = a.substr(6);
        auto w = io::writeFile(out, minimalElf(190, out + arch));
        if (!w) return w.failure();
        r.stderr_text = "ptxas info    : 0 bytes gmem\n"
                        "ptxas info    : Compiling entry function 'kiln_fake' for '" + arch + "'\n"
                        "ptxas info    : Function properties for kiln_fake\n"
                        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
                        "ptxas info    : Used 40 registers, used 1 barriers, 512 bytes smem\n";
      }
    } else if (tool.find("g++") != std::string::npos) {
      if (argv[1] == "--version") {
        r.stdout_text = cxx_version + "\nCopyright\n";
      } else if (argv[1] == "-dumpmachine") {
        r.stdout_text = tool.rfind("aarch64", 0) == 0 ? "aarch64-linux-gnu\n" : "x86_64-linux-gnu\n";
      } else {
        const int machine = object_machine != 0 ? object_machine : tool.rfind("aarch64", 0) == 0 ? 183 : 62;
        const std::string out = valueAfter(argv, "-o");
        auto w = io::writeFile(out, minimalElf(machine, out));
        if (!w) return w.failure();
      }
    } else if (tool.find("ar") != std::string::npos) {
      std::string archive = "!<arch>\n";
      for (size_t i = 3; i < argv.size(); ++i) archive += argv[i] + "\n";
      auto w = io::writeFile(argv[2], archive);
      if (!w) return w.failure();
    } else {
      return core::makeError(argv[0] + ": not found", core::ErrorKind::kEnvironment);
    }
    return r;
  }
};

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("kiln-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::filesystem::path path_;
};

// Writes kernels/<group>/kiln.toml (+ source) and a minimal runtime/ under `root`.
inline void writeGroup(const std::filesystem::path& root, const std::string& group,
                       const std::string& extra_group_keys = "") {
  const std::string toml = "[group]\nname = \"" + group + "\"\nkind = \"cuda\"\nsource = \"k.cu\"\n"
                           "entries = [\"kiln_fake\"]\nsupported_sms = [80, 90]\n" + extra_group_keys +
                           "\n[constants]\nhidden = \"int\"\ndtype = \"dtype\"\n\n[[family]]\n"
                           "name = \"" + group + "_h{hidden}_{dtype}\"\n"
                           "matrix = { hidden = [1024, 2048], dtype = [\"bf16\"] }\n";
  (void)io::writeFile(root / "kernels" / group / "kiln.toml", toml);
  (void)io::writeFile(root / "kernels" / group / "k.cu", "// " + group + "\n");
  (void)io::writeFile(root / "runtime/include/kiln/variant.h", "#pragma once\n");
  (void)io::writeFile(root / "runtime/src/status.cpp", "int kiln_status;\n");
}

// Every file under `dir` -> its sha256: to compare a directory before and after.
inline std::map<std::string, std::string> snapshot(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& f : io::listFiles(dir)) {
    files[std::filesystem::relative(f, dir).string()] = *io::sha256File(f);
  }
  return files;
}

}  // namespace kiln::testing
