// The dense projections and the LM head on cuBLASLt: y[m, n] = x[m, k] . w[n, k]^T, every matrix
// row-major and contiguous (a checkpoint's nn.Linear weight as it is stored), x and w fp16 or
// bf16, fp32 accumulation, y of the input dtype or fp32 (the logits). cuBLASLt is column-major,
// so the call computes y^T = w . x^T: A = w seen as k x n column-major, transposed; B = x^T, k x m.
//
// One cuBLASLt handle and one workspace per Gemm; the descriptors and the algorithm are cached per
// shape, so a call allocates nothing and asks the heuristic nothing the second time, and a shape's
// first call happens before its CUDA graph capture (the decoder runs every decode bucket once
// eagerly first). The algorithm is the heuristic's first, or, for m <= tune_max_m, the fastest of
// its first kTunedCandidates timed on the call's own operands (the output is written by every
// candidate and last by the chosen one): decode's skinny GEMMs are where the heuristic's pick
// was measured slowest (examples/qwen3/README.md).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>

#include "runtime/cuda_util.h"

namespace qwen3 {

class Gemm {
 public:
  // in_type: CUDA_R_16BF or CUDA_R_16F (x and w).
  static constexpr int kTunedCandidates = 8;
  // tune_max_m: the largest m whose algorithm is chosen by timing; 0 tunes nothing.
  explicit Gemm(cudaDataType_t in_type, std::int64_t tune_max_m = 0,
                std::size_t workspace_bytes = 32u << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y = x . w^T; out_type CUDA_R_32F or the input type. m == 0 does nothing.
  void run(const void* x, const void* w, void* y, std::int64_t m, std::int64_t n, std::int64_t k,
           cudaDataType_t out_type, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan(const void* x, const void* w, void* y, std::int64_t m, std::int64_t n,
                   std::int64_t k, cudaDataType_t out_type, cudaStream_t stream);
  void launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, const void* x, const void* w,
              void* y, cudaStream_t stream);

  cudaDataType_t in_type_;
  std::int64_t tune_max_m_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, Plan> plans_;
};

}  // namespace qwen3
