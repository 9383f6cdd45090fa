#include "runtime/cuda_util.h"

namespace qwen3 {

void throwCudaError(cudaError_t error, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
              cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

void throwCublasError(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
              cublasLtGetStatusName(status) + " (" + cublasLtGetStatusString(status) + ")");
}

void checkKiln(const kiln::Status& status, const std::string& what) {
  if (!status.ok()) throw Error(what + ": " + status.toString());
}

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) QWEN3_CUDA(cudaMalloc(&data_, bytes));
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

PinnedBuffer::PinnedBuffer(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) QWEN3_CUDA(cudaMallocHost(&data_, bytes));
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& other) noexcept {
  std::swap(data_, other.data_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) cudaFreeHost(data_);
}

}  // namespace qwen3
