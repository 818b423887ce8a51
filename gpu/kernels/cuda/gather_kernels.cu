// The swap gather kernel (gather_launch.hpp).
#include "gpu/kernels/cuda/gather_launch.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace pensieve::kernels::cuda {
namespace {

__device__ void copy_span(const GatherCopy& c) {
  const auto src = reinterpret_cast<std::uintptr_t>(c.src), dst = reinterpret_cast<std::uintptr_t>(c.dst);
  if (((src | dst | c.bytes) & 15u) == 0) {
    const auto* s = static_cast<const uint4*>(c.src);
    auto* d = static_cast<uint4*>(c.dst);
    for (std::uint64_t i = threadIdx.x; i < c.bytes / 16; i += blockDim.x) d[i] = s[i];
    return;
  }
  const auto* s = static_cast<const unsigned char*>(c.src);
  auto* d = static_cast<unsigned char*>(c.dst);
  for (std::uint64_t i = threadIdx.x; i < c.bytes; i += blockDim.x) d[i] = s[i];
}

__global__ void gather_copies_kernel(const GatherCopy* copies) { copy_span(copies[blockIdx.x]); }

struct GatherBatch {
  GatherCopy copies[kGatherCopiesPerLaunch];
};
static_assert(sizeof(GatherBatch) <= 4000, "kernel parameters are limited to 4 KiB");

__global__ void gather_batch_kernel(const GatherBatch batch) { copy_span(batch.copies[blockIdx.x]); }

}  // namespace

cudaError_t launch_gather_copies_by_value(const GatherCopy* copies, std::int32_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (count < 0 || copies == nullptr) return cudaErrorInvalidValue;
  for (std::int32_t at = 0; at < count; at += kGatherCopiesPerLaunch) {
    const std::int32_t n = count - at < kGatherCopiesPerLaunch ? count - at : kGatherCopiesPerLaunch;
    GatherBatch batch{};
    for (std::int32_t i = 0; i < n; ++i) batch.copies[i] = copies[at + i];
    gather_batch_kernel<<<unsigned(n), 512, 0, stream>>>(batch);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

cudaError_t launch_gather_copies(const GatherCopy* copies, std::int32_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (count < 0 || copies == nullptr) return cudaErrorInvalidValue;
  gather_copies_kernel<<<unsigned(count), 512, 0, stream>>>(copies);
  return cudaGetLastError();
}

}  // namespace pensieve::kernels::cuda
