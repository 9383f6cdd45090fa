// What makes lib/libkiln.a's bytes besides the files it is compiled from. The artifact
// fingerprint (metadata.h) covers the library's inputs: the runtime and runner sources
// (`runtime_inputs`), every variant's fingerprint (its kernel sources, constants, targets, flags
// and tool versions, which fix the images the shims embed), the host compiler and its target, and
// this recipe: the flags every host object is compiled with, the archiver's flags, the flags
// bin/kiln-doctor is linked with, and what kiln's
// code generator writes (the shims, the headers and the artifact table are generated, not read,
// so a generator change without a version bump must still change the fingerprint).
//
// The builder compiles and archives with exactly these flags (a unit test holds the two
// together, library_recipe_test.cpp); the paths it adds (-I, -ffile-prefix-map, -o) are not part
// of the recipe, since what they point at is covered by content.
#pragma once

#include <array>
#include <string>

namespace kiln::core {

// After the compiler, before the include paths: `<cxx> -std=c++20 -O2 -fPIC ...`.
inline constexpr std::array<const char*, 3> kHostCompileFlags = {"-std=c++20", "-O2", "-fPIC"};
// `<ar> rcsD lib/libkiln.a <objects>`: D writes every member with time, uid and gid 0.
inline constexpr char kArchiveFlags[] = "rcsD";
// `<cxx> -o bin/kiln-doctor <kiln_doctor.o> lib/libkiln.a <flags>`: -ldl for the runtime's dlopen
// with a C library older than 2.34. The C++ runtime is linked as a shared library, on purpose:
// statically, GCC 12's libstdc++.a and libgcc_eh.a bring in arc4random and _dl_find_object, so
// the doctor would need the build host's glibc 2.36 on the target, which a Jetson on JetPack 6
// (Ubuntu 22.04, glibc 2.35) lacks; shared, it needs glibc 2.34 and GLIBCXX_3.4.11
// (docs/artifact-format.md, "bin/kiln-doctor").
inline constexpr std::array<const char*, 2> kDoctorLinkFlags = {"-pthread", "-ldl"};

// sha256 of everything the code generator (codegen.h) writes for a fixed probe artifact that
// exercises each of its branches (int, long, bool, dtype and enum constants; cubin, arch-specific
// and PTX images; groups with and without runner types; the artifact table and kiln_all.h).
// Computed once per process.
std::string codegenFingerprint();

// The recipe as the lines artifactFingerprint folds in:
//   host_compile_flags -std=c++20 -O2 -fPIC
//   archive_flags rcsD
//   doctor_link_flags -pthread -ldl
//   codegen <codegenFingerprint()>
std::string libraryRecipe();

}  // namespace kiln::core
