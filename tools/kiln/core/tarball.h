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
};

// Bounds on what reading will hold in memory, so a decompression bomb is an error, not an OOM.
struct TarLimits {
  std::uint64_t max_entries = 100'000;
  std::uint64_t max_total_bytes = std::uint64_t{4} << 30;  // 4 GiB of file data
  std::uint64_t max_path = 4096;
};

// Every entry, in archive order, with the data of regular files. Accepts tar (ustar, pax, GNU),
// plain or gzip-compressed; `what` names the tarball in errors.
Result<std::vector<TarEntry>> readTarGz(std::string_view bytes, const std::string& what,
                                        const TarLimits& limits = {});

// A ustar + gzip archive of `entries` in the given order; only kFile and kDirectory are written.
// Files get mode 0644, directories 0755, owner 0:0, and `mtime` (seconds since the epoch).
Result<std::string> writeTarGz(const std::vector<TarEntry>& entries, std::int64_t mtime);

}  // namespace kiln::core
