#include "gpu/backend/cuda/cuda_check.hpp"

#include "runtime/cuda/cuda_stream.hpp"

namespace pensieve::backend::cuda {

std::string cublas_error_message(const char* call, cublasStatus_t status) {
  return std::string(call) + " failed: " + cublasGetStatusString(status) + " (" +
         cublasGetStatusName(status) + ")";
}

std::string nccl_error_message(const char* call, ncclResult_t status) {
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(status) + " (ncclResult " +
                        std::to_string(int(status)) + ")";
  // NCCL's detail of the last failure in this thread (the communicator
  // argument is unused by NCCL 2.x), e.g. which peer or transport failed.
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    message += ": " + std::string(last);
  }
  return message;
}

Result<void> check_cuda(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return {};
  return fail(rt::cuda_error_message(call, status));
}

Result<void> check_cublas(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return {};
  return fail(cublas_error_message(call, status));
}

Result<void> check_nccl(ncclResult_t status, const char* call) {
  if (status == ncclSuccess) return {};
  return fail(nccl_error_message(call, status));
}

}  // namespace pensieve::backend::cuda
