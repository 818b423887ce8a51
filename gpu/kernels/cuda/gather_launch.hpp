#pragma once
// The swap gather kernel (gather_kernels.cu): copies many small scattered
// spans in one launch, one thread block per span, 16 bytes per thread per
// step where the span's ends are 16-byte aligned, else byte by byte. Either
// side may be pinned host memory (device-visible under unified addressing:
// cudaHostAlloc'd) or device memory; `copies` itself must be device-visible
// (device or pinned host memory) until the kernel has run.
// kernels/swap_copy_plan.hpp decides which spans take it.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace pensieve::kernels::cuda {

struct GatherCopy {
  const void* src = nullptr;
  void* dst = nullptr;
  std::uint64_t bytes = 0;
};

cudaError_t launch_gather_copies(const GatherCopy* copies, std::int32_t count, cudaStream_t stream);

// The same kernel with the spans passed by value in the launch's parameters
// (kGatherCopiesPerLaunch of them per launch, under the 4 KiB parameter
// limit), so `copies` may be any host memory and need not outlive the call:
// no descriptor buffer to keep alive until the kernel has run. More spans
// than that take one launch per kGatherCopiesPerLaunch, in order.
inline constexpr std::int32_t kGatherCopiesPerLaunch = 128;
cudaError_t launch_gather_copies_by_value(const GatherCopy* copies, std::int32_t count, cudaStream_t stream);

}  // namespace pensieve::kernels::cuda
