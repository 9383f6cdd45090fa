// The CUDA runtime and cuBLASLt calls of the decoder, checked: a failure throws qwen3::Error naming
// the call, the file and line and the library's own name for the error. And the device memory the
// decoder owns: DeviceBuffer (cudaMalloc / cudaFree) and PinnedBuffer (cudaMallocHost), moved,
// never copied.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

#include "kiln/status.h"
#include "model/error.h"

namespace qwen3 {

[[noreturn]] void throwCudaError(cudaError_t error, const char* call, const char* file, int line);
[[noreturn]] void throwCublasError(cublasStatus_t status, const char* call, const char* file,
                                   int line);
// A kiln runner's refusal or failure, with what was being run.
void checkKiln(const kiln::Status& status, const std::string& what);

#define QWEN3_CUDA(call)                                                \
  do {                                                                  \
    const cudaError_t qwen3_error_ = (call);                            \
    if (qwen3_error_ != cudaSuccess)                                    \
      ::qwen3::throwCudaError(qwen3_error_, #call, __FILE__, __LINE__); \
  } while (0)
#define QWEN3_CUBLAS(call)                                                 \
  do {                                                                     \
    const cublasStatus_t qwen3_status_ = (call);                           \
    if (qwen3_status_ != CUBLAS_STATUS_SUCCESS)                            \
      ::qwen3::throwCublasError(qwen3_status_, #call, __FILE__, __LINE__); \
  } while (0)

// Device memory of `bytes` bytes (cudaMalloc: 256-byte aligned), freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory (cudaMallocHost), so that cudaMemcpyAsync from it is asynchronous.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  PinnedBuffer(PinnedBuffer&& other) noexcept { *this = std::move(other); }
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace qwen3
