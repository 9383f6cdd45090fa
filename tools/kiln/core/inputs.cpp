// Input hashing and source staging (see inputs.h). The staged directory is checked before every
// reuse, not trusted: nvcc reads it for the whole build, so a file another user could replace, or
// one a /tmp cleaner removed, must never be compiled.
#include "core/inputs.h"

#include <algorithm>
#include <iterator>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <system_error>

#include <fmt/format.h>

#include "io/fs.h"

namespace fs = std::filesystem;

namespace kiln::core {

namespace {

constexpr char kStagedPrefix[] = "kiln-src-";
constexpr char kTemporaryMarker[] = ".staging-";

// Runs `body` holding an exclusive flock() of `dir`. Closing the descriptor releases the lock,
// and the kernel closes it if the process dies, so a killed build never leaves it held.
template <typename F>
auto withDirectoryLock(const fs::path& dir, F&& body) -> decltype(body()) {
  struct Descriptor {
    int fd;
    ~Descriptor() {
      if (fd >= 0) ::close(fd);
    }
  } descriptor{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (descriptor.fd < 0) {
    return makeError(
        fmt::format("{}: cannot open it to lock it: {}", dir.string(), std::strerror(errno)));
  }
  int locked = 0;
  do {
    locked = ::flock(descriptor.fd, LOCK_EX);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    return makeError(fmt::format("{}: cannot lock it: {}", dir.string(), std::strerror(errno)));
  }
  return body();
}

// Empty when only this user can change `st`'s file; else why not, as a clause.
std::string notPrivate(const struct stat& st) {
  if (st.st_uid != ::geteuid()) {
    return fmt::format("belongs to user {}, not {}", st.st_uid, ::geteuid());
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("is writable by others (mode {:o})", st.st_mode & 07777);
  }
  return {};
}

// Empty when `dir` holds exactly the files of `inputs`, with their hashes and the staged time,
// and only this user can change any of it; else the first thing wrong.
std::string stagedProblem(const fs::path& dir, const InputMap& inputs) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return fmt::format("{} is not a directory", dir.string());
  }
  if (auto why = notPrivate(st); !why.empty()) return fmt::format("{} {}", dir.string(), why);
  std::set<std::string> seen;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    if (::lstat(path.c_str(), &st) != 0) {
      return fmt::format("{}: cannot stat: {}", path.string(), std::strerror(errno));
    }
    if (auto why = notPrivate(st); !why.empty()) return fmt::format("{} {}", path.string(), why);
    if (S_ISDIR(st.st_mode)) continue;
    const std::string rel = path.lexically_relative(dir).generic_string();
    const auto input = inputs.find(rel);
    if (!S_ISREG(st.st_mode) || input == inputs.end()) {
      return fmt::format("{} is not a staged input", path.string());
    }
    if (st.st_mtim.tv_sec != kStagedFileTime) {
      return fmt::format("{} has modification time {}, not {}", path.string(), st.st_mtim.tv_sec,
                         kStagedFileTime);
    }
    auto sha = io::sha256File(path);
    if (!sha) return sha.error();
    if (*sha != input->second) {
      return fmt::format("{} has sha256 {}, not {}", path.string(), *sha, input->second);
    }
    seen.insert(rel);
  }
  if (ec) return fmt::format("cannot list {}: {}", dir.string(), ec.message());
  for (const auto& [path, sha] : inputs) {
    if (seen.count(path) == 0) return fmt::format("{} is missing", (dir / path).string());
  }
  return {};
}

// Copies `inputs` from `from` into the new directory `to`: each file checked against its recorded
// hash, read-only, with the staged time; every directory 0755 whatever the umask, so that the copy
// passes stagedProblem().
Result<void> writeStaged(const fs::path& from, const InputMap& inputs, const fs::path& to) {
  std::error_code ec;
  fs::create_directory(to, ec);
  if (ec) return makeError(fmt::format("cannot create {}: {}", to.string(), ec.message()));
  const auto directory_perms = fs::perms::owner_all | fs::perms::group_read |
                               fs::perms::group_exec | fs::perms::others_read |
                               fs::perms::others_exec;
  const auto file_perms = fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read;
  for (const auto& [rel, sha] : inputs) {
    auto bytes = io::readFile(from / rel);
    if (!bytes) return bytes.failure();
    if (const std::string now = io::sha256Hex(*bytes); now != sha) {
      return makeError(
          fmt::format("{} changed during the build (sha256 {}, {} when it was hashed); build again",
                      (from / rel).string(), now, sha));
    }
    const fs::path file = to / rel;
    if (auto written = io::writeFile(file, *bytes); !written) return written;
    fs::permissions(file, file_perms, ec);
    const struct timespec times[2] = {{kStagedFileTime, 0}, {kStagedFileTime, 0}};
    if (ec || ::utimensat(AT_FDCWD, file.c_str(), times, 0) != 0) {
      return makeError(fmt::format("{}: cannot set its mode and time: {}", file.string(),
                                   ec ? ec.message() : std::strerror(errno)));
    }
  }
  std::set<fs::path> directories = {to};
  for (const auto& [rel, sha] : inputs) {
    for (fs::path d = fs::path(rel).parent_path(); !d.empty(); d = d.parent_path()) {
      directories.insert(to / d);
    }
  }
  for (const auto& directory : directories) {
    if (!ec) fs::permissions(directory, directory_perms, ec);
  }
  if (ec) {
    return makeError(
        fmt::format("{}: cannot set its directories' modes: {}", to.string(), ec.message()));
  }
  return {};
}

