// The swap gather kernel (gather_launch.hpp).
#include "gpu/kernels/cuda/gather_launch.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace pensieve::kernels::cuda {
namespace {

__global__ void gather_copies_kernel(const GatherCopy* copies) {
  const GatherCopy c = copies[blockIdx.x];
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

}  // namespace

cudaError_t launch_gather_copies(const GatherCopy* copies, std::int32_t count, cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (count < 0 || copies == nullptr) return cudaErrorInvalidValue;
  gather_copies_kernel<<<unsigned(count), 512, 0, stream>>>(copies);
  return cudaGetLastError();
}

}  // namespace pensieve::kernels::cuda
