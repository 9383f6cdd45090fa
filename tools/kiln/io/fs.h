// Filesystem helpers for the builder: whole-file read/write, recursive listing in a stable
// order, sha256 (OpenSSL EVP) and the two ELF facts the builder checks (machine, global symbols).
// Each returns a Result whose message names the path, so callers never re-wrap errno text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"

namespace kiln::io {

core::Result<std::string> readFile(const std::filesystem::path& path);
// Creates parent directories; writes through a temporary file and renames it into place.
core::Result<void> writeFile(const std::filesystem::path& path, const std::string& contents);
core::Result<void> copyFile(const std::filesystem::path& from, const std::filesystem::path& to);
// Copies every regular file under `from` to the same relative path under `to`.
core::Result<void> copyTree(const std::filesystem::path& from, const std::filesystem::path& to);
// Every regular file under `dir`, sorted, as absolute paths (empty when `dir` does not exist).
std::vector<std::filesystem::path> listFiles(const std::filesystem::path& dir);

std::string sha256Hex(const std::string& bytes);
core::Result<std::string> sha256File(const std::filesystem::path& path);

// ELF e_machine of an object: 62 (x86_64), 183 (aarch64), 190 (CUDA cubin).
core::Result<int> elfMachine(const std::filesystem::path& path);
inline constexpr int kElfMachineX86_64 = 62;
inline constexpr int kElfMachineAarch64 = 183;
inline constexpr int kElfMachineCuda = 190;
// Names of the defined symbols with STB_GLOBAL binding (weak and COMDAT symbols excluded:
// the linker merges those, so they cannot clash) of a 64-bit little-endian ELF object.
core::Result<std::vector<std::string>> elfGlobalSymbols(const std::filesystem::path& path);

}  // namespace kiln::io
