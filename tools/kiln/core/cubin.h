// What a cubin says about itself: the SM it was compiled for, read from its ELF header, and the
// ptxas target (which carries the `a` of sm_90a) from the toolkit note. verify compares both
// against metadata.json, so a cubin renamed or copied from another build cannot pass for the SM
// its file name claims.
//
// Decoding, from cubins compiled here with CUDA 13.0.88 (`nvcc -cubin -arch=sm_XX`, a one-line
// kernel; e_machine 190, EI_OSABI 0x41, EI_ABIVERSION 8):
//   sm_75   e_flags 0x06004b04      sm_90   0x06005a04      sm_110  0x06006e02
//   sm_80           0x06005004      sm_90a  0x06005a04      sm_110a 0x06006e02
//   sm_86           0x06005604      sm_100  0x06006402      sm_120  0x06007802
//   sm_87           0x06005704      sm_100a 0x06006402      sm_120a 0x06007802
//   sm_89           0x06005904      sm_103a 0x06006702      sm_121  0x06007902
// so with EI_ABIVERSION 8 the SM is bits 15:8 of e_flags (0x5a = 90). `-G` adds 0x08000000;
// the low byte (4 up to sm_90, 2 from sm_100) is not the SM. The `a` suffix is not in e_flags at
// all: sm_90 and sm_90a cubins differ only in section contents, among them the ptxas command
// line "-arch sm_90a -m 64" in the .note.nv.tkinfo note, which is where readCubin looks.
// Toolkits before CUDA 13 write EI_ABIVERSION 7 with the SM in bits 7:0 of e_flags (the layout
// LLVM's ELF.h documents as EF_CUDA_SM); no such toolkit is installed here, so that branch is
// implemented from the documented layout, not from an observed cubin. Other ABI versions are an
// error rather than a guess.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace kiln::core {

struct CubinInfo {
  int sm = 0;                // 90 for sm_90 and sm_90a
  int abi_version = 0;       // EI_ABIVERSION
  std::uint32_t flags = 0;   // e_flags, for messages
  std::string ptxas_target;  // "sm_90a" from .note.nv.tkinfo; empty when the note is absent
};

// Fails when the bytes are not a 64-bit ELF with e_machine 190 (CUDA), naming `what`.
Result<CubinInfo> readCubin(std::string_view bytes, const std::string& what);

}  // namespace kiln::core
