// The 16-bit format of a kernel's activation dtype, for the groups' GPU tests (which see both the
// runtime's kiln::DType and kernels/common/bits16.h; the support library sees neither).
#pragma once

#include "common/bits16.h"
#include "kiln/dtype.h"

namespace kiln::gpu_test {

// fp16's format for kFloat16, bf16's for anything else: how a test draws and decodes its 16-bit
// values.
inline kiln::common::Format formatOf(kiln::DType dtype) {
  return dtype == kiln::DType::kFloat16 ? kiln::common::Format::kFloat16
                                        : kiln::common::Format::kBFloat16;
}

}  // namespace kiln::gpu_test
