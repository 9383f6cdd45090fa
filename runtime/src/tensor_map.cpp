// checkTensorMap / encodeTensorMap: a tiled TMA tensor map from a plain description. Every limit
// that cuTensorMapEncodeTiled documents is checked here first, so that a caller gets a message
// naming the field and the limit instead of the driver's bare CUDA_ERROR_INVALID_VALUE, and so
// that runners can run the same check at admission (canImplement) without a driver.
#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "driver.h"
#include "kiln/runtime.h"

namespace kiln {
namespace {

constexpr std::uint64_t kMaxDim = std::uint64_t{1} << 32;       // dims: 1..2^32
constexpr std::uint64_t kStrideLimit = std::uint64_t{1} << 40;  // strides: < 2^40
constexpr std::uint64_t kStrideAlignment = 16;
constexpr std::uint64_t kAddressAlignment = 16;
constexpr std::uint32_t kMaxBox = 256;
constexpr std::uint32_t kMaxElementStride = 8;
constexpr std::uint64_t kBoxRowAlignment = 16;  // box[0] * element bytes, interleave NONE

// Each enum's cuda.h value, size or name, or 0 / nullptr for a value outside the enum.
int elementBytes(TensorMapElement e) {
  switch (e) {
    case TensorMapElement::kUInt8:
      return 1;
    case TensorMapElement::kUInt16:
    case TensorMapElement::kFloat16:
    case TensorMapElement::kBFloat16:
      return 2;
    case TensorMapElement::kUInt32:
    case TensorMapElement::kFloat32:
      return 4;
  }
  return 0;
}

const char* elementName(TensorMapElement e) {
  switch (e) {
    case TensorMapElement::kUInt8:
      return "uint8";
    case TensorMapElement::kUInt16:
      return "uint16";
    case TensorMapElement::kUInt32:
      return "uint32";
    case TensorMapElement::kFloat16:
      return "fp16";
    case TensorMapElement::kBFloat16:
      return "bf16";
    case TensorMapElement::kFloat32:
      return "fp32";
  }
  return nullptr;
}

bool isFloat(TensorMapElement e) {
  return e == TensorMapElement::kFloat16 || e == TensorMapElement::kBFloat16 ||
         e == TensorMapElement::kFloat32;
}

CUtensorMapDataType driverElement(TensorMapElement e) {
  switch (e) {
    case TensorMapElement::kUInt8:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case TensorMapElement::kUInt16:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case TensorMapElement::kUInt32:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case TensorMapElement::kFloat16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case TensorMapElement::kBFloat16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case TensorMapElement::kFloat32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // unreachable after checkTensorMap
}

// The swizzle span in bytes (0: none), or -1 for a value outside the enum.
int swizzleBytes(TensorMapSwizzle s) {
  switch (s) {
    case TensorMapSwizzle::kNone:
      return 0;
    case TensorMapSwizzle::k32B:
      return 32;
    case TensorMapSwizzle::k64B:
      return 64;
    case TensorMapSwizzle::k128B:
      return 128;
  }
  return -1;
}

CUtensorMapSwizzle driverSwizzle(TensorMapSwizzle s) {
  switch (s) {
    case TensorMapSwizzle::kNone:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
    case TensorMapSwizzle::k32B:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case TensorMapSwizzle::k64B:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case TensorMapSwizzle::k128B:
      return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

// The promotion size in bytes (0: none), or -1 for a value outside the enum.
int promotionBytes(TensorMapL2Promotion p) {
  switch (p) {
    case TensorMapL2Promotion::kNone:
      return 0;
    case TensorMapL2Promotion::k64B:
      return 64;
    case TensorMapL2Promotion::k128B:
      return 128;
    case TensorMapL2Promotion::k256B:
      return 256;
  }
  return -1;
}

CUtensorMapL2promotion driverPromotion(TensorMapL2Promotion p) {
  switch (p) {
    case TensorMapL2Promotion::kNone:
      return CU_TENSOR_MAP_L2_PROMOTION_NONE;
    case TensorMapL2Promotion::k64B:
      return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
    case TensorMapL2Promotion::k128B:
      return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    case TensorMapL2Promotion::k256B:
      return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  }
  return CU_TENSOR_MAP_L2_PROMOTION_NONE;
}

bool validOobFill(TensorMapOobFill f) {
  return f == TensorMapOobFill::kZero || f == TensorMapOobFill::kNanRequestZeroFma;
}

CUtensorMapFloatOOBfill driverOobFill(TensorMapOobFill f) {
  return f == TensorMapOobFill::kNanRequestZeroFma
             ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
             : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
}

Status invalid(const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "tensor map: " + message);
}

std::string hex(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%llx",
                static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p)));
  return text;
}

template <typename T>
std::string list(const T* values, int n) {
  std::string text = "(";
  for (int i = 0; i < n; ++i) text += (i > 0 ? ", " : "") + std::to_string(values[i]);
  return text + ")";
}

// "(bf16, rank 3, dims (128, 4096, 32), strides (8192, 256), box (64, 128, 1), swizzle 128B,
// L2 promotion 128B)": what a driver failure was asked to encode.
std::string describe(const TensorMapSpec& spec) {
  const int rank = spec.rank;
  std::string text = std::string("(") + elementName(spec.element) + ", rank " +
                     std::to_string(rank) + ", dims " + list(spec.dims, rank) + ", strides " +
                     list(spec.strides, rank - 1) + ", box " + list(spec.box, rank);
  bool unit_steps = true;
  for (int i = 0; i < rank; ++i) unit_steps = unit_steps && spec.element_strides[i] == 1;
  if (!unit_steps) text += ", element strides " + list(spec.element_strides, rank);
  const int swizzle = swizzleBytes(spec.swizzle);
  text += swizzle == 0 ? ", no swizzle" : ", swizzle " + std::to_string(swizzle) + "B";
  const int promotion = promotionBytes(spec.l2_promotion);
  text +=
      promotion == 0 ? ", no L2 promotion" : ", L2 promotion " + std::to_string(promotion) + "B";
  if (spec.oob_fill == TensorMapOobFill::kNanRequestZeroFma) text += ", NaN out-of-bounds fill";
  return text + ")";
}

Status encode(const DriverApi& api, CUtensorMap* map, const TensorMapSpec& spec) {
  // Named locals keep the statement that a failure quotes short.
  const CUtensorMapDataType type = driverElement(spec.element);
  const auto rank = static_cast<cuuint32_t>(spec.rank);
  void* address = const_cast<void*>(spec.address);  // the driver only records it
  const cuuint64_t* dims = spec.dims;
  const cuuint64_t* strides = spec.strides;
  const cuuint32_t* box = spec.box;
  const cuuint32_t* steps = spec.element_strides;
  const CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  const CUtensorMapSwizzle swizzle = driverSwizzle(spec.swizzle);
  const CUtensorMapL2promotion l2 = driverPromotion(spec.l2_promotion);
  const CUtensorMapFloatOOBfill oob = driverOobFill(spec.oob_fill);
  KILN_CU_CHECK(api.tensorMapEncodeTiled(map, type, rank, address, dims, strides, box, steps,
                                         interleave, swizzle, l2, oob));
  return Status::Ok();
}

}  // namespace

