// A reader for the Unix `ar` format that static libraries use, so verify can check every member
// object of lib/libkiln.a (its ELF machine, its symbols) without running the target's binutils,
// which a verifying host may not have (an x86_64 CI checking an aarch64 artifact).
// Supported: the common header "!<arch>\n", 60-byte member headers, the GNU long-name table
// "//" with "/<offset>" names, and the symbol tables "/" and "/SYM64/" (skipped). Thin archives
// and BSD "#1/<len>" names are refused with a message: GNU ar, which the builder uses, writes
// neither.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace kiln::core {

struct ArMember {
  std::string name;       // "rmsnorm_h4096_bf16.o"
  std::string_view data;  // points into the archive's bytes
};

// The members other than the symbol and long-name tables, in archive order.
// `what` names the archive in errors.
Result<std::vector<ArMember>> readArArchive(std::string_view bytes, const std::string& what);

}  // namespace kiln::core
