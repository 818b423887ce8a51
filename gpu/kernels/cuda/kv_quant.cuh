#pragma once
// Block-quantised KV on the device, in the CPU pool's byte layout
// (kv/paged_kv_view.hpp): Q8_0 blocks of an F16 scale and 64 int8 quants
// (a row's last block 32 when the row is an odd multiple of 32), FP8 blocks
// of an F32 scale and 32 E4M3 codes. A warp quantises one block (lane i
// holds values i and, for Q8_0, i + 32), with the CPU reference's arithmetic
// step for step (kernels/cpu/reshape_and_cache_q8.cpp, kv/fp8_kv_row.cpp):
// IEEE division (nvcc's default -prec-div=true), round to nearest even, so
// the bytes equal the CPU op's. Dequantising is one product per value, as on
// the CPU.
#include "gpu/kernels/cuda/device_math.cuh"
#include "gpu/kv/paged_kv_view.hpp"

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace pensieve::kernels::cuda::dev {

// Tags naming a blocked KV dtype in kernel templates.
struct Q8KvTag {
  static constexpr kv::KvDType kDType = kv::KvDType::q8_0;
  static constexpr int kBlockValues = kv::kQ8KvBlockValues;
};
struct Fp8KvTag {
  static constexpr kv::KvDType kDType = kv::KvDType::fp8;
  static constexpr int kBlockValues = kv::kFp8KvBlockValues;
};

// Value i of a quantised row.
__device__ __forceinline__ float kv_value(Q8KvTag, const std::uint8_t* row, std::int64_t i) {
  const std::uint8_t* blk = row + (i / kv::kQ8KvBlockValues) * std::int64_t(kv::kQ8KvBlockBytes);
  const float d = __half2float(*reinterpret_cast<const __half*>(blk));
  return float(reinterpret_cast<const std::int8_t*>(blk)[2 + i % kv::kQ8KvBlockValues]) * d;
}
__device__ __forceinline__ float kv_value(Fp8KvTag, const std::uint8_t* row, std::int64_t i) {
  const std::uint8_t* blk = row + (i / kv::kFp8KvBlockValues) * std::int64_t(kv::kFp8KvBlockBytes);
  const float scale = *reinterpret_cast<const float*>(blk);
  const __half h(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(blk[4 + i % kv::kFp8KvBlockValues]), __NV_E4M3));
  return __half2float(h) * scale;
}

// Blocks of a row of `row_values` values (the last one may be short).
template <class Tag>
__device__ __forceinline__ std::int64_t kv_row_blocks(std::int64_t row_values) {
  return (row_values + Tag::kBlockValues - 1) / Tag::kBlockValues;
}

// Writes a block of `count` values at blk from the warp's values (x[s] of
// lane i is value i + 32 s; zeros past count) and their amax.
template <int kPer>
__device__ __forceinline__ void kv_store_block(Q8KvTag, float amax, const float (&x)[kPer], int count,
                                               std::uint8_t* blk) {
  const int lane = threadIdx.x % 32;
  // 1 / d before d's rounding to F16, as ggml's quantize_row_q8_0.
  const float d = amax / 127.0f, inv = amax != 0.0f ? 127.0f / amax : 0.0f;
  if (lane == 0) *reinterpret_cast<__half*>(blk) = __float2half_rn(d);
  for (int s = 0; s < kPer; ++s) {
    const int i = lane + 32 * s;
    if (i < count)
      reinterpret_cast<std::int8_t*>(blk)[2 + i] = std::int8_t(fminf(fmaxf(rintf(x[s] * inv), -127.0f), 127.0f));
  }
}
template <int kPer>
__device__ __forceinline__ void kv_store_block(Fp8KvTag, float amax, const float (&x)[kPer], int count,
                                               std::uint8_t* blk) {
  const int lane = threadIdx.x % 32;
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;  // kv::fp8_e4m3_scale
  if (lane == 0) *reinterpret_cast<float*>(blk) = scale;
  for (int s = 0; s < kPer; ++s) {
    const int i = lane + 32 * s;
    if (i < count) blk[4 + i] = std::uint8_t(__nv_cvt_float_to_fp8(x[s] / scale, __NV_SATFINITE, __NV_E4M3));
  }
}

// The warp quantises block b of a row of `row_values` values into the row at
// row_dst; value(i) gives value i of the source row. Every lane of the warp
// must call it.
template <class Tag, class Value>
__device__ __forceinline__ void kv_quantize_row_block(std::int64_t row_values, std::int64_t b, Value value,
                                                      std::uint8_t* row_dst) {
  constexpr int kPer = Tag::kBlockValues / 32;
  const int lane = threadIdx.x % 32;
  const std::int64_t first = b * Tag::kBlockValues;
  const int count = int(row_values - first < Tag::kBlockValues ? row_values - first : Tag::kBlockValues);
  float x[kPer];
  float amax = 0.0f;
  for (int s = 0; s < kPer; ++s) {
    const int i = lane + 32 * s;
    x[s] = i < count ? value(first + i) : 0.0f;
    amax = fmaxf(amax, fabsf(x[s]));
  }
  kv_store_block(Tag{}, warp_max(amax), x, count, row_dst + kv::kv_values_bytes(Tag::kDType, first));
}

}  // namespace pensieve::kernels::cuda::dev
