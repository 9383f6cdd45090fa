// The subcommand table and the error-to-exit-code mapping shared by every command.
#include "cli/commands.h"

#include <cstdio>

#include <fmt/format.h>

namespace kiln::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"build", "compile kernel variants for one or more SMs into an artifact directory",
       setupBuild},
      {"list", "list the kernel groups and variants of the registry", setupList},
      {"inspect", "show an artifact's metadata (provenance, variants, resources)", setupInspect},
      {"doctor", "check which variants of an artifact this machine's GPU can run", setupDoctor},
      {"package",
       "package an artifact into a checksummed tarball, or build and package the release matrix",
       setupPackage},
      {"verify", "check a tarball or an artifact directory against its metadata and checksum",
       setupVerify},
      {"extract", "verify a tarball and extract it into the artifacts tree", setupExtract},
  };
  return table;
}

int reportError(const std::string& message, core::ErrorKind kind) {
  return printError("kiln", message, kind);
}

std::string defaultRoot() {
  return KILN_SOURCE_DIR;
}

}  // namespace kiln::cli
