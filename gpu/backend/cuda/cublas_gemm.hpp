#pragma once
// The forward pass's matrix products through cuBLAS: activations [rows][in]
// (F16 or BF16, row-major) times a weight stored as the loaders give it,
// {out rows, in cols} in the same dtype, into F32 (or BF16) rows [rows][out]:
// y = x W^T + beta y, accumulated in F32 (CUBLAS_COMPUTE_32F). beta = 1 adds
// the product to y: the residual connection without a separate pass.
//
// CublasContext owns one handle and an explicit workspace, so the products
// can be captured in a CUDA graph (no allocation while capturing); it is
// bound to one stream and used by the thread that drives that stream.
#include "gpu/backend/cuda/device_memory.hpp"
#include "gpu/kv/paged_kv_view.hpp"
#include "runtime/error.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>

namespace pensieve::backend::cuda {

class CublasContext {
 public:
  static constexpr std::size_t default_workspace_bytes = std::size_t(32) << 20;
  static Result<std::unique_ptr<CublasContext>> create(
      cudaStream_t stream, std::size_t workspace_bytes = default_workspace_bytes);
  ~CublasContext();
  CublasContext(const CublasContext&) = delete;
  CublasContext& operator=(const CublasContext&) = delete;

  cublasHandle_t handle() const { return handle_; }
  cudaStream_t stream() const { return stream_; }

 private:
  CublasContext(cublasHandle_t handle, MemoryBuffer workspace, cudaStream_t stream)
      : handle_(handle), workspace_(std::move(workspace)), stream_(stream) {}
  cublasHandle_t handle_;
  MemoryBuffer workspace_;
  cudaStream_t stream_;
};

struct GemmRows {
  const void* x = nullptr;  // [rows][x_stride], x_dtype (f16 or bf16)
  kv::KvDType x_dtype = kv::KvDType::bf16;
  std::int64_t x_stride = 0;
  const void* w = nullptr;  // [out_features][in_features], the same dtype as x
  std::int32_t rows = 0;
  std::int32_t out_features = 0;
  std::int32_t in_features = 0;
  void* y = nullptr;  // [rows][y_stride], y_dtype (f32, or x's dtype)
  kv::KvDType y_dtype = kv::KvDType::f32;
  std::int64_t y_stride = 0;
  float beta = 0.0f;  // 1: y += x W^T
};

Result<void> gemm_rows(const CublasContext& context, const GemmRows& g);

}  // namespace pensieve::backend::cuda
