#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include "model/error.h"
#include "model/json.h"

namespace qwen3 {

namespace {

using detail::Json;

struct DtypeRow {
  Dtype dtype;
  std::string_view name;
  int bits;
};

constexpr std::array<DtypeRow, 19> kDtypes{{
    {Dtype::kBool, "BOOL", 8},      {Dtype::kF4, "F4", 4},          {Dtype::kF6E2M3, "F6_E2M3", 6},
    {Dtype::kF6E3M2, "F6_E3M2", 6}, {Dtype::kU8, "U8", 8},          {Dtype::kI8, "I8", 8},
    {Dtype::kF8E5M2, "F8_E5M2", 8}, {Dtype::kF8E4M3, "F8_E4M3", 8}, {Dtype::kF8E8M0, "F8_E8M0", 8},
    {Dtype::kI16, "I16", 16},       {Dtype::kU16, "U16", 16},       {Dtype::kF16, "F16", 16},
    {Dtype::kBF16, "BF16", 16},     {Dtype::kI32, "I32", 32},       {Dtype::kU32, "U32", 32},
    {Dtype::kF32, "F32", 32},       {Dtype::kF64, "F64", 64},       {Dtype::kI64, "I64", 64},
    {Dtype::kU64, "U64", 64},
}};

const DtypeRow& row(Dtype dtype) {
  for (const DtypeRow& r : kDtypes) {
    if (r.dtype == dtype) return r;
  }
  throw Error("qwen3: unknown Dtype value " + std::to_string(static_cast<int>(dtype)));
}

std::string knownDtypes() {
  std::string out;
  for (const DtypeRow& r : kDtypes) out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

// A non-negative integer of the header (a shape entry or an offset), or an Error naming it.
std::uint64_t headerInt(const Json& value, const std::string& where) {
  if (value.is_number_unsigned()) return value.get<std::uint64_t>();
  if (value.is_number_integer()) {
    throw Error(where + " is " + detail::show(value) + "; it must not be negative");
  }
  throw Error(where + " is " + detail::typeOf(value) + " (" + detail::show(value) +
              "); it must be a non-negative integer");
}

std::string offsets(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// One tensor entry of the header, with its own checks (dtype, shape, size against its offsets);
// how the entries tile the data section is checked over all of them afterwards.
TensorInfo parseEntry(const std::string& name, const Json& entry, const std::string& prefix) {
  if (!entry.is_object()) {
    throw Error(prefix + "is " + detail::typeOf(entry) +
                "; a tensor entry is an object {dtype, shape, data_offsets}");
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      throw Error(prefix + "has the key \"" + key +
                  "\"; a tensor entry has only dtype, shape and data_offsets");
    }
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) throw Error(prefix + "has no " + key);
  }
  TensorInfo t;
  t.name = name;
  const Json& dtype = entry["dtype"];
  if (!dtype.is_string()) {
    throw Error(prefix + "dtype is " + detail::typeOf(dtype) + "; it must be a string");
  }
  const std::optional<Dtype> known = dtypeFromName(dtype.get<std::string>());
  if (!known) {
    throw Error(prefix + "dtype " + detail::show(dtype) + " is not a safetensors dtype (" +
                knownDtypes() + ")");
  }
  t.dtype = *known;

  const Json& shape = entry["shape"];
  if (!shape.is_array()) {
    throw Error(prefix + "shape is " + detail::typeOf(shape) + "; it must be an array");
  }
  // The element count and its bits, each product checked: a shape of huge dims must not wrap
  // around to a size that matches small offsets.
  std::uint64_t elements = 1;
  bool overflow = false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::uint64_t dim = headerInt(shape[i], prefix + "shape[" + std::to_string(i) + "]");
    if (dim > static_cast<std::uint64_t>(INT64_MAX)) overflow = true;
    t.shape.push_back(static_cast<std::int64_t>(dim));
    if (dim != 0 && elements > UINT64_MAX / dim) overflow = true;
    elements = overflow ? elements : elements * dim;
  }
  const auto bits = static_cast<std::uint64_t>(dtypeBits(t.dtype));
  if (overflow || elements > UINT64_MAX / bits) {
    throw Error(prefix + "shape " + formatShape(t.shape) + " x " + std::string(dtypeName(t.dtype)) +
                " overflows 64 bits");
  }
  if (elements * bits % 8 != 0) {
    throw Error(prefix + "shape " + formatShape(t.shape) + " x " + std::string(dtypeName(t.dtype)) +
                " is " + std::to_string(elements * bits) + " bits, not a whole number of bytes");
  }
  const std::uint64_t bytes = elements * bits / 8;

  const Json& offs = entry["data_offsets"];
  if (!offs.is_array() || offs.size() != 2) {
    throw Error(prefix + "data_offsets is " + detail::show(offs) +
                "; it must be an array [begin, end]");
  }
  t.begin = headerInt(offs[0], prefix + "data_offsets[0]");
  t.end = headerInt(offs[1], prefix + "data_offsets[1]");
  if (t.end < t.begin) {
    throw Error(prefix + "data_offsets " + offsets(t.begin, t.end) + " end before they begin");
  }
  if (t.end - t.begin != bytes) {
    throw Error(prefix + "data_offsets " + offsets(t.begin, t.end) + " do not match shape " +
                formatShape(t.shape) + " x " + std::string(dtypeName(t.dtype)) + " = " +
                std::to_string(bytes) + " bytes");
  }
  return t;
}

}  // namespace

