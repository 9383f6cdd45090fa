// What a selector test's variant table points to: a runner's VariantInfo row holds the generated
// accessor of its variant (`const kiln_variant* (*)()`); &fixedVariant<kD128Bf16> is that
// accessor for a kiln_variant the test defines.
#pragma once

#include "kiln/variant.h"

namespace kiln::fake {

template <const kiln_variant& kVariant>
const kiln_variant* fixedVariant() {
  return &kVariant;
}

}  // namespace kiln::fake
