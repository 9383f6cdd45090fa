// The kernel registry: every group's kiln.toml, parsed, validated and expanded into variants.
// Pure logic over file contents; the only I/O is reading the kiln.toml files it is pointed at.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/result.h"

namespace kiln::core {

// The registry's limits (docs/registry.md, "Limits"). Each bounds the time and memory a crafted
// kiln.toml can cost; every one is refused with the file, the value and the limit.
inline constexpr std::size_t kMaxRegistryFileBytes = 1 << 20;  // a kiln.toml: 1 MiB
inline constexpr std::size_t kMaxVariantsPerGroup = 4096;      // one kiln.toml, families expanded
inline constexpr std::size_t kMaxVariantsPerRegistry = 8192;   // all groups together
inline constexpr std::size_t kMaxConstantsPerGroup = 32;       // [constants]
inline constexpr std::size_t kMaxListItems = 32;        // entries, nvcc_flags, uses, supported_sms
inline constexpr std::size_t kMaxStringBytes = 256;     // every string value
inline constexpr std::size_t kMaxKeyBytes = 64;         // every key (constant names included)
inline constexpr std::size_t kMaxIdentifierBytes = 64;  // entry kernels and enum values
inline constexpr int kMinSm = 10;                       // supported_sms entries: 10 ... 999
inline constexpr int kMaxSm = 999;
// `int` constants are baked as C++ `int`: INT_MIN ... INT_MAX.
inline constexpr std::int64_t kMinIntConstant = -2147483647LL - 1;
inline constexpr std::int64_t kMaxIntConstant = 2147483647LL;

enum class ConstantType { kInt, kBool, kDtype, kEnum };

// A baked constant's value. int64 for `int`, bool for `bool`, the string for `dtype`/`enum`.
using ConstantValue = std::variant<std::int64_t, bool, std::string>;

struct Constant {
  std::string name;  // as declared: "hidden"
  ConstantType type;
  ConstantValue value;
};

enum class SourceKind { kCuda, kCuteDsl };

struct Variant {
  std::string name;   // "rmsnorm_h4096_bf16"
  std::string group;  // "rmsnorm"
  SourceKind kind = SourceKind::kCuda;
  std::filesystem::path source;      // absolute path of the translation unit / script
  std::vector<std::string> entries;  // entry kernels
  std::vector<int> supported_sms;    // whitelist, ascending
  bool arch_specific = false;        // compile for sm_NNa
  bool sm_constant = false;          // define KILN_TARGET_SM
  std::vector<std::string> uses;     // "cutlass"
  std::vector<std::string> nvcc_flags;
  std::vector<Constant> constants;  // in the group's [constants] order
  int line = 0;                     // line in kiln.toml of the [[variant]]/[[family]] it came from
};

struct ConstantDecl {
  std::string name;
  ConstantType type;
};

struct Group {
  std::string name;
  SourceKind kind = SourceKind::kCuda;
  std::string description;
  std::filesystem::path dir;   // absolute: <root>/kernels/<name>
  std::filesystem::path toml;  // absolute path of kiln.toml
  std::vector<int> supported_sms;
  std::vector<ConstantDecl> constants;  // declaration order
  std::vector<Variant> variants;        // declaration order, families expanded
};

struct Registry {
  std::filesystem::path root;  // the repository root (holds kernels/)
  std::vector<Group> groups;   // sorted by name

  const Group* findGroup(const std::string& name) const;
  const Variant* findVariant(const std::string& name) const;
};

// Parses one kiln.toml. It must be a regular file (a FIFO, device or directory is refused without
// blocking on it) of at most kMaxRegistryFileBytes. Errors read "<file>:<line>: <rule broken>", for
// instance "kernels/rmsnorm/kiln.toml:14: unknown key 'hiden' in [[family]]". `nvcc_sms` is the
// list of SMs the installed nvcc can target (empty: skip that check).
Result<Group> parseGroup(const std::filesystem::path& toml_path, const std::vector<int>& nvcc_sms);

// Loads every kernels/*/kiln.toml under `root`, and checks names are unique across groups. Never
// throws: an unreadable kernels/ or group directory is an error (ErrorKind::kUsage) naming it.
Result<Registry> loadRegistry(const std::filesystem::path& root, const std::vector<int>& nvcc_sms);

// `text` with every control character (U+0000-U+001F, U+007F-U+009F) written as \xNN or \uNNNN,
// so that a message quoting untrusted text cannot drive the terminal.
std::string escapeControl(std::string_view text);

const char* constantTypeName(ConstantType type);
const char* sourceKindName(SourceKind kind);
// The C++ type nvcc gets for a dtype constant: "bf16" -> "__nv_bfloat16".
const char* dtypeCxxType(const std::string& dtype);

}  // namespace kiln::core
