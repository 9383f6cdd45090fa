// kiln::checkTensorMap / kiln::encodeTensorMap against the fake driver: every documented limit of
// cuTensorMapEncodeTiled is refused before the driver is reached (and without one), with a
// message naming the field, the value and the limit; a valid spec reaches the driver exactly as
// described; a driver failure names the CUresult and the spec. These use the context-free
// overload from a thread with no current context (so the fake's encode_needs_context is off);
// encodeTensorMap(target, ...) and the context it runs in are in stream_target_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "fake_driver.h"
#include "kiln/runtime.h"
#include "kiln/testing/driver.h"

namespace {

using kiln::Status;
using kiln::StatusCode;
using kiln::TensorMapElement;
using kiln::TensorMapL2Promotion;
using kiln::TensorMapOobFill;
using kiln::TensorMapSpec;
using kiln::TensorMapSwizzle;

// Never dereferenced: the fake driver only records it.
const void* fakeAddress(std::uintptr_t a) {
  return reinterpret_cast<const void*>(a);
}

struct alignas(64) MapStorage {
  unsigned char bytes[kiln::kTensorMapBytes];
};

// A 3-D bf16 map as a prefill attention kernel reads Q [4096 tokens, 32 heads, 128 dims]:
// dims (128, 4096, 32), token stride 32 x 128 x 2 bytes, head stride 128 x 2 bytes.
TensorMapSpec validSpec() {
  TensorMapSpec s;
  s.element = TensorMapElement::kBFloat16;
  s.rank = 3;
  s.address = fakeAddress(0x7f0000100000);
  s.dims[0] = 128;
  s.dims[1] = 4096;
  s.dims[2] = 32;
  s.strides[0] = 32 * 128 * 2;
  s.strides[1] = 128 * 2;
  s.box[0] = 64;
  s.box[1] = 128;
  s.box[2] = 1;
  s.swizzle = TensorMapSwizzle::k128B;
  s.l2_promotion = TensorMapL2Promotion::k128B;
  return s;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(TensorMap, ValidSpecReachesTheDriverAsDescribed) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  MapStorage map;
  std::memset(map.bytes, 0xee, sizeof(map.bytes));
  const TensorMapSpec spec = validSpec();
  const Status s = kiln::encodeTensorMap(spec, map.bytes);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(driver.tensor_map_encodes.load(), 1);
  const kiln::fake::TensorMapRecord r = driver.lastTensorMap();
  EXPECT_EQ(r.map, static_cast<void*>(map.bytes));
  EXPECT_EQ(r.type, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(r.rank, 3u);
  EXPECT_EQ(r.address, spec.address);
  EXPECT_EQ(r.dims[0], 128u);
  EXPECT_EQ(r.dims[1], 4096u);
  EXPECT_EQ(r.dims[2], 32u);
  EXPECT_EQ(r.strides[0], 8192u);
  EXPECT_EQ(r.strides[1], 256u);
  EXPECT_EQ(r.box[0], 64u);
  EXPECT_EQ(r.box[1], 128u);
  EXPECT_EQ(r.box[2], 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(r.element_strides[i], 1u) << i;
  EXPECT_EQ(r.interleave, CU_TENSOR_MAP_INTERLEAVE_NONE);
  EXPECT_EQ(r.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  EXPECT_EQ(r.l2_promotion, CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
  EXPECT_EQ(r.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  // The context-free overload pushes none: it runs in the caller's (here none).
  EXPECT_EQ(r.current_context, nullptr);
  EXPECT_EQ(driver.pushes.load(), 0);
  // The driver's bytes are the result.
  std::uint64_t first = 0;
  std::memcpy(&first, map.bytes, sizeof(first));
  EXPECT_EQ(first, kiln::fake::kTensorMapMagic);
}

TEST(TensorMap, EveryEnumValueMapsToTheDriversValue) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  MapStorage map;
  const struct {
    TensorMapElement element;
    CUtensorMapDataType type;
  } elements[] = {
      {TensorMapElement::kUInt8, CU_TENSOR_MAP_DATA_TYPE_UINT8},
      {TensorMapElement::kUInt16, CU_TENSOR_MAP_DATA_TYPE_UINT16},
      {TensorMapElement::kUInt32, CU_TENSOR_MAP_DATA_TYPE_UINT32},
      {TensorMapElement::kFloat16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16},
      {TensorMapElement::kBFloat16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16},
      {TensorMapElement::kFloat32, CU_TENSOR_MAP_DATA_TYPE_FLOAT32},
  };
  for (const auto& e : elements) {
    TensorMapSpec spec = validSpec();
    spec.element = e.element;
    spec.box[0] = 32;  // 32..128 bytes: within the 128-byte swizzle for every element size
    ASSERT_TRUE(kiln::encodeTensorMap(spec, map.bytes).ok()) << static_cast<int>(e.element);
    EXPECT_EQ(driver.lastTensorMap().type, e.type) << static_cast<int>(e.element);
  }
  const struct {
    TensorMapSwizzle swizzle;
    CUtensorMapSwizzle driver;
  } swizzles[] = {
      {TensorMapSwizzle::kNone, CU_TENSOR_MAP_SWIZZLE_NONE},
      {TensorMapSwizzle::k32B, CU_TENSOR_MAP_SWIZZLE_32B},
      {TensorMapSwizzle::k64B, CU_TENSOR_MAP_SWIZZLE_64B},
      {TensorMapSwizzle::k128B, CU_TENSOR_MAP_SWIZZLE_128B},
  };
  for (const auto& w : swizzles) {
    TensorMapSpec spec = validSpec();
    spec.swizzle = w.swizzle;
    spec.box[0] = 16;  // 32 bytes: fits every swizzle
    ASSERT_TRUE(kiln::encodeTensorMap(spec, map.bytes).ok()) << static_cast<int>(w.swizzle);
    EXPECT_EQ(driver.lastTensorMap().swizzle, w.driver) << static_cast<int>(w.swizzle);
  }
  const struct {
    TensorMapL2Promotion promotion;
    CUtensorMapL2promotion driver;
  } promotions[] = {
      {TensorMapL2Promotion::kNone, CU_TENSOR_MAP_L2_PROMOTION_NONE},
      {TensorMapL2Promotion::k64B, CU_TENSOR_MAP_L2_PROMOTION_L2_64B},
      {TensorMapL2Promotion::k128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
      {TensorMapL2Promotion::k256B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B},
  };
  for (const auto& p : promotions) {
    TensorMapSpec spec = validSpec();
    spec.l2_promotion = p.promotion;
    ASSERT_TRUE(kiln::encodeTensorMap(spec, map.bytes).ok()) << static_cast<int>(p.promotion);
    EXPECT_EQ(driver.lastTensorMap().l2_promotion, p.driver) << static_cast<int>(p.promotion);
  }
  TensorMapSpec nan_fill = validSpec();
  nan_fill.oob_fill = TensorMapOobFill::kNanRequestZeroFma;
  ASSERT_TRUE(kiln::encodeTensorMap(nan_fill, map.bytes).ok());
  EXPECT_EQ(driver.lastTensorMap().oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
}

TEST(TensorMap, RankOneToFiveAndOnlyTheUsedEntriesCount) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  MapStorage map;
  TensorMapSpec spec;
  spec.element = TensorMapElement::kFloat16;
  spec.address = fakeAddress(0x10000);
  spec.rank = 1;
  spec.dims[0] = 1000;
  spec.box[0] = 8;   // 16 bytes
  spec.dims[1] = 0;  // past the rank: ignored, as are the zero strides
  ASSERT_TRUE(kiln::encodeTensorMap(spec, map.bytes).ok());
  EXPECT_EQ(driver.lastTensorMap().rank, 1u);
  spec.rank = 5;
  for (int i = 1; i < 5; ++i) {
    spec.dims[i] = 2;
    spec.box[i] = 2;
    spec.strides[i - 1] = 2048u << i;
  }
  ASSERT_TRUE(kiln::encodeTensorMap(spec, map.bytes).ok());
  const kiln::fake::TensorMapRecord r = driver.lastTensorMap();
  EXPECT_EQ(r.rank, 5u);
  EXPECT_EQ(r.strides[3], 2048u << 4);
  EXPECT_EQ(r.box[4], 2u);
}

TEST(TensorMap, LimitsAreInclusiveWhereTheDriverSaysSo) {
  TensorMapSpec spec = validSpec();
  spec.dims[1] = std::uint64_t{1} << 32;            // dims <= 2^32
  spec.strides[0] = (std::uint64_t{1} << 40) - 16;  // strides < 2^40
  spec.box[1] = 256;                                // box <= 256
  spec.element_strides[1] = 8;                      // steps <= 8
  EXPECT_TRUE(kiln::checkTensorMap(spec).ok()) << kiln::checkTensorMap(spec).toString();
  spec.swizzle = TensorMapSwizzle::k64B;
  spec.box[0] = 32;  // 64 bytes: exactly the span
  EXPECT_TRUE(kiln::checkTensorMap(spec).ok()) << kiln::checkTensorMap(spec).toString();
}

struct BadSpec {
  const char* what;
  void (*mutate)(TensorMapSpec&);
  const char* message;  // the whole message
};

TEST(TensorMap, EveryLimitIsRefusedBeforeTheDriverNamingValueAndLimit) {
  const BadSpec cases[] = {
      {"rank 0", [](TensorMapSpec& s) { s.rank = 0; }, "tensor map: rank 0 is not in 1..5"},
      {"rank 6", [](TensorMapSpec& s) { s.rank = 6; }, "tensor map: rank 6 is not in 1..5"},
      {"element", [](TensorMapSpec& s) { s.element = static_cast<TensorMapElement>(42); },
       "tensor map: element 42 is not a TensorMapElement value"},
      {"swizzle", [](TensorMapSpec& s) { s.swizzle = static_cast<TensorMapSwizzle>(9); },
       "tensor map: swizzle 9 is not a TensorMapSwizzle value"},
      {"promotion",
       [](TensorMapSpec& s) { s.l2_promotion = static_cast<TensorMapL2Promotion>(-1); },
       "tensor map: l2_promotion -1 is not a TensorMapL2Promotion value"},
      {"oob", [](TensorMapSpec& s) { s.oob_fill = static_cast<TensorMapOobFill>(2); },
       "tensor map: oob_fill 2 is not a TensorMapOobFill value"},
      {"nan fill of integers",
       [](TensorMapSpec& s) {
         s.element = TensorMapElement::kUInt16;
         s.oob_fill = TensorMapOobFill::kNanRequestZeroFma;
       },
       "tensor map: the NaN out-of-bounds fill needs a float element; element is uint16"},
      {"null address", [](TensorMapSpec& s) { s.address = nullptr; },
       "tensor map: address is null"},
      {"misaligned address", [](TensorMapSpec& s) { s.address = fakeAddress(0x100008); },
       "tensor map: address 0x100008 is not 16-byte aligned"},
      {"zero dim", [](TensorMapSpec& s) { s.dims[2] = 0; },
       "tensor map: dims[2] 0 is not in 1..2^32 (4294967296)"},
      {"huge dim", [](TensorMapSpec& s) { s.dims[1] = (std::uint64_t{1} << 32) + 1; },
       "tensor map: dims[1] 4294967297 is not in 1..2^32 (4294967296)"},
      {"stride not a multiple of 16", [](TensorMapSpec& s) { s.strides[1] = 200; },
       "tensor map: strides[1] 200 bytes is not a multiple of 16"},
      {"stride 2^40", [](TensorMapSpec& s) { s.strides[0] = std::uint64_t{1} << 40; },
       "tensor map: strides[0] 1099511627776 bytes is not below 2^40 (1099511627776)"},
      {"zero box", [](TensorMapSpec& s) { s.box[2] = 0; }, "tensor map: box[2] 0 is not in 1..256"},
      {"box 257", [](TensorMapSpec& s) { s.box[1] = 257; },
       "tensor map: box[1] 257 is not in 1..256"},
      {"element stride 0", [](TensorMapSpec& s) { s.element_strides[0] = 0; },
       "tensor map: element_strides[0] 0 is not in 1..8"},
      {"element stride 9", [](TensorMapSpec& s) { s.element_strides[2] = 9; },
       "tensor map: element_strides[2] 9 is not in 1..8"},
      {"box row not a multiple of 16",
       [](TensorMapSpec& s) {
         s.swizzle = TensorMapSwizzle::kNone;
         s.box[0] = 12;
       },
       "tensor map: box[0] 12 x 2 bytes = 24 bytes is not a multiple of 16"},
      {"box row wider than the 128-byte swizzle", [](TensorMapSpec& s) { s.box[0] = 128; },
       "tensor map: box[0] 128 x 2 bytes = 256 bytes exceeds the 128-byte swizzle span"},
      {"fp32 row wider than the 128-byte swizzle",
       [](TensorMapSpec& s) { s.element = TensorMapElement::kFloat32; },
       "tensor map: box[0] 64 x 4 bytes = 256 bytes exceeds the 128-byte swizzle span"},
      {"box row wider than the 32-byte swizzle",
       [](TensorMapSpec& s) {
         s.swizzle = TensorMapSwizzle::k32B;
         s.box[0] = 24;
       },
       "tensor map: box[0] 24 x 2 bytes = 48 bytes exceeds the 32-byte swizzle span"},
  };
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  MapStorage map;
  for (const BadSpec& c : cases) {
    TensorMapSpec spec = validSpec();
    c.mutate(spec);
    const Status checked = kiln::checkTensorMap(spec);
    EXPECT_EQ(checked.code(), StatusCode::kInvalidArgument) << c.what << ": " << checked.toString();
    EXPECT_EQ(checked.message(), c.message) << c.what;
    const Status encoded = kiln::encodeTensorMap(spec, map.bytes);
    EXPECT_EQ(encoded.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_EQ(encoded.message(), c.message) << c.what;
  }
  EXPECT_EQ(driver.tensor_map_encodes.load(), 0);
}

TEST(TensorMap, OutputMustBeA64ByteAlignedBuffer) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  MapStorage maps[2];
  const Status null_out = kiln::encodeTensorMap(validSpec(), nullptr);
  EXPECT_EQ(null_out.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(null_out.message(), "tensor map: out is null");
  void* misaligned = maps[0].bytes + 32;
  const Status shifted = kiln::encodeTensorMap(validSpec(), misaligned);
  EXPECT_EQ(shifted.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(contains(shifted.message(), "is not 64-byte aligned")) << shifted.message();
  EXPECT_EQ(driver.tensor_map_encodes.load(), 0);
}

// The validation needs no driver: on a machine without libcuda a bad spec is still described.
TEST(TensorMap, ValidationNeedsNoDriver) {
  kiln::testing::setDriverLibrary("libkiln_no_such_driver.so.1");
  TensorMapSpec spec = validSpec();
  spec.strides[0] = 8200;
  MapStorage map;
  const Status bad = kiln::encodeTensorMap(spec, map.bytes);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument) << bad.toString();
  EXPECT_EQ(bad.message(), "tensor map: strides[0] 8200 bytes is not a multiple of 16");
  // A valid spec then needs the driver, and says it is missing.
  const Status good = kiln::encodeTensorMap(validSpec(), map.bytes);
  EXPECT_EQ(good.code(), StatusCode::kDriverUnavailable) << good.toString();
  kiln::testing::setDriverLibrary("");
}

TEST(TensorMap, DriverFailureNamesTheResultAndTheSpec) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  driver.tensor_map_result = CUDA_ERROR_INVALID_VALUE;
  MapStorage map;
  const Status s = kiln::encodeTensorMap(validSpec(), map.bytes);
  ASSERT_EQ(s.code(), StatusCode::kDriverError) << s.toString();
  const std::string& m = s.message();
  EXPECT_EQ(m.rfind("tensor map (bf16, rank 3, dims (128, 4096, 32), strides (8192, 256), box (64, "
                    "128, 1), swizzle 128B, L2 promotion 128B): ",
                    0),
            0u)
      << m;
  EXPECT_TRUE(contains(m, "api.tensorMapEncodeTiled(")) << m;
  EXPECT_TRUE(contains(m, "CUDA_ERROR_INVALID_VALUE (1)")) << m;
  EXPECT_TRUE(contains(m, "tensor_map.cpp:")) << m;
  EXPECT_EQ(driver.tensor_map_encodes.load(), 1);
}

TEST(TensorMap, DriverFailureOfAnUnusualSpecDescribesItsSteps) {
  kiln::fake::Driver driver({kiln::fake::h200()});
  driver.encode_needs_context = false;
  driver.tensor_map_result = CUDA_ERROR_UNKNOWN;
  TensorMapSpec spec;
  spec.element = TensorMapElement::kFloat32;
  spec.rank = 2;
  spec.address = fakeAddress(0x2000);
  spec.dims[0] = 64;
  spec.dims[1] = 10;
  spec.strides[0] = 256;
  spec.box[0] = 4;
  spec.box[1] = 10;
  spec.element_strides[1] = 2;
  spec.oob_fill = TensorMapOobFill::kNanRequestZeroFma;
  MapStorage map;
  const Status s = kiln::encodeTensorMap(spec, map.bytes);
  ASSERT_EQ(s.code(), StatusCode::kDriverError);
  EXPECT_EQ(
      s.message().rfind("tensor map (fp32, rank 2, dims (64, 10), strides (256), box (4, 10), "
                        "element strides (1, 2), no swizzle, no L2 promotion, NaN "
                        "out-of-bounds fill): ",
                        0),
      0u)
      << s.message();
}

}  // namespace
