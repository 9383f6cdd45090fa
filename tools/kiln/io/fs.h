// Filesystem helpers for the builder: whole-file read/write, recursive listing in a stable
// order, sha256 (OpenSSL EVP) and the two ELF facts the builder checks (machine, global symbols).
// Each returns a Result whose message names the path, so callers never re-wrap errno text.
// FileSystem is the small interface the builder publishes an artifact through
// (core/publish.h), so that tests can fail or interrupt any of its steps
// (tests/unit/fake_fs.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "core/result.h"

namespace kiln::io {

core::Result<std::string> readFile(const std::filesystem::path& path);

// What readRegularFile does with a symlink as the last path component.
enum class Links {
  kRefuse,  // O_NOFOLLOW: a symlink is refused (files inside an artifact directory)
  kFollow,  // the link's target must itself be a regular file (a tarball or sidecar named by hand)
};
// Reads a file that may be hostile: opened with O_NONBLOCK (a FIFO cannot hang the open) and,
// for Links::kRefuse, O_NOFOLLOW; fstat must show a regular file (not a FIFO, device, socket or
// directory) of at most `max_bytes`, and no more than that is ever read (a file that grows
// while read is refused too). Each refusal is one line naming the path, what it is and the limit.
core::Result<std::string> readRegularFile(const std::filesystem::path& path,
                                          std::uint64_t max_bytes, Links links = Links::kRefuse);

// Why readRegularFileOr refused a file: the facts, for a caller that words the refusal itself
// (readRegularFile above is one; the registry, which words them for a kiln.toml, another).
struct FileRefusal {
  enum class Reason { kOpen, kSymlink, kStat, kNotRegular, kTooBig, kGrew, kRead };
  Reason reason = Reason::kOpen;
  int error = 0;           // errno: kOpen, kStat, kRead
  unsigned mode = 0;       // st_mode: kNotRegular
  std::uint64_t size = 0;  // the file's size (kTooBig) or the bytes read so far (kGrew)
};
// readRegularFile's mechanism: true with the bytes in *out, or false with *refusal filled.
bool readRegularFileOr(const std::filesystem::path& path, std::uint64_t max_bytes, Links links,
                       std::string* out, FileRefusal* refusal);
// Creates parent directories; writes through a temporary file and renames it into place.
core::Result<void> writeFile(const std::filesystem::path& path, const std::string& contents);
core::Result<void> copyFile(const std::filesystem::path& from, const std::filesystem::path& to);
// Every regular file under `dir`, sorted, as absolute paths (empty when `dir` does not exist).
std::vector<std::filesystem::path> listFiles(const std::filesystem::path& dir);

std::string sha256Hex(std::string_view bytes);
core::Result<std::string> sha256File(const std::filesystem::path& path);

// What publishing an artifact does to the filesystem. Reads and whole-file writes return a Result
// whose message names the path (as the functions above); directory operations return the
// std::error_code of std::filesystem, and the caller words the message, naming what the step was.
class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual bool exists(const std::filesystem::path& path) = 0;
  // The names of the entries of `dir`, sorted; empty when it cannot be read.
  virtual std::vector<std::string> list(const std::filesystem::path& dir) = 0;
  virtual core::Result<std::string> readFile(const std::filesystem::path& path) = 0;
  // Both create the parent directories of the file they write.
  virtual core::Result<void> writeFile(const std::filesystem::path& path,
                                       const std::string& contents) = 0;
  virtual core::Result<void> copyFile(const std::filesystem::path& from,
                                      const std::filesystem::path& to) = 0;
  virtual std::error_code createDirectories(const std::filesystem::path& dir) = 0;
  // rename(2): replaces `to` when it is a file or an empty directory, else fails.
  virtual std::error_code rename(const std::filesystem::path& from,
                                 const std::filesystem::path& to) = 0;
  // Removes `path` and everything under it; no error when it does not exist.
  virtual std::error_code removeAll(const std::filesystem::path& path) = 0;
};

// The real filesystem: the functions above and std::filesystem.
class RealFileSystem final : public FileSystem {
 public:
  bool exists(const std::filesystem::path& path) override;
  std::vector<std::string> list(const std::filesystem::path& dir) override;
  core::Result<std::string> readFile(const std::filesystem::path& path) override;
  core::Result<void> writeFile(const std::filesystem::path& path,
                               const std::string& contents) override;
  core::Result<void> copyFile(const std::filesystem::path& from,
                              const std::filesystem::path& to) override;
  std::error_code createDirectories(const std::filesystem::path& dir) override;
  std::error_code rename(const std::filesystem::path& from,
                         const std::filesystem::path& to) override;
  std::error_code removeAll(const std::filesystem::path& path) override;
};

}  // namespace kiln::io
