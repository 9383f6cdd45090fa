#include "runtime/gemm.h"

#include <string>

namespace qwen3 {

Gemm::Gemm(cudaDataType_t in_type, std::size_t workspace_bytes)
    : in_type_(in_type), workspace_(workspace_bytes) {
  QWEN3_CUBLAS(cublasLtCreate(&handle_));
}

Gemm::~Gemm() {
  for (auto& [shape, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.op);
  }
  cublasLtDestroy(handle_);
}

const Gemm::Plan& Gemm::plan(std::int64_t m, std::int64_t n, std::int64_t k,
                             cudaDataType_t out_type) {
  const auto key = std::make_tuple(m, n, k, static_cast<int>(out_type));
  if (const auto it = plans_.find(key); it != plans_.end()) return it->second;

  Plan p;
  QWEN3_CUBLAS(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
  QWEN3_CUBLAS(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                              sizeof transpose));
  QWEN3_CUBLAS(
      cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep));
  // Column-major views: w is k x n (ld k), x^T is k x m (ld k), y^T is n x m (ld n).
  QWEN3_CUBLAS(cublasLtMatrixLayoutCreate(&p.a, in_type_, k, n, k));
  QWEN3_CUBLAS(cublasLtMatrixLayoutCreate(&p.b, in_type_, k, m, k));
  QWEN3_CUBLAS(cublasLtMatrixLayoutCreate(&p.c, out_type, n, m, n));

  cublasLtMatmulPreference_t preference = nullptr;
  QWEN3_CUBLAS(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t workspace_bytes = workspace_.bytes();
  QWEN3_CUBLAS(cublasLtMatmulPreferenceSetAttribute(preference,
                                                    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof workspace_bytes));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c,
                                                               preference, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    throw Error("cuBLASLt has no algorithm for y[" + std::to_string(m) + ", " + std::to_string(n) +
                "] = x[" + std::to_string(m) + ", " + std::to_string(k) +
                "] . w^T: " + cublasLtGetStatusName(status));
  }
  p.algo = result.algo;
  return plans_.emplace(key, p).first->second;
}

void Gemm::run(const void* x, const void* w, void* y, std::int64_t m, std::int64_t n,
               std::int64_t k, cudaDataType_t out_type, cudaStream_t stream) {
  if (m == 0) return;
  const Plan& p = plan(m, n, k, out_type);
  const float alpha = 1.0f, beta = 0.0f;
  QWEN3_CUBLAS(cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &p.algo,
                              workspace_.get(), workspace_.bytes(), stream));
}

}  // namespace qwen3
