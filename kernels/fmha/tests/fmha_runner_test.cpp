// The fmha runner (runner.cpp, compiled here against the group header kiln build's code generation
// writes for every variant of kiln.toml, with fake sm_90a cubins: kiln_fake_artifact) on the fake
// driver: run() encodes the three tensor maps the selector describes into the kernel
// parameters and launches the plan on the caller's stream; a device other than sm_90 (and a window
// or paged K / V on sm_90) runs the mma kernel instead; a pinned wgmma on another SM, an invalid
// problem, a zero batch and a failed encode launch nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fmha/launch.h"
#include "fmha/params.h"
#include "kiln/runners/fmha.h"
#include "runtime/fake_driver.h"
#include "support/fake_address.h"

namespace kiln::fmha {
namespace {

using fake::fakeAddress;

// bf16 d128 causal, GQA 16/2, 3 sequences in 3000 query and 7000 key tokens, the longest 1500.
Problem validProblem() {
  Problem p;
  p.dtype = DType::kBFloat16;
  p.mask = Mask::kCausal;
  p.head_dim = 128;
  p.batch = 3;
  p.q_heads = 16;
  p.kv_heads = 2;
  p.total_q = 3000;
  p.total_k = 7000;
  p.max_seqlen_q = 1500;
  p.scale = 0.125f;
  p.out = fakeAddress(0x7f0000010000);
  p.lse = fakeAddress<float>(0x7f0000020000);
  p.q = fakeAddress(0x7f0000030000);
  p.k = fakeAddress(0x7f0000040000);
  p.v = fakeAddress(0x7f0000050000);
  p.cu_seqlens_q = fakeAddress<const std::int32_t>(0x7f0000060000);
  p.cu_seqlens_k = fakeAddress<const std::int32_t>(0x7f0000070000);
  return p;
}

// The words the fake driver writes into a map: its magic, then the tensor's address.
void expectEncodedMap(const TensorMap& map, const void* address, const char* what) {
  EXPECT_EQ(map.opaque[0], fake::kTensorMapMagic) << what;
  EXPECT_EQ(map.opaque[1], reinterpret_cast<std::uintptr_t>(address)) << what;
}

TEST(FmhaRunner, RunEncodesTheThreeMapsAndLaunchesThePlan) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(FmhaParams);
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  ASSERT_TRUE(canImplement(p).ok()) << canImplement(p).toString();
  ASSERT_TRUE(canImplement(p, 90).ok());
  EXPECT_EQ(workspaceSize(p), 0u);
  const Status s = run(p, nullptr, 0, stream);
  ASSERT_TRUE(s.ok()) << s.toString();

  const std::vector<fake::TensorMapRecord> maps = driver.tensorMaps();
  ASSERT_EQ(maps.size(), 3u);
  const void* addresses[] = {p.q, p.k, p.v};
  const cuuint64_t rows[] = {3000, 7000, 7000};
  const cuuint64_t heads[] = {16, 2, 2};
  const cuuint32_t box_rows[] = {static_cast<cuuint32_t>(kBlockM),
                                 static_cast<cuuint32_t>(blockN(128, true)),
                                 static_cast<cuuint32_t>(blockN(128, true))};
  for (int i = 0; i < 3; ++i) {
    const fake::TensorMapRecord& m = maps[static_cast<std::size_t>(i)];
    EXPECT_EQ(m.type, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) << i;
    EXPECT_EQ(m.rank, 3u) << i;
    EXPECT_EQ(m.address, addresses[i]) << i;
    EXPECT_EQ(m.dims[0], 128u) << i;
    EXPECT_EQ(m.dims[1], rows[i]) << i;
    EXPECT_EQ(m.dims[2], heads[i]) << i;
    EXPECT_EQ(m.strides[0], heads[i] * 128u * 2u) << i;
    EXPECT_EQ(m.strides[1], 256u) << i;
    EXPECT_EQ(m.box[0], 64u) << i;
    EXPECT_EQ(m.box[1], box_rows[i]) << i;
    EXPECT_EQ(m.box[2], 1u) << i;
    EXPECT_EQ(m.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE) << i;
    EXPECT_EQ(m.swizzle, CU_TENSOR_MAP_SWIZZLE_128B) << i;
    EXPECT_EQ(m.l2_promotion, CU_TENSOR_MAP_L2_PROMOTION_L2_128B) << i;
    EXPECT_EQ(m.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) << i;
  }
  // Each map was encoded in place, into the parameter struct that is launched.
  EXPECT_EQ(static_cast<unsigned char*>(maps[1].map) - static_cast<unsigned char*>(maps[0].map),
            static_cast<std::ptrdiff_t>(offsetof(FmhaParams, tma_k)));
  EXPECT_EQ(static_cast<unsigned char*>(maps[2].map) - static_cast<unsigned char*>(maps[0].map),
            static_cast<std::ptrdiff_t>(offsetof(FmhaParams, tma_v)));

  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_fmha");
  EXPECT_EQ(launch.stream, stream);
  // Persistent: 12 m blocks (ceil(1500 / 128)) x 16 heads x 3 sequences = 576 tiles on the fake
  // H200's 132 SMs: one block per SM.
  EXPECT_EQ(launch.grid[0], 132u);
  EXPECT_EQ(launch.grid[1], 1u);
  EXPECT_EQ(launch.grid[2], 1u);
  EXPECT_EQ(launch.block[0], static_cast<unsigned>(kThreads));
  EXPECT_EQ(launch.shared_bytes, static_cast<unsigned>(sharedBytes(128, true)));
  EXPECT_EQ(driver.functionSharedOptIn("kiln_fmha"), sharedBytes(128, true));

