// The files a build reads, by content. One rule says which files are inputs and one helper
// hashes them, for a variant's `inputs` and for the artifact's `runtime_inputs`
// (docs/artifact-format.md); both record paths relative to the repository, so a moved checkout
// records the same map.
//
// nvcc does not compile the checkout's files themselves: with -lineinfo, the line table it writes
// into a cubin (and the `.file` lines of PTX) holds the absolute directory of every source with
// device code, and ptxas adds each file's modification time, so the same sources in another
// checkout, or rewritten by `git checkout`, would give other image bytes. stageInputs() copies the
// inputs to a directory whose path depends on their content only, with a fixed time on every
// file, and nvcc reads them there.
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>

#include "core/result.h"

namespace kiln::core {

using InputMap = std::map<std::string, std::string>;  // path -> sha256 of the file's bytes

// Documentation (*.md) and hidden files are not inputs: a README that records evidence must not
// make the evidenced artifact stale. cmake/Kiln.cmake applies the same rule.
bool isInput(const std::filesystem::path& file);

// A group folder holds more than its kernels: runner/ is compiled into the library (an input of
// the artifact's `runtime_inputs`, with the runtime), and tests/ and bench/ are no input of the
// artifact at all (editing a test must not make the artifact it tests stale). The kernels'
// inputs are the rest of the folder. cmake/Kiln.cmake applies the same rule.
inline constexpr char kRunnerDir[] = "runner";
inline constexpr const char* kNonKernelDirs[] = {kRunnerDir, "tests", "bench"};

// Adds every input file under `dir` (recursively) to `inputs`, keyed `prefix` followed by its
// path relative to `dir` in generic form: prefix "kernels/rmsnorm/" for <root>/kernels/rmsnorm.
// Files under the top-level folders of `dir` named in `skip` are left out.
Result<void> addInputs(const std::filesystem::path& dir, const std::string& prefix,
                       InputMap& inputs, std::span<const char* const> skip = {});

// Where nvcc's sources are staged unless BuildOptions says otherwise. A fixed path, not $TMPDIR:
// the path is written into every image, so it must be the same on every machine.
inline constexpr char kDefaultStageDir[] = "/tmp";
// The time every staged file carries: 0, which the line table reads as "not recorded".
inline constexpr long kStagedFileTime = 0;

// The directory stageInputs() uses for `inputs`: <stage_dir>/kiln-src-<the first 16 hex digits
// of a sha256 over the paths and their hashes>.
std::filesystem::path stagedInputsDir(const std::filesystem::path& stage_dir,
                                      const InputMap& inputs);

// Makes stagedInputsDir(stage_dir, inputs) hold a copy of every file of `inputs` (paths relative
// to `from`), each checked against its recorded sha256 as it is copied, read-only, with the time
// kStagedFileTime, and returns that directory. A directory already there is reused when it holds
// exactly those files with those hashes and time, and it and everything in it belong to this user
// and are writable by no one else; one of this user's that fails the check (a file removed by a
// /tmp cleaner, an edit) is staged again; another user's is an error naming it. Safe when several
// builds, in threads or processes, stage at once: the check and the copy run under an exclusive
// flock() of `stage_dir`, the copy is written under a temporary name and renamed into place, and
// a temporary left by a killed build is removed by the next one.
Result<std::filesystem::path> stageInputs(const std::filesystem::path& from, const InputMap& inputs,
                                          const std::filesystem::path& stage_dir);

}  // namespace kiln::core
