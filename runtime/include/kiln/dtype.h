// The activation dtypes of kiln's kernel groups: one enum that every runner's Problem takes
// (kiln::rmsnorm::DType, kiln::gdn::DType, ... all name this one), and its names as kiln.toml,
// metadata.json and the generated variant tables spell them.
#pragma once

#include <optional>
#include <string_view>

namespace kiln {

enum class DType { kFloat16, kBFloat16 };

// "fp16" / "bf16"; nullptr for a value outside the enum.
constexpr const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return "fp16";
    case DType::kBFloat16:
      return "bf16";
  }
  return nullptr;
}

// The dtype named "fp16" / "bf16" (a variant table's `dtype`); nullopt for any other name.
constexpr std::optional<DType> dtypeFromName(std::string_view name) {
  if (name == "fp16") return DType::kFloat16;
  if (name == "bf16") return DType::kBFloat16;
  return std::nullopt;
}

}  // namespace kiln
