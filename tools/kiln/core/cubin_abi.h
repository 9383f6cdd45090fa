// The host-visible ABI of a cubin: its entry kernels and, per entry, the parameter layout the
// driver launches it with. A multi-SM artifact shares one header and one kiln_variant across
// its SM images, so every image of a variant must present the same ABI; the builder compares
// these per variant and fails the build when two SMs disagree (contract 4), rather than letting
// a launch pass the sm_90 argument layout to the sm_87 kernel.
//
// Read from the cubin itself, no cuobjdump (observed with CUDA 13.0.88 cubins for sm_80..sm_120):
//   - entries are the FUNC symbols with STB_GLOBAL binding and the STO_CUDA_ENTRY bit (0x10) in
//     st_other (non-entry __device__ functions lack it);
//   - section ".nv.info.<entry>" holds attribute records: byte format, byte attribute, then for
//     format 4 (a sized value) a u16 size and that many bytes, else a 2-byte value. Attribute
//     0x19 (EIATTR_CBANK_PARAM_SIZE, format 3) is the total parameter bytes; each attribute 0x17
//     (EIATTR_KPARAM_INFO, format 4, 12 bytes) is one parameter: u32 index, u16 ordinal,
//     u16 offset, u32 whose bits 31:18 are its size in bytes.
// A cubin without section headers (a test fake) has no entries; a malformed one is an error.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::core {

struct KernelParam {
  int ordinal = 0;
  int offset = 0;  // bytes into the parameter buffer
  int size = 0;    // bytes
  bool operator==(const KernelParam&) const = default;
};

struct KernelAbi {
  long param_bytes = -1;            // -1: the cubin does not say
  std::vector<KernelParam> params;  // by ordinal
  bool operator==(const KernelAbi&) const = default;
};

// Entry name -> its ABI. `what` names the cubin in errors.
Result<std::map<std::string, KernelAbi>> readCubinAbi(std::string_view bytes,
                                                      const std::string& what);

// One SM image's ABI as the builder compares it: the entries ptxas reported (always known) and
// what the cubin's ELF says (empty for fakes). A PTX image (`ptx`) is not ELF, so readCubinAbi is
// not run on it: its entries are the PTX text's `.entry` names and `elf` stays empty, which
// leaves the entry-set comparison, the part of the check that still applies.
struct ImageAbi {
  int sm = 0;
  std::vector<std::string> ptxas_entries;  // sorted
  std::map<std::string, KernelAbi> elf;    // from readCubinAbi
  bool ptx = false;
};

// Empty when every image agrees; else a message naming the variant, both SMs and the difference
// ("rmsnorm_h4096_bf16: ABI differs between sm_87 and sm_90: entry 'k' takes 24 parameter bytes
// on sm_87 but 32 on sm_90; a variant's header and table are shared by its SMs").
std::string compareImageAbis(const std::string& variant, const std::vector<ImageAbi>& images);

}  // namespace kiln::core
