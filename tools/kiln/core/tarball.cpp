// libarchive glue for tarball.h. The archive handles are owned by unique_ptrs so every early
// return frees them; libarchive's own message is kept in each error.
#include "core/tarball.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

#include <fmt/format.h>

namespace kiln::core {

namespace {

struct ReadCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteCloser {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

std::string archiveMessage(archive* a) {
  const char* text = archive_error_string(a);
  return text ? text : "unknown libarchive error";
}

const char* fileTypeName(unsigned int type) {
  switch (type) {
    case AE_IFREG:
      return "regular file";
    case AE_IFDIR:
      return "directory";
    case AE_IFLNK:
      return "symlink";
    case AE_IFCHR:
      return "character device";
    case AE_IFBLK:
      return "block device";
    case AE_IFIFO:
      return "fifo";
    case AE_IFSOCK:
      return "socket";
    default:
      return "entry of unknown type";
  }
}

}  // namespace

namespace {

using Reader = std::unique_ptr<archive, ReadCloser>;

Result<Reader> openReader(std::string_view bytes, const std::string& what) {
  Reader a(archive_read_new());
  if (!a) return makeError(fmt::format("{}: cannot create a libarchive reader", what));
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
    return makeError(fmt::format("{}: not a readable tar.gz: {}", what, archiveMessage(a.get())));
  }
  return a;
}

// The running totals of one pass, checked against the limits at every step.
class Budget {
 public:
  Budget(const TarLimits& limits, std::string_view archive, const std::string& what)
      : limits_(limits), archive_bytes_(archive.size()), what_(what) {}

  Result<void> entry(std::uint64_t index, const std::string& path) {
    if (index >= limits_.max_entries) {
      return makeError(
          fmt::format("{}: holds more than {} entries (the limit)", what_, limits_.max_entries));
    }
    if (path.size() > limits_.max_path) {
      return makeError(fmt::format("{}: entry {} has a {}-byte path (the limit is {} bytes)", what_,
                                   index, path.size(), limits_.max_path));
    }
    inflated_ += 512 + path.size();
    return ratio(path);
  }

  // A file's declared size, before any of its data is read: a bomb that says what it is about to
  // do is refused without inflating it.
  Result<void> declared(const std::string& path, std::uint64_t size) {
    if (size > limits_.max_entry_bytes) {
      return makeError(
          fmt::format("{}: entry '{}' holds {} bytes, more than the limit of {} "
                      "bytes for one file",
                      what_, path, size, limits_.max_entry_bytes));
    }
    return total(path, data_ + size, inflated_ + size);
  }

  // `n` more bytes of the current file's data.
  Result<void> data(const std::string& path, std::uint64_t entry_bytes, std::uint64_t n) {
    if (entry_bytes > limits_.max_entry_bytes) {
      return makeError(
          fmt::format("{}: entry '{}' holds more than {} bytes, the limit for one "
                      "file",
                      what_, path, limits_.max_entry_bytes));
    }
    data_ += n;
    inflated_ += n;
    return total(path, data_, inflated_);
  }

 private:
  Result<void> total(const std::string& path, std::uint64_t data, std::uint64_t inflated) {
    if (data > limits_.max_total_bytes) {
      return makeError(
          fmt::format("{}: holds more than {} bytes of file data (the limit; at "
                      "entry '{}')",
                      what_, limits_.max_total_bytes, path));
    }
    return ratio(path, inflated);
  }
  Result<void> ratio(const std::string& path) { return ratio(path, inflated_); }
  Result<void> ratio(const std::string& path, std::uint64_t inflated) {
    if (inflated > limits_.ratio_floor && inflated / limits_.max_ratio > archive_bytes_) {
      return makeError(fmt::format(
          "{}: inflates its {} bytes to more than {} bytes (at entry '{}'), a compression ratio "
          "over the limit of {}:1; a decompression bomb?",
          what_, archive_bytes_, inflated, path, limits_.max_ratio));
    }
    return {};
  }