// The driver needs 64-byte alignment (cuTensorMapEncodeTiled's documentation); CUDA 13's cuda.h
// declares CUtensorMap alignas(128), CUDA 12's alignas(64). `out` is passed on, never accessed
// as a CUtensorMap here.
static_assert(sizeof(CUtensorMap) == kTensorMapBytes && alignof(CUtensorMap) >= kTensorMapAlignment,
              "kiln's tensor map is cuda.h's CUtensorMap in size");

Status checkTensorMap(const TensorMapSpec& spec) {
  if (spec.rank < 1 || spec.rank > kMaxTensorMapRank) {
    return invalid("rank " + std::to_string(spec.rank) + " is not in 1.." +
                   std::to_string(kMaxTensorMapRank));
  }
  const int bytes = elementBytes(spec.element);
  if (bytes == 0) {
    return invalid("element " + std::to_string(static_cast<int>(spec.element)) +
                   " is not a TensorMapElement value");
  }
  const int swizzle = swizzleBytes(spec.swizzle);
  if (swizzle < 0) {
    return invalid("swizzle " + std::to_string(static_cast<int>(spec.swizzle)) +
                   " is not a TensorMapSwizzle value");
  }
  if (promotionBytes(spec.l2_promotion) < 0) {
    return invalid("l2_promotion " + std::to_string(static_cast<int>(spec.l2_promotion)) +
                   " is not a TensorMapL2Promotion value");
  }
  if (!validOobFill(spec.oob_fill)) {
    return invalid("oob_fill " + std::to_string(static_cast<int>(spec.oob_fill)) +
                   " is not a TensorMapOobFill value");
  }
  if (spec.oob_fill == TensorMapOobFill::kNanRequestZeroFma && !isFloat(spec.element)) {
    return invalid(std::string("the NaN out-of-bounds fill needs a float element; element is ") +
                   elementName(spec.element));
  }
  if (spec.address == nullptr) return invalid("address is null");
  if (reinterpret_cast<std::uintptr_t>(spec.address) % kAddressAlignment != 0) {
    return invalid("address " + hex(spec.address) + " is not " + std::to_string(kAddressAlignment) +
                   "-byte aligned");
  }
  for (int i = 0; i < spec.rank; ++i) {
    const std::uint64_t dim = spec.dims[i];
    if (dim < 1 || dim > kMaxDim) {
      return invalid("dims[" + std::to_string(i) + "] " + std::to_string(dim) +
                     " is not in 1..2^32 (" + std::to_string(kMaxDim) + ")");
    }
  }
  for (int i = 0; i + 1 < spec.rank; ++i) {
    const std::uint64_t stride = spec.strides[i];
    if (stride % kStrideAlignment != 0) {
      return invalid("strides[" + std::to_string(i) + "] " + std::to_string(stride) +
                     " bytes is not a multiple of " + std::to_string(kStrideAlignment));
    }
    if (stride >= kStrideLimit) {
      return invalid("strides[" + std::to_string(i) + "] " + std::to_string(stride) +
                     " bytes is not below 2^40 (" + std::to_string(kStrideLimit) + ")");
    }
  }
  for (int i = 0; i < spec.rank; ++i) {
    const std::uint32_t box = spec.box[i];
    if (box < 1 || box > kMaxBox) {
      return invalid("box[" + std::to_string(i) + "] " + std::to_string(box) + " is not in 1.." +
                     std::to_string(kMaxBox));
    }
    const std::uint32_t step = spec.element_strides[i];
    if (step < 1 || step > kMaxElementStride) {
      return invalid("element_strides[" + std::to_string(i) + "] " + std::to_string(step) +
                     " is not in 1.." + std::to_string(kMaxElementStride));
    }
  }
  const std::uint64_t row_bytes = std::uint64_t{spec.box[0]} * static_cast<std::uint64_t>(bytes);
  const std::string row = "box[0] " + std::to_string(spec.box[0]) + " x " + std::to_string(bytes) +
                          " bytes = " + std::to_string(row_bytes) + " bytes";
  if (row_bytes % kBoxRowAlignment != 0) {
    return invalid(row + " is not a multiple of " + std::to_string(kBoxRowAlignment));
  }
  if (swizzle > 0 && row_bytes > static_cast<std::uint64_t>(swizzle)) {
    return invalid(row + " exceeds the " + std::to_string(swizzle) + "-byte swizzle span");
  }
  return Status::Ok();
}

