// An in-memory io::FileSystem for the publish tests: files (path -> bytes) and directories by
// absolute path, with rename(2)'s rules for directories, and faults. A step is a call that
// changes something (writeFile, copyFile, createDirectories, rename, removeAll), counted from 0.
// failStep(n) makes step n fail once, changing nothing, as a full disk or a permission would;
// crashAtStep(n) makes step n and every later one change nothing and fail, as when the process
// is killed: what is left is what the next build finds (after restart()). failRenamesOf(path)
// makes every rename of `path` fail.
#pragma once

#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "io/fs.h"

namespace kiln::testing {

class FakeFileSystem final : public io::FileSystem {
 public:
  using path = std::filesystem::path;

  // Faults, for the steps from now on.
  void failStep(int n) { fail_at_ = steps_ + n; }
  void crashAtStep(int n) { crash_at_ = steps_ + n; }
  void failRenamesOf(const path& from) { failing_renames_.insert(from); }
  // The next process: the files stay, the faults go.
  void restart() {
    fail_at_.reset();
    crash_at_.reset();
    failing_renames_.clear();
  }
  // Steps so far.
  int steps() const { return steps_; }

  // Every file under `dir` (relative path -> bytes), and every entry of `dir` by name.
  std::map<std::string, std::string> snapshot(const path& dir) const {
    std::map<std::string, std::string> files;
    for (const auto& [file, bytes] : files_) {
      if (under(file, dir)) files[file.lexically_relative(dir).string()] = bytes;
    }
    return files;
  }

  bool exists(const path& p) override { return files_.count(p) != 0 || dirs_.count(p) != 0; }

  std::vector<std::string> list(const path& dir) override {
    std::set<std::string> names;
    for (const auto& [file, bytes] : files_) {
      if (file.parent_path() == dir) names.insert(file.filename().string());
    }
    for (const auto& d : dirs_) {
      if (d.parent_path() == dir && d != dir) names.insert(d.filename().string());
    }
    return {names.begin(), names.end()};
  }

  core::Result<std::string> readFile(const path& p) override {
    const auto file = files_.find(p);
    if (file == files_.end())
      return core::makeError(p.string() + ": cannot read: No such file or directory");
    return file->second;
  }

  core::Result<void> writeFile(const path& p, const std::string& contents) override {
    if (auto ec = step(); ec)
      return core::makeError(p.string() + ": cannot write: " + ec.message());
    if (auto ec = makeParents(p); ec)
      return core::makeError(p.string() + ": cannot write: " + ec.message());
    files_[p] = contents;
    return {};
  }

  core::Result<void> copyFile(const path& from, const path& to) override {
    const auto file = files_.find(from);
    std::error_code ec = step();
    if (!ec && file == files_.end())
      ec = std::make_error_code(std::errc::no_such_file_or_directory);
    if (!ec) ec = makeParents(to);
    if (ec)
      return core::makeError("cannot copy " + from.string() + " to " + to.string() + ": " +
                             ec.message());
    files_[to] = file->second;
    return {};
  }

  std::error_code createDirectories(const path& dir) override {
    if (auto ec = step(); ec) return ec;
    return makeDirs(dir);
  }

  std::error_code rename(const path& from, const path& to) override {
    if (auto ec = step(); ec) return ec;
    if (failing_renames_.count(from) != 0)
      return std::make_error_code(std::errc::permission_denied);
    if (!exists(from) || dirs_.count(to.parent_path()) == 0)
      return std::make_error_code(std::errc::no_such_file_or_directory);
    if (files_.count(from) != 0) {
      if (dirs_.count(to) != 0) return std::make_error_code(std::errc::is_a_directory);
      files_[to] = files_[from];
      files_.erase(from);
      return {};
    }
    if (files_.count(to) != 0) return std::make_error_code(std::errc::not_a_directory);
    if (dirs_.count(to) != 0 && !list(to).empty())
      return std::make_error_code(std::errc::directory_not_empty);
    if (under(to, from)) return std::make_error_code(std::errc::invalid_argument);
    auto moved = [&](const path& p) { return p == from ? to : to / p.lexically_relative(from); };
    std::map<path, std::string> files;
    for (const auto& [file, bytes] : files_) files[under(file, from) ? moved(file) : file] = bytes;
    std::set<path> dirs;
    for (const auto& d : dirs_) dirs.insert(d == from || under(d, from) ? moved(d) : d);
    files_ = std::move(files);
    dirs_ = std::move(dirs);
    return {};
  }

  std::error_code removeAll(const path& p) override {
    if (auto ec = step(); ec) return ec;
    std::erase_if(files_,
                  [&](const auto& file) { return file.first == p || under(file.first, p); });
    std::erase_if(dirs_, [&](const path& d) { return d == p || under(d, p); });
    return {};
  }

 private:
  // Whether `p` is strictly below `dir`.
  static bool under(const path& p, const path& dir) {
    const std::string prefix = dir.string() + "/";
    return p.string().rfind(prefix, 0) == 0;
  }

  std::error_code step() {
    const int n = steps_++;
    if (crash_at_ && n >= *crash_at_) return std::make_error_code(std::errc::io_error);
    if (fail_at_ && n == *fail_at_) return std::make_error_code(std::errc::no_space_on_device);
    return {};
  }

  std::error_code makeDirs(const path& dir) {
    for (path p = dir; !p.empty() && p != p.root_path(); p = p.parent_path()) {
      if (files_.count(p) != 0) return std::make_error_code(std::errc::not_a_directory);
    }
    for (path p = dir; !p.empty() && p != p.root_path(); p = p.parent_path()) dirs_.insert(p);
    dirs_.insert(dir.root_path());
    return {};
  }

  std::error_code makeParents(const path& file) {
    if (dirs_.count(file) != 0) return std::make_error_code(std::errc::is_a_directory);
    return makeDirs(file.parent_path());
  }

  std::map<path, std::string> files_;
  std::set<path> dirs_ = {"/"};
  int steps_ = 0;
  std::optional<int> fail_at_;
  std::optional<int> crash_at_;
  std::set<path> failing_renames_;
};

}  // namespace kiln::testing
