// Filesystem, hashing and ELF helpers. ELF is read by hand (64-bit little endian only: the
// x86_64 and aarch64 hosts kiln targets, and cubins) because the builder needs just two facts
// and should not depend on the target's binutils to learn them.
#include "io/fs.h"

#include <openssl/evp.h>
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

std::string sha256Hex(const std::string& bytes) {
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

namespace {

template <typename T>
T load(const std::string& bytes, size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

core::Result<void> checkElf64(const std::string& bytes, const fs::path& path) {
  if (bytes.size() < 64 || std::memcmp(bytes.data(),
                                       "\x7f"
                                       "ELF",
                                       4) != 0) {
    return core::makeError(fmt::format("{}: not an ELF file", path.string()));
  }
  if (bytes[4] != 2 || bytes[5] != 1) {
    return core::makeError(fmt::format("{}: not a 64-bit little-endian ELF file", path.string()));
  }
  return {};
}

}  // namespace

core::Result<int> elfMachine(const fs::path& path) {
  auto bytes = readFile(path);
  if (!bytes) return bytes.failure();
  auto valid = checkElf64(*bytes, path);
  if (!valid) return valid.failure();
  return static_cast<int>(load<std::uint16_t>(*bytes, 18));
}

core::Result<std::vector<std::string>> elfGlobalSymbols(const fs::path& path) {
  auto read = readFile(path);
  if (!read) return read.failure();
  const std::string& bytes = *read;
  auto valid = checkElf64(bytes, path);
  if (!valid) return valid.failure();
  auto corrupt = [&] {
    return core::makeError(fmt::format("{}: corrupt ELF section table", path.string()));
  };
  const auto shoff = load<std::uint64_t>(bytes, 40);
  const auto shentsize = load<std::uint16_t>(bytes, 58);
  const auto shnum = load<std::uint16_t>(bytes, 60);
  if (shentsize < 64 || shoff + std::uint64_t{shnum} * shentsize > bytes.size()) return corrupt();
  std::vector<std::string> names;
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const size_t sh = shoff + size_t{i} * shentsize;
    if (load<std::uint32_t>(bytes, sh + 4) != 2) continue;  // SHT_SYMTAB
    const auto offset = load<std::uint64_t>(bytes, sh + 24);
    const auto size = load<std::uint64_t>(bytes, sh + 32);
    const auto link = load<std::uint32_t>(bytes, sh + 40);
    const auto entsize = load<std::uint64_t>(bytes, sh + 56);
    if (link >= shnum || entsize < 24 || offset + size > bytes.size()) return corrupt();
    const size_t strsh = shoff + size_t{link} * shentsize;
    const auto stroff = load<std::uint64_t>(bytes, strsh + 24);
    const auto strsize = load<std::uint64_t>(bytes, strsh + 32);
    if (stroff + strsize > bytes.size()) return corrupt();
    for (std::uint64_t s = offset; s + entsize <= offset + size; s += entsize) {
      const auto name = load<std::uint32_t>(bytes, s);
      const auto info = static_cast<unsigned char>(bytes[s + 4]);
      const auto shndx = load<std::uint16_t>(bytes, s + 6);
      if ((info >> 4) != 1 || shndx == 0 || name >= strsize) continue;  // STB_GLOBAL, defined
      names.emplace_back(bytes.c_str() + stroff + name);
    }
  }
  return names;
}

}  // namespace kiln::io