namespace {

// checkTensorMap, then `out`'s own checks.
Status checkEncode(const TensorMapSpec& spec, const void* out) {
  KILN_RETURN_IF_ERROR(checkTensorMap(spec));
  if (out == nullptr) return invalid("out is null");
  if (reinterpret_cast<std::uintptr_t>(out) % kTensorMapAlignment != 0) {
    return invalid("out " + hex(out) + " is not " + std::to_string(kTensorMapAlignment) +
                   "-byte aligned");
  }
  return Status::Ok();
}

Status encodeNamed(const DriverApi& api, const TensorMapSpec& spec, void* out) {
  Status encoded = encode(api, static_cast<CUtensorMap*>(out), spec);
  if (!encoded.ok()) return detail::withPrefix(encoded, "tensor map " + describe(spec) + ": ");
  return Status::Ok();
}

}  // namespace

Status encodeTensorMap(const StreamTarget& target, const TensorMapSpec& spec, void* out) {
  KILN_RETURN_IF_ERROR(checkEncode(spec, out));
  if (target.context == nullptr)
    return invalid(
        "the StreamTarget was not filled by kiln::resolveStream (no context); resolve the stream "
        "first");
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  // The driver wants a current context for the encode (CUDA_ERROR_INVALID_CONTEXT without one):
  // the stream's, as for every call kiln makes on its behalf, pushed only when not current.
  detail::ScopedContext scope;
  KILN_RETURN_IF_ERROR(scope.enter(*api, target.context, target.caller_context));
  KILN_RETURN_IF_ERROR(encodeNamed(*api, spec, out));
  return scope.pop();
}

Status encodeTensorMap(const TensorMapSpec& spec, void* out) {
  KILN_RETURN_IF_ERROR(checkEncode(spec, out));
  const DriverApi* api = nullptr;
  KILN_RETURN_IF_ERROR(detail::acquireDriver(&api));
  return encodeNamed(*api, spec, out);
}

}  // namespace kiln
