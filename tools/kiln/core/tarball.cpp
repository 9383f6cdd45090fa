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

Result<std::vector<TarEntry>> readTarGz(std::string_view bytes, const std::string& what,
                                        const TarLimits& limits) {
  std::unique_ptr<archive, ReadCloser> a(archive_read_new());
  if (!a) return makeError(fmt::format("{}: cannot create a libarchive reader", what));
  archive_read_support_filter_gzip(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
    return makeError(fmt::format("{}: not a readable tar.gz: {}", what, archiveMessage(a.get())));
  }
  std::vector<TarEntry> entries;
  std::uint64_t total = 0;
  for (;;) {
    archive_entry* header = nullptr;
    const int status = archive_read_next_header(a.get(), &header);
    if (status == ARCHIVE_EOF) break;
    if (status < ARCHIVE_WARN) {
      return makeError(fmt::format("{}: corrupt tar header after {} entries: {}", what,
                                   entries.size(), archiveMessage(a.get())));
    }
    if (entries.size() >= limits.max_entries) {
      return makeError(fmt::format("{}: more than {} entries", what, limits.max_entries));
    }
    TarEntry entry;
    const char* path = archive_entry_pathname(header);
    if (!path) path = archive_entry_pathname_utf8(header);
    if (!path)
      return makeError(fmt::format("{}: entry {} has no readable path", what, entries.size()));
    entry.path = path;
    if (entry.path.size() > limits.max_path) {
      return makeError(fmt::format("{}: entry {} has a {}-byte path (limit {})", what,
                                   entries.size(), entry.path.size(), limits.max_path));
    }
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
      char buffer[64 * 1024];
      for (;;) {
        const la_ssize_t n = archive_read_data(a.get(), buffer, sizeof buffer);
        if (n == 0) break;
        if (n < 0) {
          return makeError(fmt::format("{}: cannot read the data of {}: {}", what, entry.path,
                                       archiveMessage(a.get())));
        }
        total += static_cast<std::uint64_t>(n);
        if (total > limits.max_total_bytes) {
          return makeError(fmt::format("{}: holds more than {} bytes of file data (at {})", what,
                                       limits.max_total_bytes, entry.path));
        }
        entry.data.append(buffer, static_cast<size_t>(n));
      }
    } else {
      entry.type = TarEntryType::kOther;
    }
    entries.push_back(std::move(entry));
  }
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
    archive_entry_set_perm(header.get(), is_dir ? 0755 : 0644);
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