  const std::vector<unsigned char> bytes = driver.lastLaunchFirstArg();
  ASSERT_EQ(bytes.size(), sizeof(FmhaParams));
  FmhaParams params;
  std::memcpy(static_cast<void*>(&params), bytes.data(), sizeof(params));
  expectEncodedMap(params.tma_q, p.q, "tma_q");
  expectEncodedMap(params.tma_k, p.k, "tma_k");
  expectEncodedMap(params.tma_v, p.v, "tma_v");
  EXPECT_EQ(params.out, p.out);
  EXPECT_EQ(params.lse, p.lse);
  EXPECT_EQ(params.cu_seqlens_q, p.cu_seqlens_q);
  EXPECT_EQ(params.cu_seqlens_k, p.cu_seqlens_k);
  EXPECT_EQ(params.batch, 3);
  EXPECT_EQ(params.q_heads, 16);
  EXPECT_EQ(params.kv_heads, 2);
  EXPECT_EQ(params.group_size, 8);
  EXPECT_EQ(params.total_q, 3000);
  EXPECT_EQ(params.total_k, 7000);
  EXPECT_EQ(params.m_blocks, 12);
  EXPECT_FLOAT_EQ(params.scale, 0.125f);
  EXPECT_FLOAT_EQ(params.scale_log2, 0.125f * 1.4426950408889634f);
}

TEST(FmhaRunner, Fp16VariantEncodesFp16Maps) {
  fake::Driver driver({fake::h200()});
  Problem p = validProblem();
  p.dtype = DType::kFloat16;
  p.mask = Mask::kFull;
  p.head_dim = 64;
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  ASSERT_TRUE(s.ok()) << s.toString();
  for (const fake::TensorMapRecord& m : driver.tensorMaps()) {
    EXPECT_EQ(m.type, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
    EXPECT_EQ(m.dims[0], 64u);
  }
  EXPECT_EQ(driver.lastLaunch().shared_bytes, static_cast<unsigned>(sharedBytes(64, false)));
}

// On an SM wgmma cannot serve, run() launches the mma variant instead: no tensor map, grid (m
// blocks of packed GQA rows, KV heads, sequences), the FmhaMmaParams the selector planned.
TEST(FmhaRunner, OtherSmsRunTheMmaKernel) {
  fake::Driver driver({fake::h200(), fake::orin()});
  driver.record_first_arg_bytes = sizeof(FmhaMmaParams);
  const Problem p = validProblem();
  const Status s = run(p, nullptr, 0, driver.makeStream(1));
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_TRUE(canImplement(p, 87).ok());
  EXPECT_EQ(driver.tensor_map_encodes.load(), 0);
  ASSERT_EQ(driver.launches.load(), 1);
  const fake::LaunchRecord launch = driver.lastLaunch();
  EXPECT_EQ(launch.function, "kiln_fmha_mma");
  EXPECT_EQ(launch.device, 1);
  EXPECT_EQ(launch.grid[0], (1500u * 8 + 127) / 128);  // max_seqlen_q x G rows, 128 per block
  EXPECT_EQ(launch.grid[1], 2u);
  EXPECT_EQ(launch.grid[2], 3u);
  EXPECT_EQ(launch.block[0], 128u);  // 4 warps of 32 rows
  EXPECT_EQ(launch.shared_bytes,
            static_cast<unsigned>(mma::sharedBytes(128, mma::prefillShape(128))));
  FmhaMmaParams params;
  const std::vector<unsigned char> bytes = driver.lastLaunchFirstArg();
  ASSERT_EQ(bytes.size(), sizeof(params));
  std::memcpy(&params, bytes.data(), sizeof(params));
  EXPECT_EQ(params.q, p.q);
  EXPECT_EQ(params.cu_seqlens_k, p.cu_seqlens_k);
  EXPECT_EQ(params.page_table, nullptr);
  EXPECT_EQ(params.group_size, 8);
  EXPECT_EQ(params.token_stride, 2 * 128);
  EXPECT_EQ(params.head_stride, 128);
  EXPECT_EQ(params.window_left, -1);
  // On the H200 the same problem takes wgmma.
  ASSERT_TRUE(run(p, nullptr, 0, driver.makeStream(0)).ok());
  EXPECT_EQ(driver.lastLaunch().function, "kiln_fmha");
}

// wgmma asked for by name is never replaced: on sm_87 it is refused before any encode or launch.
TEST(FmhaRunner, PinnedWgmmaOnOtherSmsIsRefusedBeforeAnyEncodeOrLaunch) {
  fake::Driver driver({fake::h200(), fake::orin()});
  Problem p = validProblem();
  p.kernel = Kernel::kWgmma;
  const Status s = run(p, nullptr, 0, driver.makeStream(1));
  EXPECT_EQ(s.code(), StatusCode::kNoKernelImage);
  EXPECT_EQ(s.message(),
            "fmha_wgmma_d128_bf16_causal: artifact has sm_90a only; device is sm_87; the fmha "
            "wgmma kernel (TMA, wgmma) runs on sm_90 only");
  EXPECT_EQ(canImplement(p, 87).message(), s.message());
  EXPECT_EQ(driver.tensor_map_encodes.load(), 0);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.load_attempts.load(), 0);
}

// A window stays on wgmma on the H200; paged K / V take the mma kernel there too, with strides
// that follow the layout.
TEST(FmhaRunner, WindowOnWgmmaAndPagedKvOnMmaOnSm90) {
  fake::Driver driver({fake::h200()});
  driver.record_first_arg_bytes = sizeof(FmhaParams);
  Problem p = validProblem();
  p.window_left = 256;
  ASSERT_TRUE(run(p, nullptr, 0, driver.makeStream(0)).ok());
  EXPECT_EQ(driver.lastLaunch().function, "kiln_fmha");
  {
    FmhaParams params;
    const std::vector<unsigned char> bytes = driver.lastLaunchFirstArg();
    ASSERT_EQ(bytes.size(), sizeof(params));
    std::memcpy(&params, bytes.data(), sizeof(params));
    EXPECT_EQ(params.window_left, 256);
  }
  driver.record_first_arg_bytes = sizeof(FmhaMmaParams);
  p = validProblem();
  p.total_k = 0;
  p.cu_seqlens_k = nullptr;
  p.page_table = fakeAddress<const std::int32_t>(0x7f0000080000);
  p.seq_lens_k = fakeAddress<const std::int32_t>(0x7f0000090000);
  p.page_size = 64;
  p.max_pages_per_seq = 40;
  p.num_pages = 500;
  p.kv_layout = KvLayout::kHnd;
  ASSERT_TRUE(run(p, nullptr, 0, driver.makeStream(0)).ok());
  EXPECT_EQ(driver.lastLaunch().function, "kiln_fmha_mma");
  FmhaMmaParams params;
  const std::vector<unsigned char> bytes = driver.lastLaunchFirstArg();
  ASSERT_EQ(bytes.size(), sizeof(params));
  std::memcpy(&params, bytes.data(), sizeof(params));
  EXPECT_EQ(params.page_table, p.page_table);
  EXPECT_EQ(params.seq_lens_k, p.seq_lens_k);
  EXPECT_EQ(params.cu_seqlens_k, nullptr);
  EXPECT_EQ(params.page_size_log2, 6);
  EXPECT_EQ(params.page_stride, 64 * 2 * 128);
  EXPECT_EQ(params.token_stride, 128);      // HND: keys of a head are adjacent
  EXPECT_EQ(params.head_stride, 64 * 128);  // a head's page_size rows
  EXPECT_EQ(params.max_pages_per_seq, 40);
  EXPECT_EQ(params.num_pages, 500);
  EXPECT_EQ(driver.tensor_map_encodes.load(), 3);  // the windowed wgmma run's maps only
}

// run() promises the device that owns the stream, from any thread (issue 33): from a thread with
// no current context, and from one whose current context is another device's, the maps are
// encoded and the kernel launched in the stream's context (the fake, like the driver, refuses an
// encode without one), and the thread's own context is current again afterwards.
TEST(FmhaRunner, RunsFromAThreadWithNoContextOrAnotherDevicesContext) {
  fake::Driver driver({fake::h200(), fake::h200()});
  ASSERT_TRUE(driver.encode_needs_context);
  CUstream stream = driver.makeStream(0);
  const Problem p = validProblem();
  std::thread none([&] {
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
    const Status s = run(p, nullptr, 0, stream);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(fake::Driver::currentContext(), nullptr);
  });
  none.join();
  std::thread other([&] {
    driver.makeCurrent(1);
    const Status s = run(p, nullptr, 0, stream);
    EXPECT_TRUE(s.ok()) << s.toString();
    EXPECT_EQ(fake::Driver::currentContext(), driver.context(1));
  });
  other.join();
  EXPECT_EQ(driver.tensorMaps().size(), 6u);
  EXPECT_EQ(driver.launches.load(), 2);
  EXPECT_EQ(driver.lastLaunch().stream, stream);
}

TEST(FmhaRunner, InvalidProblemIsRefusedAsCanImplementSays) {
  fake::Driver driver({fake::h200()});
  Problem p = validProblem();
  p.q_heads = 15;
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "fmha: q_heads 15 is not a positive multiple of kv_heads 2");
  EXPECT_EQ(canImplement(p).message(), s.message());
  p = validProblem();
  p.head_dim = 96;  // kiln.toml builds 64 and 128 (wgmma), 64, 128 and 256 (mma)
  EXPECT_EQ(run(p, nullptr, 0, driver.makeStream(0)).message(),
            "fmha: head_dim 96 is not built for bf16 causal; built for bf16 causal: 64, 128, 256");
  EXPECT_EQ(driver.tensor_map_encodes.load(), 0);
  EXPECT_EQ(driver.launches.load(), 0);
}

TEST(FmhaRunner, ZeroBatchTouchesNothing) {
  fake::Driver driver({fake::h200()});
  Problem p;
  p.dtype = DType::kBFloat16;
  p.mask = Mask::kCausal;
  p.head_dim = 128;
  const Status s = run(p, nullptr, 0, driver.makeStream(0));
  EXPECT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(driver.tensor_map_encodes.load(), 0);
  EXPECT_EQ(driver.launches.load(), 0);
  EXPECT_EQ(driver.attribute_queries.load(), 0);
}

TEST(FmhaRunner, FailedEncodeNamesTheMapAndLaunchesNothing) {
  fake::Driver driver({fake::h200()});
  driver.tensor_map_result = CUDA_ERROR_INVALID_VALUE;
  const Status s = run(validProblem(), nullptr, 0, driver.makeStream(0));
  ASSERT_EQ(s.code(), StatusCode::kDriverError);
  EXPECT_EQ(s.message().rfind("fmha: tma_q: tensor map (bf16, rank 3, dims (128, 3000, 16)", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find("CUDA_ERROR_INVALID_VALUE (1)"), std::string::npos) << s.message();
  EXPECT_EQ(driver.launches.load(), 0);
}

}  // namespace
}  // namespace kiln::fmha
