#pragma once
// Block-quantised KV on the device, in the CPU pool's byte layout
// (kv/paged_kv_view.hpp): Q8_0 blocks of an F16 scale and 32 int8 quants,
// FP8 blocks of an F32 scale and 32 E4M3 codes. A warp quantises one block
// (lane i holds value i), with the CPU reference's arithmetic step for step
// (kernels/cpu/reshape_and_cache_q8.cpp, kv/fp8_kv_row.cpp): IEEE division
// (nvcc's default -prec-div=true), round to nearest even, so the bytes equal
// the CPU op's. Dequantising is one product per value, as on the CPU.
#include "gpu/kernels/cuda/device_math.cuh"
#include "gpu/kv/paged_kv_view.hpp"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace pensieve::kernels::cuda::dev {

// Tags naming a blocked KV dtype in kernel templates.
struct Q8KvTag {
  static constexpr std::size_t kBlockBytes = kv::kQ8KvBlockBytes;
};
struct Fp8KvTag {
  static constexpr std::size_t kBlockBytes = kv::kFp8KvBlockBytes;
};

// Value i of a quantised row.
__device__ __forceinline__ float kv_value(Q8KvTag, const std::uint8_t* row, std::int64_t i) {
  const std::uint8_t* blk = row + (i / 32) * std::int64_t(kv::kQ8KvBlockBytes);
  const float d = __half2float(*reinterpret_cast<const __half*>(blk));
  return float(reinterpret_cast<const std::int8_t*>(blk)[2 + i % 32]) * d;
}
__device__ __forceinline__ float kv_value(Fp8KvTag, const std::uint8_t* row, std::int64_t i) {
  const std::uint8_t* blk = row + (i / 32) * std::int64_t(kv::kFp8KvBlockBytes);
  const float scale = *reinterpret_cast<const float*>(blk);
  const __half h(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(blk[4 + i % 32]), __NV_E4M3));
  return __half2float(h) * scale;
}

// The warp writes block `blk` (kBlockBytes at blk) from lane i's value x;
// every lane of the warp must call it.
__device__ __forceinline__ void kv_quantize_block(Q8KvTag, float x, std::uint8_t* blk) {
  const int lane = threadIdx.x % 32;
  const float amax = warp_max(fabsf(x));
  // 1 / d before d's rounding to F16, as ggml's quantize_row_q8_0.
  const float d = amax / 127.0f, inv = amax != 0.0f ? 127.0f / amax : 0.0f;
  if (lane == 0) *reinterpret_cast<__half*>(blk) = __float2half_rn(d);
  reinterpret_cast<std::int8_t*>(blk)[2 + lane] = std::int8_t(fminf(fmaxf(rintf(x * inv), -127.0f), 127.0f));
}
__device__ __forceinline__ void kv_quantize_block(Fp8KvTag, float x, std::uint8_t* blk) {
  const int lane = threadIdx.x % 32;
  const float amax = warp_max(fabsf(x));
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;  // kv::fp8_e4m3_scale
  if (lane == 0) *reinterpret_cast<float*>(blk) = scale;
  blk[4 + lane] = std::uint8_t(__nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3));
}

}  // namespace pensieve::kernels::cuda::dev