// Temporary copies in `stage_dir` of builds that were killed mid-copy. Only called under the
// lock, which every copy is made under, so any there is abandoned; another user's stays (its
// owner's next build removes it).
void removeAbandonedCopies(const fs::path& stage_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(stage_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(std::string(".") + kStagedPrefix, 0) == 0 &&
        name.find(kTemporaryMarker) != std::string::npos) {
      fs::remove_all(entry.path(), ec);
    }
  }
}

}  // namespace

bool isInput(const fs::path& file) {
  const std::string name = file.filename().string();
  return file.extension() != ".md" && !name.empty() && name[0] != '.';
}

Result<void> addInputs(const fs::path& dir, const std::string& prefix, InputMap& inputs,
                       std::span<const char* const> skip) {
  for (const auto& file : io::listFiles(dir)) {
    if (!isInput(file)) continue;
    const fs::path rel = file.lexically_relative(fs::absolute(dir));
    const std::string top = rel.begin()->string();
    if (std::next(rel.begin()) != rel.end() &&
        std::any_of(skip.begin(), skip.end(), [&](const char* d) { return top == d; }))
      continue;
    auto sha = io::sha256File(file);
    if (!sha) return sha.failure();
    inputs[prefix + rel.generic_string()] = *sha;
  }
  return {};
}

fs::path stagedInputsDir(const fs::path& stage_dir, const InputMap& inputs) {
  std::string text;
  for (const auto& [path, sha] : inputs) text += fmt::format("{} {}\n", path, sha);
  return stage_dir / (kStagedPrefix + io::sha256Hex(text).substr(0, 16));
}

Result<fs::path> stageInputs(const fs::path& from, const InputMap& inputs,
                             const fs::path& stage_dir) {
  std::error_code ec;
  fs::create_directories(stage_dir, ec);
  if (ec) {
    return makeError(
        fmt::format("cannot create {}, where kiln stages the sources nvcc compiles: {}",
                    stage_dir.string(), ec.message()),
        ErrorKind::kEnvironment);
  }
  const fs::path dir = stagedInputsDir(stage_dir, inputs);
  return withDirectoryLock(stage_dir, [&]() -> Result<fs::path> {
    removeAbandonedCopies(stage_dir);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) == 0) {
      if (st.st_uid != ::geteuid()) {
        return makeError(
            fmt::format("{}, the staged copy of these sources, belongs to user {}; kiln compiles "
                        "only sources that this user ({}) staged. Remove it, or set "
                        "KILN_SOURCE_STAGE_DIR to another directory (images record that path)",
                        dir.string(), st.st_uid, ::geteuid()),
            ErrorKind::kEnvironment);
      }
      const std::string problem = stagedProblem(dir, inputs);
      if (problem.empty()) return dir;
      fs::remove_all(dir, ec);  // incomplete or changed since it was staged: staged again below
      if (ec) {
        return makeError(fmt::format("cannot remove {} to stage it again ({}): {}", dir.string(),
                                     problem, ec.message()));
      }
    }
    const fs::path temporary =
        stage_dir / fmt::format(".{}{}{}", dir.filename().string(), kTemporaryMarker, ::getpid());
    auto staged = writeStaged(from, inputs, temporary);
    if (staged) fs::rename(temporary, dir, ec);
    if (!staged || ec) {
      std::error_code ignored;
      fs::remove_all(temporary, ignored);
      if (!staged) return staged.failure();
      return makeError(fmt::format("cannot rename {} to {}: {}", temporary.string(), dir.string(),
                                   ec.message()));
    }
    return dir;
  });
}

}  // namespace kiln::core
