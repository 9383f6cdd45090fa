// ptxas -v parsing, on output captured from nvcc 13.0.88 (-arch=sm_90a -Xptxas -v
// -maxrregcount=32) compiling four kernels: one that spills, a template (mangled name), one
// with static shared memory, and a trivial one.
#include <gtest/gtest.h>

#include "core/ptxas.h"

namespace kiln::core {
namespace {

constexpr const char kCaptured[] =
    R"PTXAS(ptxas info    : Overriding maximum register limit 256 for 'kiln_tiny_spill' with  32 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for '_Z4tmplIfEvPT_' with  32 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for 'kiln_tiny_smem' with  32 of maxrregcount option
ptxas info    : Overriding maximum register limit 256 for 'kiln_tiny_scale' with  32 of maxrregcount option
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kiln_tiny_spill' for 'sm_90a'
ptxas info    : Function properties for kiln_tiny_spill
    320 bytes stack frame, 364 bytes spill stores, 388 bytes spill loads
ptxas info    : Used 32 registers, used 0 barriers, 320 bytes cumulative stack size
ptxas info    : Compile time = 11.864 ms
ptxas info    : Compiling entry function '_Z4tmplIfEvPT_' for 'sm_90a'
ptxas info    : Function properties for _Z4tmplIfEvPT_
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compile time = 1.516 ms
ptxas info    : Compiling entry function 'kiln_tiny_smem' for 'sm_90a'
ptxas info    : Function properties for kiln_tiny_smem
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 31 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 7.808 ms
ptxas info    : Compiling entry function 'kiln_tiny_scale' for 'sm_90a'
ptxas info    : Function properties for kiln_tiny_scale
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
ptxas info    : Compile time = 1.708 ms
)PTXAS";

TEST(Ptxas, ParsesEveryEntryOfCapturedOutput) {
  const auto kernels = parsePtxasReport(kCaptured);
  ASSERT_EQ(kernels.size(), 4u);
  const auto& spill = kernels.at("kiln_tiny_spill");
  EXPECT_EQ(spill.registers, 32);
  EXPECT_EQ(spill.stack_bytes, 320);
  EXPECT_EQ(spill.spill_store_bytes, 364);
  EXPECT_EQ(spill.spill_load_bytes, 388);
  EXPECT_EQ(spill.shared_bytes, 0);
  EXPECT_EQ(kernels.at("_Z4tmplIfEvPT_").registers, 8);
  const auto& smem = kernels.at("kiln_tiny_smem");
  EXPECT_EQ(smem.registers, 31);
  EXPECT_EQ(smem.shared_bytes, 1024);
  EXPECT_EQ(smem.spill_store_bytes, 0);
  EXPECT_EQ(kernels.at("kiln_tiny_scale").registers, 10);
}

TEST(Ptxas, DeviceFunctionPropertiesDoNotLeakIntoTheEntry) {
  const auto kernels = parsePtxasReport(
      "ptxas info    : Function properties for helper\n"
      "    64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
      "ptxas info    : Function properties for k\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Function properties for helper\n"
      "    64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 12 registers, used 0 barriers, 48 bytes smem, 360 bytes cmem[0]\n");
  ASSERT_EQ(kernels.size(), 1u);
  EXPECT_EQ(kernels.at("k").stack_bytes, 0);
  EXPECT_EQ(kernels.at("k").spill_store_bytes, 0);
  EXPECT_EQ(kernels.at("k").registers, 12);
  EXPECT_EQ(kernels.at("k").shared_bytes, 48);
}

TEST(Ptxas, EmptyOutputHasNoKernels) {
  EXPECT_TRUE(parsePtxasReport("").empty());
}

}  // namespace
}  // namespace kiln::core
