#pragma once
// Paged attention on CUDA: the same params and plan as the CPU kernel
// (gpu/kernels/cpu/paged_attention.hpp); pointers in the params are device
// memory. The run uploads the plan's items into the workspace, launches the
// item kernel and, for split decode rows, the merge kernel, all on `stream`
// (asynchronous; the host-side plan may be reused once the call returns).
// Results match the CPU kernel within F32 rounding (not bit for bit).
#include "gpu/kernels/cpu/paged_attention_plan.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"
#include "gpu/kernels/cuda/attention_launch.hpp"
#include "runtime/error.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>

namespace pensieve::kernels::cuda {

// Device memory for a plan's items, merges and partial states. Owned by the
// thread that drives one stream; grows, never shrinks; freed on destruction.
class AttentionDeviceWorkspace {
 public:
  AttentionDeviceWorkspace() = default;
  ~AttentionDeviceWorkspace();
  AttentionDeviceWorkspace(const AttentionDeviceWorkspace&) = delete;
  AttentionDeviceWorkspace& operator=(const AttentionDeviceWorkspace&) = delete;

  Result<void> reserve(std::size_t items, std::size_t merges, std::size_t partial_floats);
  AttentionWorkItem* items() const { return items_; }
  AttentionMerge* merges() const { return merges_; }
  float* partial() const { return partial_; }

 private:
  AttentionWorkItem* items_ = nullptr;
  AttentionMerge* merges_ = nullptr;
  float* partial_ = nullptr;
  std::size_t items_cap_ = 0, merges_cap_ = 0, partial_cap_ = 0;
};

// "what: cuda error name: description" when e is an error.
Result<void> check_cuda(cudaError_t e, const char* what);

Result<void> paged_attention(const PagedAttentionParams& params, const AttentionPlan& plan,
                             AttentionDeviceWorkspace& workspace, cudaStream_t stream);

Result<void> reshape_and_cache(const ReshapeAndCacheParams& params, cudaStream_t stream);

}  // namespace pensieve::kernels::cuda