  const TarLimits& limits_;
  std::uint64_t archive_bytes_;
  const std::string& what_;
  std::uint64_t data_ = 0;      // file data so far
  std::uint64_t inflated_ = 0;  // file data, headers and paths so far
};

// One pass over the archive. With `out` null it keeps nothing: it reads headers and counts the
// bytes each file inflates to (data blocks are discarded as they come; sparse holes are counted
// by their offsets, never materialized), so it costs constant memory whatever the archive
// claims. With `out`, it keeps every entry and its data.
Result<void> readPass(std::string_view bytes, const std::string& what, const TarLimits& limits,
                      std::vector<TarEntry>* out) {
  if (bytes.size() > limits.max_archive_bytes) {
    return makeError(fmt::format("{}: {} bytes, more than the limit of {} bytes for a tarball",
                                 what, bytes.size(), limits.max_archive_bytes));
  }
  auto a = openReader(bytes, what);
  if (!a) return a.failure();
  Budget budget(limits, bytes, what);
  for (std::uint64_t index = 0;; ++index) {
    archive_entry* header = nullptr;
    const int status = archive_read_next_header(a->get(), &header);
    if (status == ARCHIVE_EOF) break;
    if (status < ARCHIVE_WARN) {
      return makeError(fmt::format("{}: corrupt tar header after {} entries: {}", what, index,
                                   archiveMessage(a->get())));
    }
    TarEntry entry;
    const char* path = archive_entry_pathname(header);
    if (!path) path = archive_entry_pathname_utf8(header);
    if (!path) return makeError(fmt::format("{}: entry {} has no readable path", what, index));
    entry.path = path;
    if (auto ok = budget.entry(index, entry.path); !ok) return ok.failure();
    const unsigned int type = archive_entry_filetype(header);
    entry.type_name = fileTypeName(type);
    if (const char* target = archive_entry_hardlink(header)) {
      entry.type = TarEntryType::kHardlink;
      entry.type_name = "hardlink";
      entry.link_target = target;
    } else if (type == AE_IFLNK) {
      entry.type = TarEntryType::kSymlink;
      if (const char* target_path = archive_entry_symlink(header)) entry.link_target = target_path;
    } else if (type == AE_IFDIR) {
      entry.type = TarEntryType::kDirectory;
    } else if (type == AE_IFREG) {
      entry.type = TarEntryType::kFile;
      entry.executable = (archive_entry_perm(header) & 0111) != 0;
      if (archive_entry_size_is_set(header)) {
        const la_int64_t size = archive_entry_size(header);
        const std::uint64_t declared = size < 0 ? 0 : static_cast<std::uint64_t>(size);
        if (auto ok = budget.declared(entry.path, declared); !ok) return ok.failure();
        if (out) entry.data.reserve(static_cast<size_t>(declared));  // within the limits now
      }
      std::uint64_t entry_bytes = 0;
      for (;;) {
        const void* block = nullptr;
        size_t length = 0;
        la_int64_t offset = 0;
        char buffer[64 * 1024];
        la_ssize_t n = 0;
        if (out) {
          n = archive_read_data(a->get(), buffer, sizeof buffer);
        } else {
          const int r = archive_read_data_block(a->get(), &block, &length, &offset);
          if (r == ARCHIVE_EOF) break;
          n = r < ARCHIVE_WARN ? -1 : static_cast<la_ssize_t>(length);
        }
        if (n == 0 && out) break;
        if (n < 0) {
          return makeError(fmt::format("{}: cannot read the data of {}: {}", what, entry.path,
                                       archiveMessage(a->get())));
        }
        // The bytes this block brings the file to: its end, holes before it included.
        const std::uint64_t end =
            out ? entry_bytes + static_cast<std::uint64_t>(n)
                : static_cast<std::uint64_t>(offset < 0 ? 0 : offset) + length;
        if (end > entry_bytes) {
          if (auto ok = budget.data(entry.path, end, end - entry_bytes); !ok) return ok.failure();
          entry_bytes = end;
        }
        if (out) entry.data.append(buffer, static_cast<size_t>(n));
      }
    } else {
      entry.type = TarEntryType::kOther;
    }
    if (out) out->push_back(std::move(entry));
  }
  return {};
}

}  // namespace

Result<std::vector<TarEntry>> readTarGz(std::string_view bytes, const std::string& what,
                                        const TarLimits& limits) {
  // First pass: every bound, nothing kept. Only an archive that fits is read a second time.
  if (auto fits = readPass(bytes, what, limits, nullptr); !fits) return fits.failure();
  std::vector<TarEntry> entries;
  if (auto read = readPass(bytes, what, limits, &entries); !read) return read.failure();
  return entries;
}

namespace {

la_ssize_t appendToString(archive*, void* client, const void* buffer, size_t length) {
  static_cast<std::string*>(client)->append(static_cast<const char*>(buffer), length);
  return static_cast<la_ssize_t>(length);
}

}  // namespace

Result<std::string> writeTarGz(const std::vector<TarEntry>& entries, std::int64_t mtime) {
  std::string out;
  std::unique_ptr<archive, WriteCloser> a(archive_write_new());
  if (!a) return makeError("cannot create a libarchive writer");
  auto fail = [&](const std::string& step) {
    return makeError(fmt::format("writing the tarball: {}: {}", step, archiveMessage(a.get())));
  };
  if (archive_write_set_format_ustar(a.get()) != ARCHIVE_OK) return fail("ustar format");
  if (archive_write_add_filter_gzip(a.get()) != ARCHIVE_OK) return fail("gzip filter");
  // gzip headers carry a timestamp by default; leave it out so the same entries give the same
  // bytes.
  if (archive_write_set_filter_option(a.get(), "gzip", "timestamp", nullptr) < ARCHIVE_WARN) {
    return fail("gzip timestamp option");
  }
  // Without this libarchive pads the compressed stream with zeros to a 10240-byte block, which
  // `gzip -t` reports as trailing garbage.
  if (archive_write_set_bytes_in_last_block(a.get(), 1) != ARCHIVE_OK) return fail("block size");
  if (archive_write_open(a.get(), &out, nullptr, appendToString, nullptr) != ARCHIVE_OK)
    return fail("open");
  for (const TarEntry& e : entries) {
    if (e.type != TarEntryType::kFile && e.type != TarEntryType::kDirectory) {
      return makeError(fmt::format(
          "writing the tarball: {} is a {}; only regular files and directories are packaged",
          e.path, e.type_name));
    }
    std::unique_ptr<archive_entry, EntryFree> header(archive_entry_new());
    archive_entry_set_pathname(header.get(), e.path.c_str());
    const bool is_dir = e.type == TarEntryType::kDirectory;
    archive_entry_set_filetype(header.get(), is_dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(header.get(), is_dir || e.executable ? 0755 : 0644);
    archive_entry_set_size(header.get(), is_dir ? 0 : static_cast<la_int64_t>(e.data.size()));
    archive_entry_set_mtime(header.get(), static_cast<time_t>(mtime), 0);
    archive_entry_set_uid(header.get(), 0);
    archive_entry_set_gid(header.get(), 0);
    if (archive_write_header(a.get(), header.get()) != ARCHIVE_OK) return fail(e.path);
    if (!is_dir && !e.data.empty()) {
      const la_ssize_t written = archive_write_data(a.get(), e.data.data(), e.data.size());
      if (written < 0 || static_cast<size_t>(written) != e.data.size()) return fail(e.path);
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) return fail("close");
  return out;
}

}  // namespace kiln::core
