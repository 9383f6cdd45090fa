// A .safetensors file (https://github.com/huggingface/safetensors): an 8-byte little-endian header
// length N, N bytes of JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {...}},
// then the data section, which data_offsets index from its start. The file is memory-mapped
// read-only, and the whole header is checked before any tensor is handed out, by the rules of the
// reference implementation's read_metadata / Metadata::validate (safetensors/src/tensor.rs):
//
//   - N at most 100,000,000 (its MAX_HEADER_SIZE) and 8 + N within the file;
//   - the header is a JSON object beginning with '{' (trailing spaces allowed), names unique;
//   - every dtype known, every shape a list of non-negative integers, shape product x element
//     bits a whole number of bytes equal to end - begin (every product checked for overflow);
//   - taken in offset order, the tensors tile the data section exactly: the first begins at 0,
//     each begins where the one before ends (no overlap, no gap: the format forbids holes so that
//     a file cannot smuggle unindexed bytes), and the last ends at the end of the file.
//
// Each refusal is an Error naming the file, the tensor, the value and the limit. Stricter than the
// reference in two places, both things no writer produces: a tensor entry with keys other than the
// three, and a __metadata__ value that is not a string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

// Every dtype the format defines (safetensors' Dtype), with its size in bits.
enum class Dtype {
  kBool,
  kF4,
  kF6E2M3,
  kF6E3M2,
  kU8,
  kI8,
  kF8E5M2,
  kF8E4M3,
  kF8E8M0,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
};

// The name the format writes ("BF16"), and its bits per element.
std::string_view dtypeName(Dtype dtype);
int dtypeBits(Dtype dtype);
// The dtype a header names, or nullopt for a name the format does not define.
std::optional<Dtype> dtypeFromName(std::string_view name);

// "[64, 128]"
std::string formatShape(std::span<const std::int64_t> shape);

struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kU8;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0;  // data_offsets, relative to the data section
  std::uint64_t end = 0;
  std::span<const std::byte> bytes;  // the tensor's bytes in the mapping (end - begin of them)
};

class SafetensorsFile {
 public:
  // The header is read at most this long (the reference's MAX_HEADER_SIZE).
  static constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

  // Maps `path` read-only and checks its header, or throws Error. The file must not change while
  // it is open (a file truncated under a mapping faults on access, as with any mmap reader).
  static SafetensorsFile open(const std::filesystem::path& path);
  // The same checks over bytes already in memory; `label` names them in errors. The bytes are
  // copied, so the object owns what its tensors point into.
  static SafetensorsFile fromBytes(std::span<const std::byte> bytes, std::string label);

  // Errors name the file by this: its file name ("model.safetensors") or fromBytes' label.
  const std::string& label() const { return label_; }
  const std::map<std::string, TensorInfo, std::less<>>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  // __metadata__, empty when the header has none.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  struct Storage;
  SafetensorsFile(std::shared_ptr<const Storage> storage, std::string label);

  std::shared_ptr<const Storage> storage_;  // the mapping (or copy) the tensors' bytes live in
  std::string label_;
  std::map<std::string, TensorInfo, std::less<>> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace qwen3
