// Compile: every tool the build runs to make the artifact, through io::ProcessRunner (so tests
// run the builder on a fake toolchain, tests/unit/fake_toolchain.h), -j at a time, with progress
// and every command going to the sink. Two steps, on either side of assemble (assemble.h):
//   - the images: the selected groups' inputs and the CUTLASS headers are staged where nvcc
//     reads them (core/inputs.h: byte-reproducible images), then each job goes through its
//     kind's front end (core/frontend.h) into the staging directory; each image is checked (a
//     CUDA ELF cubin, or PTX text without a NUL) and the images of a variant must agree on their
//     ABI (core/cubin_abi.h), since one header and table serve them all;
//   - the library: every generated, runtime and runner source through the host compiler, each
//     object checked for the arch's ELF machine and against duplicate global symbols, then
//     archived with `ar rcsD` (members with time, uid and gid 0) into lib/libkiln.a; then
//     bin/kiln-doctor, linked with that library.
// The tools write into the staging directory (publish.h) that the caller created. With a compiler
// launcher (BuildOptions::compiler_launcher), every nvcc and host-compiler command runs as
// `<launcher> <command>`; the commands recorded (CompiledImage::command) are without it.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/build_inputs.h"
#include "core/builder.h"
#include "core/metadata.h"
#include "core/ptxas.h"
#include "core/result.h"
#include "io/process.h"

namespace kiln::core {

// One job's image, as its front end wrote it, and what the front end reported.
struct CompiledImage {
  std::string variant;
  int sm = 0;
  std::string bytes;  // the image file
  double seconds = 0;
  std::map<std::string, KernelResources> kernels;  // ptxas's report (empty for PTX)
  // The command that wrote the image, naming the artifact's directory where it ran in the
  // staging one (the path the image has once published).
  std::vector<std::string> command;
};

// One object of the library. A relative path is in the staging directory.
struct LibraryMember {
  std::filesystem::path source;  // a generated source (relative) or a runtime or runner one
  std::filesystem::path object;
  std::vector<std::filesystem::path> includes;  // besides those every member gets
};

// The images of `inputs.selection.jobs`, in the jobs' order.
Result<std::vector<CompiledImage>> compileImages(const BuildInputs& inputs,
                                                 const std::filesystem::path& staging,
                                                 io::ProcessRunner& runner, BuildSink& sink);

// lib/libkiln.a in `staging`, from `members` in their order; its record (path, sha256, size).
Result<LibraryRecord> compileLibrary(const BuildInputs& inputs,
                                     const std::vector<LibraryMember>& members,
                                     const std::filesystem::path& staging,
                                     io::ProcessRunner& runner, BuildSink& sink);

// bin/kiln-doctor in `staging`: the runtime's doctor main (RuntimeSources::doctor) compiled like
// a library member and linked with lib/libkiln.a (compileLibrary first) by the host compiler,
// with kDoctorLinkFlags (library_recipe.h); checked to be an executable ELF file of the arch.
// Its record (path, sha256, size).
Result<DoctorRecord> compileDoctor(const BuildInputs& inputs, const std::filesystem::path& staging,
                                   io::ProcessRunner& runner, BuildSink& sink);

}  // namespace kiln::core
