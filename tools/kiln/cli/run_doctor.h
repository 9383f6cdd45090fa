// `kiln doctor` as a library call, in the CLI because it is the one command that needs the kiln
// runtime (kiln_core does not depend on it): the artifact's images, loaded from its files, checked
// against a real device through the runtime's own doctor.
#pragma once

#include <filesystem>

#include "core/result.h"
#include "kiln/runtime.h"

namespace kiln::cli {

// Loads every image of the artifact, each checked before any reaches the runtime (the path
// verify expects, a regular file opened without following links, the recorded size and sha256),
// builds in memory exactly the kiln_variant tables the generated shims would hold, so that it
// checks what a consumer would link, and asks the runtime which variants device `ordinal` can run.
// No device or driver: an environment error carrying the runtime's message.
core::Result<DoctorReport> runDoctor(const std::filesystem::path& dir, int ordinal);

}  // namespace kiln::cli
