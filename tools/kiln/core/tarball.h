// Reading and writing .tar.gz in memory with libarchive. Reading never touches the filesystem:
// verify inspects every header (type, path) of a possibly hostile tarball before anything is
// written, and extract writes only what verify accepted. Writing produces the same bytes for
// the same entries (fixed owner, modes and mtime, no gzip timestamp), so packaging is
// reproducible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::core {

enum class TarEntryType { kFile, kDirectory, kSymlink, kHardlink, kOther };

struct TarEntry {
  std::string path;  // as stored (a directory may end in '/')
  TarEntryType type = TarEntryType::kFile;
  std::string type_name;    // "regular file", "symlink", "character device", ... for messages
  std::string link_target;  // symlinks and hardlinks
  std::string data;         // regular files only
  bool executable = false;  // a regular file with an execute bit (written 0755, else 0644)
};

// Bounds on what reading will hold in memory or spend time on, so a decompression bomb or a
// header flood is a one-line error, not an OOM (docs/packaging.md, "Threats and limits"). Every
// bound is enforced while streaming: reading makes a first pass that keeps nothing (headers and
// byte counts only, constant memory) and refuses at the first bound crossed, before a second
// pass keeps the data of an archive known to fit.
struct TarLimits {
  std::uint64_t max_entries = 100'000;
  std::uint64_t max_total_bytes = std::uint64_t{1} << 30;    // 1 GiB of file data in all
  std::uint64_t max_entry_bytes = std::uint64_t{512} << 20;  // 512 MiB for one file
  std::uint64_t max_path = 1024;  // bytes of one entry path (extraction adds the destination)
  std::uint64_t max_name = 255;   // bytes of one path component (NAME_MAX); checked by verify
  // Inflated bytes (file data, plus 512 per header and the path) per byte of the archive, once
  // more than `ratio_floor` bytes have been inflated: real artifacts compress about 4:1, a gzip
  // bomb about 1000:1.
  std::uint64_t max_ratio = 100;
  std::uint64_t ratio_floor = std::uint64_t{16} << 20;  // 16 MiB
  // The compressed archive itself (read whole into memory).
  std::uint64_t max_archive_bytes = std::uint64_t{1536} << 20;  // 1.5 GiB
};

// Every entry, in archive order, with the data of regular files. Accepts tar (ustar, pax, GNU),
// plain or gzip-compressed; `what` names the tarball in errors, each of which names the value
// and the limit it broke.
Result<std::vector<TarEntry>> readTarGz(std::string_view bytes, const std::string& what,
                                        const TarLimits& limits = {});

// A ustar + gzip archive of `entries` in the given order; only kFile and kDirectory are written.
// Files get mode 0644 (0755 when `executable`), directories 0755, owner 0:0, and `mtime` (seconds
// since the epoch).
Result<std::string> writeTarGz(const std::vector<TarEntry>& entries, std::int64_t mtime);

}  // namespace kiln::core
