// What a PTX image says about itself, read from its text: the entry kernels (`.entry <name>`,
// `.visible .entry` for the extern "C" __global__ functions) and the `.target sm_NN` it was
// generated for. PTX images have no ptxas run at build time (the driver JIT-compiles them at
// module load), so these take the place of the ptxas report for the entry check and of the ELF
// header for verify's SM check.
//
// Observed with CUDA 13.0.88 (`nvcc -ptx -arch=compute_80`): a comment header, `.version 9.0`,
// `.target sm_80`, `.address_size 64`, then one `.visible .entry name(` per kernel. `//` comments
// are skipped (NVVM writes `// .globl name` above each entry); NVVM writes no `/* */` comments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::core {

// The names after every `.entry` directive, in order of appearance.
std::vector<std::string> ptxEntries(std::string_view ptx);

// The SM of the first `.target sm_NN[...]` directive ("sm_80" -> 80); 0 when there is none.
int ptxTargetSm(std::string_view ptx);

}  // namespace kiln::core
