// The static library between the artifact and the program: it is what calls into libkiln.a.
#include <string>

#include "kiln/kiln_all.h"

std::string engineDescription() {
  return std::string("artifact ") + kiln_artifact_tag() + ", fingerprint " +
         kiln_artifact_fingerprint();
}
