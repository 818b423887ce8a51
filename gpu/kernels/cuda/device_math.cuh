#pragma once
// Device helpers shared by the CUDA kernels of the decoder: conversions
// between F32 and the storage dtypes (round to nearest even, as the CPU's
// gpu/formats/half.hpp) and warp / block reductions.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace pensieve::kernels::cuda::dev {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, o));
  return x;
}

// Sum of x over the block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. `scratch` is 32 floats of shared memory; the call
// starts with a barrier, so back-to-back calls may share scratch.
__device__ __forceinline__ float block_sum(float x, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  x = warp_sum(x);
  __syncthreads();  // scratch is free (a previous call may still be reading it)
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  float total = lane < warps ? scratch[lane] : 0.0f;
  total = warp_sum(total);
  return total;
}

}  // namespace pensieve::kernels::cuda::dev
