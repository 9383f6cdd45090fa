// Cubin header decoding; the observations behind it are in cubin.h.
#include "core/cubin.h"

#include <cctype>

#include <fmt/format.h>

#include "core/elf.h"

namespace kiln::core {

namespace {

constexpr int kAbiLegacy = 7;  // SM in e_flags bits 7:0 (CUDA 12 and earlier)
constexpr int kAbiCuda13 = 8;  // SM in e_flags bits 15:8 (observed with CUDA 13.0.88)

// "sm_90a" from the ptxas command line recorded in the toolkit note ("... -arch sm_90a -m 64 ").
std::string ptxasTarget(std::string_view note) {
  constexpr std::string_view kFlag = "-arch ";
  const size_t at = note.find(kFlag);
  if (at == std::string_view::npos) return {};
  size_t end = at + kFlag.size();
  while (end < note.size() &&
         (std::isalnum(static_cast<unsigned char>(note[end])) || note[end] == '_'))
    ++end;
  return std::string(note.substr(at + kFlag.size(), end - at - kFlag.size()));
}

}  // namespace

Result<CubinInfo> readCubin(std::string_view bytes, const std::string& what) {
  auto header = readElfHeader(bytes, what);
  if (!header) return header.failure();
  if (header->machine != kElfMachineCuda) {
    return makeError(fmt::format("{}: ELF machine {}, expected {} (CUDA cubin)", what,
                                 header->machine, kElfMachineCuda));
  }
  if (header->bits != 64) {
    return makeError(fmt::format("{}: a {}-bit ELF file; cubins are 64-bit", what, header->bits));
  }
  CubinInfo info;
  info.abi_version = header->abi_version;
  info.flags = header->flags;
  if (header->abi_version == kAbiCuda13) {
    info.sm = static_cast<int>((header->flags >> 8) & 0xffu);
  } else if (header->abi_version <= kAbiLegacy) {
    info.sm = static_cast<int>(header->flags & 0xffu);
  } else {
    return makeError(
        fmt::format("{}: cubin ELF ABI version {} is unknown (this kiln decodes versions up to {})",
                    what, header->abi_version, kAbiCuda13));
  }
  auto note = elfSection(bytes, what, ".note.nv.tkinfo");
  if (!note) return note.failure();
  if (*note) info.ptxas_target = ptxasTarget(**note);
  return info;
}

}  // namespace kiln::core
