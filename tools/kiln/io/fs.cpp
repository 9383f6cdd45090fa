// Filesystem, hashing and ELF helpers. ELF is read by hand (64-bit little endian only: the
// x86_64 and aarch64 hosts kiln targets, and cubins) because the builder needs just two facts
// and should not depend on the target's binutils to learn them.
#include "io/fs.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

namespace fs = std::filesystem;

namespace kiln::io {

core::Result<std::string> readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return core::makeError(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) return core::makeError(fmt::format("{}: read failed", path.string()));
  return buffer.str();
}

namespace {

const char* fileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a fifo";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a regular file";
}

// Closes the descriptor on every return.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

bool readRegularFileOr(const fs::path& path, std::uint64_t max_bytes, Links links, std::string* out,
                       FileRefusal* refusal) {
  using Reason = FileRefusal::Reason;
  auto refuse = [&](Reason reason, int error = 0, unsigned mode = 0, std::uint64_t size = 0) {
    *refusal = FileRefusal{reason, error, mode, size};
    return false;
  };
  int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  if (links == Links::kRefuse) flags |= O_NOFOLLOW;
  Fd file{::open(path.c_str(), flags)};
  if (file.fd < 0) {
    const int error = errno;
    return refuse(error == ELOOP && links == Links::kRefuse ? Reason::kSymlink : Reason::kOpen,
                  error);
  }
  struct stat st {};
  if (::fstat(file.fd, &st) != 0) return refuse(Reason::kStat, errno);
  if (!S_ISREG(st.st_mode)) return refuse(Reason::kNotRegular, 0, st.st_mode);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) return refuse(Reason::kTooBig, 0, 0, size);
  // A regular file never blocks; back to blocking reads all the same.
  ::fcntl(file.fd, F_SETFL, ::fcntl(file.fd, F_GETFL) & ~O_NONBLOCK);
  std::string& bytes = *out;
  bytes.resize(static_cast<size_t>(size));
  size_t done = 0;
  for (;;) {
    if (done == bytes.size()) {
      // One byte past the stat size tells a file that grew since the fstat.
      if (bytes.size() > max_bytes) return refuse(Reason::kGrew, 0, 0, bytes.size());
      bytes.resize(std::min<std::uint64_t>(bytes.size() + 64 * 1024, max_bytes + 1));
    }
    const ssize_t n = ::read(file.fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return refuse(Reason::kRead, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return true;
}

core::Result<std::string> readRegularFile(const fs::path& path, std::uint64_t max_bytes,
                                          Links links) {
  using Reason = FileRefusal::Reason;
  std::string bytes;
  FileRefusal r;
  if (readRegularFileOr(path, max_bytes, links, &bytes, &r)) return bytes;
  const std::string p = path.string();
  switch (r.reason) {
    case Reason::kSymlink:
      return core::makeError(fmt::format(
          "{}: is a symlink; expected a regular file (links are not followed here)", p));
    case Reason::kOpen:
      return core::makeError(fmt::format("{}: cannot read: {}", p, std::strerror(r.error)));
    case Reason::kStat:
      return core::makeError(fmt::format("{}: cannot stat: {}", p, std::strerror(r.error)));
    case Reason::kNotRegular:
      return core::makeError(
          fmt::format("{}: is {}; expected a regular file", p, fileKind(r.mode)));
    case Reason::kTooBig:
      return core::makeError(
          fmt::format("{}: {} bytes, more than the limit of {} bytes", p, r.size, max_bytes));
    case Reason::kGrew:
      return core::makeError(
          fmt::format("{}: grew past the limit of {} bytes while read", p, max_bytes));
    case Reason::kRead:
      return core::makeError(fmt::format("{}: read failed: {}", p, std::strerror(r.error)));
  }
  return core::makeError(fmt::format("{}: cannot read", p));
}

core::Result<void> writeFile(const fs::path& path, const std::string& contents) {
  std::error_code ec;
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec)
    return core::makeError(
        fmt::format("{}: cannot create directory: {}", path.parent_path().string(), ec.message()));
  fs::path tmp = path;
  tmp += fmt::format(".tmp-{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      return core::makeError(
          fmt::format("{}: cannot write: {}", tmp.string(), std::strerror(errno)));
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) return core::makeError(fmt::format("{}: write failed (disk full?)", tmp.string()));
  }
  fs::rename(tmp, path, ec);
  if (ec)
    return core::makeError(
        fmt::format("{}: cannot rename into place: {}", path.string(), ec.message()));
  return {};
}

core::Result<void> copyFile(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (to.has_parent_path()) fs::create_directories(to.parent_path(), ec);
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    return core::makeError(
        fmt::format("cannot copy {} to {}: {}", from.string(), to.string(), ec.message()));
  return {};
}

std::vector<fs::path> listFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(fs::absolute(it->path()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * length);
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

core::Result<std::string> sha256File(const fs::path& path) {
  auto bytes = readFile(path);
  if (!bytes) return bytes.failure();
  return sha256Hex(*bytes);
}

bool RealFileSystem::exists(const fs::path& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::vector<std::string> RealFileSystem::list(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

core::Result<std::string> RealFileSystem::readFile(const fs::path& path) {
  return io::readFile(path);
}

core::Result<void> RealFileSystem::writeFile(const fs::path& path, const std::string& contents) {
  return io::writeFile(path, contents);
}

core::Result<void> RealFileSystem::copyFile(const fs::path& from, const fs::path& to) {
  return io::copyFile(from, to);
}

std::error_code RealFileSystem::createDirectories(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return ec;
}

std::error_code RealFileSystem::rename(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  return ec;
}

std::error_code RealFileSystem::removeAll(const fs::path& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  return ec;
}

}  // namespace kiln::io
