#pragma once
// Checking CUDA, cuBLAS and NCCL return codes: every call's status becomes a
// Result<void> whose error names the call and the library's error string,
// e.g. "cudaMalloc(&p, bytes) failed: out of memory (cudaErrorMemoryAllocation)".
// The CUDA message format is runtime/cuda's (rt::cuda_error_message).
//
//   PENSIEVE_CUDA_TRY(cudaMemsetAsync(p, 0, n, stream));   // returns the error from a
//   PENSIEVE_CUBLAS_TRY(cublasSetStream(handle, stream));  // function returning Result<T>
#include "runtime/error.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

namespace pensieve::backend::cuda {

Result<void> check_cuda(cudaError_t status, const char* call);
Result<void> check_cublas(cublasStatus_t status, const char* call);
Result<void> check_nccl(ncclResult_t status, const char* call);

std::string cublas_error_message(const char* call, cublasStatus_t status);
std::string nccl_error_message(const char* call, ncclResult_t status);

}  // namespace pensieve::backend::cuda

#define PENSIEVE_DETAIL_TRY(checker, expr)                                         \
  do {                                                                             \
    if (auto pensieve_try_ok_ = ::pensieve::backend::cuda::checker((expr), #expr); \
        !pensieve_try_ok_) {                                                       \
      return pensieve_try_ok_.error();                                             \
    }                                                                              \
  } while (false)

#define PENSIEVE_CUDA_TRY(expr) PENSIEVE_DETAIL_TRY(check_cuda, expr)
#define PENSIEVE_CUBLAS_TRY(expr) PENSIEVE_DETAIL_TRY(check_cublas, expr)
#define PENSIEVE_NCCL_TRY(expr) PENSIEVE_DETAIL_TRY(check_nccl, expr)
