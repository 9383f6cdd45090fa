// The dtypes of kiln's kernel groups: one enum that every runner's Problem takes (kiln::rmsnorm::
// DType, kiln::gdn::DType, ... all name this one), and its names as kiln.toml, metadata.json and
// the generated variant tables spell them. fp16 and bf16 are the activation dtypes; fp32 is the
// `dtype = "fp32"` of a kiln.toml (docs/registry.md), which the generated table spells kFloat32:
// today only gdn's MTP commit, a copy of float32 states with no activation. A problem in fp32 is
// refused as not built by every group that builds no fp32 variant.
#pragma once

#include <optional>
#include <string_view>

namespace kiln {

enum class DType { kFloat16, kBFloat16, kFloat32 };

// "fp16" / "bf16" / "fp32"; nullptr for a value outside the enum.
constexpr const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
    case DType::kFloat32:
      return "fp32";
  }
  return nullptr;
}

// The dtype named "fp16" / "bf16" / "fp32" (a variant table's `dtype`); nullopt for any other name.
constexpr std::optional<DType> dtypeFromName(std::string_view name) {
  if (name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  if (name == "fp32") return DType::kFloat32;
  return std::nullopt;
}

}  // namespace kiln
