#include "gpu/backend/cuda/cublas_gemm.hpp"

#include "gpu/backend/cuda/cuda_check.hpp"

#include <cublas_v2.h>

#include <cstdio>

namespace pensieve::backend::cuda {
namespace {

cudaDataType_t cuda_type(kv::KvDType t) {
  switch (t) {
    case kv::KvDType::f32:
      return CUDA_R_32F;
    case kv::KvDType::f16:
      return CUDA_R_16F;
    case kv::KvDType::bf16:
      return CUDA_R_16BF;
    case kv::KvDType::q8_0:
    case kv::KvDType::fp8:
      break;  // never a matrix operand: cublas_gemm's callers pass f32, f16 or bf16
  }
  return CUDA_R_32F;
}

}  // namespace

Result<std::unique_ptr<CublasContext>> CublasContext::create(cudaStream_t stream,
                                                             std::size_t workspace_bytes) {
  auto workspace = MemoryBuffer::create(workspace_bytes);
  if (!workspace) return workspace.error();
  cublasHandle_t handle = nullptr;
  PENSIEVE_CUBLAS_TRY(cublasCreate(&handle));
  std::unique_ptr<CublasContext> context(new CublasContext(handle, std::move(*workspace), stream));
  PENSIEVE_CUBLAS_TRY(cublasSetStream(handle, stream));
  PENSIEVE_CUBLAS_TRY(cublasSetWorkspace(handle, context->workspace_.data(), context->workspace_.bytes()));
  return context;
}

CublasContext::~CublasContext() {
  if (auto ok = check_cublas(cublasDestroy(handle_), "cublasDestroy"); !ok) {
    std::fprintf(stderr, "pensieve: %s\n", ok.error().message.c_str());
  }
}

Result<void> gemm_rows(const CublasContext& context, const GemmRows& g) {
  if (g.rows == 0) return {};
  if (g.x_dtype == kv::KvDType::f32 || (g.y_dtype != kv::KvDType::f32 && g.y_dtype != g.x_dtype)) {
    return fail("gemm_rows: x must be F16 or BF16, y F32 or x's dtype");
  }
  if (g.rows < 0 || g.out_features <= 0 || g.in_features <= 0 || g.x_stride < g.in_features ||
      g.y_stride < g.out_features) {
    return fail("gemm_rows: bad shape or stride");
  }
  const float alpha = 1.0f;
  // Column-major view: Y^T [out x rows] = W [in x out]^T * X^T [in x rows].
  PENSIEVE_CUBLAS_TRY(cublasGemmEx(context.handle(), CUBLAS_OP_T, CUBLAS_OP_N, g.out_features,
                                   g.rows, g.in_features, &alpha, g.w, cuda_type(g.x_dtype),
                                   g.in_features, g.x, cuda_type(g.x_dtype), int(g.x_stride),
                                   &g.beta, g.y, cuda_type(g.y_dtype), int(g.y_stride),
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return {};
}

}  // namespace pensieve::backend::cuda