std::string_view dtypeName(Dtype dtype) {
  return row(dtype).name;
}
int dtypeBits(Dtype dtype) {
  return row(dtype).bits;
}

std::optional<Dtype> dtypeFromName(std::string_view name) {
  for (const DtypeRow& r : kDtypes) {
    if (r.name == name) return r.dtype;
  }
  return std::nullopt;
}

std::string formatShape(std::span<const std::int64_t> shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    out += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return out + "]";
}

// The bytes the tensors point into: a read-only mapping of the file, or fromBytes' copy.
struct SafetensorsFile::Storage {
  const std::byte* data = nullptr;
  std::size_t size = 0;
  void* mapping = nullptr;  // munmap'd on destruction when set
  std::vector<std::byte> copy;

  Storage() = default;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage() {
    if (mapping != nullptr) munmap(mapping, size);
  }
};

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string label = path.filename().string();
  const std::string where = path.string();
  // O_NONBLOCK: a FIFO named like a checkpoint cannot hang the open; fstat refuses it below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(where + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(where + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(where + ": not a regular file");
  }
  auto storage = std::make_shared<Storage>();
  storage->size = static_cast<std::size_t>(st.st_size);
  if (storage->size < 8) {
    ::close(fd);
    throw Error(label + ": the file is " + std::to_string(storage->size) +
                " bytes, shorter than the 8-byte header length that begins a safetensors file");
  }
  void* mapping = mmap(nullptr, storage->size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (mapping == MAP_FAILED) throw Error(where + ": cannot mmap: " + std::strerror(err));
  storage->mapping = mapping;
  storage->data = static_cast<const std::byte*>(mapping);
  return SafetensorsFile(std::move(storage), label);
}

SafetensorsFile SafetensorsFile::fromBytes(std::span<const std::byte> bytes, std::string label) {
  auto storage = std::make_shared<Storage>();
  storage->copy.assign(bytes.begin(), bytes.end());
  storage->data = storage->copy.data();
  storage->size = storage->copy.size();
  return SafetensorsFile(std::move(storage), std::move(label));
}

SafetensorsFile::SafetensorsFile(std::shared_ptr<const Storage> storage, std::string label)
    : storage_(std::move(storage)), label_(std::move(label)) {
  const std::byte* file = storage_->data;
  const std::uint64_t size = storage_->size;
  if (size < 8) {
    throw Error(label_ + ": the file is " + std::to_string(size) +
                " bytes, shorter than the 8-byte header length that begins a safetensors file");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(file[i]);
  if (n > kMaxHeaderBytes) {
    throw Error(label_ + ": header length " + std::to_string(n) + " is more than the limit of " +
                std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > size - 8) {
    throw Error(label_ + ": header length " + std::to_string(n) +
                " runs past the end of the file (" + std::to_string(size) + " bytes: at most " +
                std::to_string(size - 8) + " bytes of header; is the file truncated?)");
  }
  const std::string_view header(reinterpret_cast<const char*>(file + 8), n);
  // The format requires the header to begin with '{' (its spec; trailing spaces may pad it).
  if (header.empty() || header.front() != '{') {
    throw Error(label_ +
                ": the header does not begin with '{' (a safetensors header is a JSON "
                "object)");
  }
  const Json j = detail::parseJson(header, label_ + ": header");
  if (!j.is_object()) throw Error(label_ + ": the header is not a JSON object");

  std::vector<TensorInfo> list;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        throw Error(label_ + ": __metadata__ is " + detail::typeOf(entry) +
                    "; it must be an object of strings");
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          throw Error(label_ + ": __metadata__ \"" + key + "\" is " + detail::typeOf(value) +
                      "; __metadata__ holds strings only");
        }
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    list.push_back(parseEntry(name, entry, label_ + ": tensor " + name + ": "));
  }

  // The reference's validate(): in offset order (by begin, then end, so that empty tensors at a
  // shared offset sort before the one that starts there), each begins where the last ended.
  const std::uint64_t data_size = size - 8 - n;
  std::sort(list.begin(), list.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : list) {
    const std::string prefix =
        label_ + ": tensor " + t.name + ": data_offsets " + offsets(t.begin, t.end);
    if (t.end > data_size) {
      throw Error(prefix + " run past the end of the data section (" + std::to_string(data_size) +
                  " bytes after the header)");
    }
    const std::uint64_t expected = previous == nullptr ? 0 : previous->end;
    if (t.begin < expected) {
      throw Error(prefix + " overlap tensor " + previous->name + " at " +
                  offsets(previous->begin, previous->end));
    }
    if (t.begin > expected) {
      throw Error(prefix + " leave the bytes [" + std::to_string(expected) + ", " +
                  std::to_string(t.begin) + "] before them unused (" +
                  (previous == nullptr
                       ? "the data section starts at 0"
                       : "tensor " + previous->name + " ends at " + std::to_string(expected)) +
                  "); the format allows no gaps");
    }
    previous = &t;
  }
  const std::uint64_t covered = previous == nullptr ? 0 : previous->end;
  if (covered != data_size) {
    throw Error(label_ + ": the tensors cover " + std::to_string(covered) +
                " bytes of the data section, which has " + std::to_string(data_size) +
                " (the file is " + std::to_string(size) + " bytes); the format allows no " +
                "unindexed bytes");
  }

  const std::byte* data = file + 8 + n;
  for (TensorInfo& t : list) {
    t.bytes = std::span<const std::byte>(data + t.begin, t.end - t.begin);
    std::string name = t.name;
    tensors_.emplace(std::move(name), std::move(t));
  }
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

}  // namespace qwen3
