// CUDA paged attention: multi-token (prefill + decode) over work items with
// block-table indirection, K/V tiles staged in shared memory as F32, F32
// online softmax; the merge pass of split decode rows; reshape_and_cache.
// Kept simple and correct by construction: one warp owns a (row, head) pair
// at a time; each lane scores one key of the tile, then accumulates a slice
// of head_dim. Q8_0 and FP8 caches are dequantised into the F32 tile
// (kv_quant.cuh), so everything after the load is the same for every dtype.
#include "gpu/kernels/cuda/attention_launch.hpp"
#include "gpu/kernels/cuda/kv_quant.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace pensieve::kernels::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kPairsPerWarp = 4;
constexpr int kKvTile = 32;  // keys per shared-memory tile: one per lane
constexpr int kPerLane = kMaxHeadDim / 32;
constexpr unsigned kFull = 0xffffffffu;

__device__ __forceinline__ float to_f32(float x) {
  return x;
}
__device__ __forceinline__ float to_f32(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <class T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(kFull, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(kFull, x, o);
  return x;
}

std::size_t items_smem_bytes(int head_dim) {
  return sizeof(float) * (std::size_t(kKvTile) * (2 * head_dim + 1) +
                          std::size_t(kWarps) * kPairsPerWarp * head_dim);
}

// Loads keys [k0, k0 + n) of (seq, kv_head) into shared memory, widened to
// F32; C is the cache's element type.
template <class C>
__device__ void load_kv_tile(const PagedAttentionParams& p, const std::int32_t* table, int kv_head,
                             int k0, int n, float* ks, float* vs) {
  const int hd = p.kv.head_dim, bt = p.kv.block_tokens;
  const C* cache = static_cast<const C*>(p.kv.data);
  for (int idx = threadIdx.x; idx < n * hd; idx += blockDim.x) {
    const int j = idx / hd, d = idx % hd, pos = k0 + j;
    const int block = table[pos / bt], in_block = pos % bt;
    ks[j * (hd + 1) + d] = to_f32(cache[p.kv.offset(block, 0, in_block, kv_head) + d]);
    vs[j * hd + d] = to_f32(cache[p.kv.offset(block, 1, in_block, kv_head) + d]);
  }
}

// The same from a block-quantised cache (Q8KvTag, Fp8KvTag): value kv_head *
// hd + d of each token's row.
template <class Tag>
__device__ void load_kv_tile_blocked(const PagedAttentionParams& p, const std::int32_t* table,
                                     int kv_head, int k0, int n, float* ks, float* vs) {
  const int hd = p.kv.head_dim, bt = p.kv.block_tokens;
  const auto* cache = static_cast<const std::uint8_t*>(p.kv.data);
  for (int idx = threadIdx.x; idx < n * hd; idx += blockDim.x) {
    const int j = idx / hd, d = idx % hd, pos = k0 + j;
    const int block = table[pos / bt], in_block = pos % bt;
    const std::int64_t value = std::int64_t(kv_head) * hd + d;
    ks[j * (hd + 1) + d] = dev::kv_value(Tag{}, cache + p.kv.row_byte_offset(block, 0, in_block), value);
    vs[j * hd + d] = dev::kv_value(Tag{}, cache + p.kv.row_byte_offset(block, 1, in_block), value);
  }
}

template <class C>
__device__ __forceinline__ void load_tile(const PagedAttentionParams& p, const std::int32_t* table,
                                          int kv_head, int k0, int n, float* ks, float* vs) {
  if constexpr (std::is_same_v<C, dev::Q8KvTag> || std::is_same_v<C, dev::Fp8KvTag>) {
    load_kv_tile_blocked<C>(p, table, kv_head, k0, n, ks, vs);
  } else {
    load_kv_tile<C>(p, table, kv_head, k0, n, ks, vs);
  }
}

// T: the queries' and output's type; C: the cache's (an element type or a
// block-quantised tag).
template <class T, class C>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_items_kernel(PagedAttentionParams p, const AttentionWorkItem* items,
                                 float* partial) {
  extern __shared__ float smem[];
  const AttentionWorkItem item = items[blockIdx.x];
  const int kv_head = blockIdx.y, hd = p.kv.head_dim, group = p.n_heads / p.kv.n_kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* ks = smem;  // [kKvTile][hd + 1]: padded so lanes reading rows hit distinct banks
  float* vs = ks + kKvTile * (hd + 1);                        // [kKvTile][hd]
  float* qs = vs + kKvTile * hd + warp * kPairsPerWarp * hd;  // this warp's [kPairsPerWarp][hd]
  const int q0 = p.q_start[item.seq];
  const int first_pos = p.context_tokens[item.seq] - (p.q_start[item.seq + 1] - q0);
  const int last_row = item.row_begin + item.row_count - 1;
  const int kv_end = min(item.kv_end, first_pos + last_row + 1);
  const std::int32_t* table = p.block_table + std::int64_t(item.seq) * p.max_blocks_per_seq;
  const int pairs = item.row_count * group;
  const T* q = static_cast<const T*>(p.q);

  for (int pass_base = 0; pass_base < pairs; pass_base += kWarps * kPairsPerWarp) {
    float m[kPairsPerWarp], l[kPairsPerWarp], acc[kPairsPerWarp][kPerLane];
    int row[kPairsPerWarp], head[kPairsPerWarp];
    __syncwarp();  // every lane is done with the previous pass's queries
#pragma unroll
    for (int pp = 0; pp < kPairsPerWarp; ++pp) {
      // Round robin over warps, so a decode row's few heads use several warps.
      const int pair = pass_base + pp * kWarps + warp;
      row[pp] = pair < pairs ? item.row_begin + pair / group : -1;
      head[pp] = kv_head * group + pair % group;
      m[pp] = -INFINITY;
      l[pp] = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) acc[pp][i] = 0.0f;
      if (row[pp] >= 0) {
        const T* qrow = q + (std::int64_t(q0 + row[pp]) * p.n_heads + head[pp]) * hd;
        for (int d = lane; d < hd; d += 32) qs[pp * hd + d] = to_f32(qrow[d]);
      }
    }
    for (int k0 = item.kv_begin; k0 < kv_end; k0 += kKvTile) {
      const int n = min(kKvTile, kv_end - k0);
      __syncthreads();  // the previous tile is consumed
      load_tile<C>(p, table, kv_head, k0, n, ks, vs);
      __syncthreads();
#pragma unroll
      for (int pp = 0; pp < kPairsPerWarp; ++pp) {
        if (row[pp] < 0) continue;
        const int limit = first_pos + row[pp] + 1;  // causal: keys before this position
        float s = -INFINITY;
        if (lane < n && k0 + lane < limit) {
          float dot = 0.0f;
          for (int d = 0; d < hd; ++d) dot = fmaf(qs[pp * hd + d], ks[lane * (hd + 1) + d], dot);
          s = dot * p.softmax_scale;
        }
        const float tile_max = warp_max(s);
        if (tile_max == -INFINITY) continue;  // no key of this tile is visible to the row
        const float m_new = fmaxf(m[pp], tile_max);
        const float corr = m[pp] == -INFINITY ? 0.0f : expf(m[pp] - m_new);
        const float prob = s == -INFINITY ? 0.0f : expf(s - m_new);
        l[pp] = l[pp] * corr + warp_sum(prob);
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) acc[pp][i] *= corr;
        for (int j = 0; j < n; ++j) {
          const float pj = __shfl_sync(kFull, prob, j);
#pragma unroll
          for (int i = 0; i < kPerLane; ++i) {
            const int d = lane + 32 * i;
            if (d < hd) acc[pp][i] = fmaf(pj, vs[j * hd + d], acc[pp][i]);
          }
        }
        m[pp] = m_new;
      }
    }
#pragma unroll
    for (int pp = 0; pp < kPairsPerWarp; ++pp) {
      if (row[pp] < 0) continue;
      if (item.merge < 0) {
        T* out = static_cast<T*>(p.out) + (std::int64_t(q0 + row[pp]) * p.n_heads + head[pp]) * hd;
        const float inv = 1.0f / l[pp];
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          if (lane + 32 * i < hd) out[lane + 32 * i] = from_f32<T>(acc[pp][i] * inv);
        }
      } else {
        float* state = partial + (std::int64_t(blockIdx.x) * p.n_heads + head[pp]) * (hd + 2);
        if (lane == 0) {
          state[0] = m[pp];
          state[1] = l[pp];
        }
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          if (lane + 32 * i < hd) state[2 + lane + 32 * i] = acc[pp][i];
        }
      }
    }
  }
}

template <class T>
__global__ void paged_attention_merge_kernel(PagedAttentionParams p, const AttentionMerge* merges,
                                             const float* partial) {
  const AttentionMerge merge = merges[blockIdx.x];
  const int head = blockIdx.y, hd = p.kv.head_dim;
  const std::int64_t stride = std::int64_t(p.n_heads) * (hd + 2);
  const float* first =
      partial + std::int64_t(merge.first_item) * stride + std::int64_t(head) * (hd + 2);
  float m = -INFINITY;
  for (int i = 0; i < merge.item_count; ++i) m = fmaxf(m, first[i * stride]);
  float l = 0.0f;
  for (int i = 0; i < merge.item_count; ++i)
    l += first[i * stride + 1] * expf(first[i * stride] - m);
  T* out = static_cast<T*>(p.out) + (std::int64_t(p.q_start[merge.seq]) * p.n_heads + head) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < merge.item_count; ++i)
      acc += first[i * stride + 2 + d] * expf(first[i * stride] - m);
    out[d] = from_f32<T>(acc / l);
  }
}

template <class T>
__global__ void reshape_and_cache_kernel(ReshapeAndCacheParams p) {
  const std::int64_t slot = p.slots[blockIdx.x];
  if (slot < 0) return;
  const kv::PagedKvView& c = p.cache;
  const int block = int(slot / c.block_tokens), in_block = int(slot % c.block_tokens);
  const std::int64_t row = c.token_stride();
  const T* k = static_cast<const T*>(p.k) + blockIdx.x * row;
  const T* v = static_cast<const T*>(p.v) + blockIdx.x * row;
  T* dst = static_cast<T*>(c.data);
  for (std::int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    dst[c.offset(block, 0, in_block, 0) + i] = k[i];
    dst[c.offset(block, 1, in_block, 0) + i] = v[i];
  }
}

// reshape_and_cache into a block-quantised cache: one warp per block
// (kv_quant.cuh) of the token's K row then its V row.
template <class T, class Tag>
__global__ void reshape_and_cache_blocked_kernel(ReshapeAndCacheParams p) {
  const std::int64_t slot = p.slots[blockIdx.x];
  if (slot < 0) return;
  const kv::PagedKvView& c = p.cache;
  const int block = int(slot / c.block_tokens), in_block = int(slot % c.block_tokens);
  const std::int64_t row = c.token_stride(), blocks = dev::kv_row_blocks<Tag>(row);
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  auto* cache = static_cast<std::uint8_t*>(c.data);
  for (std::int64_t b = warp; b < 2 * blocks; b += warps) {
    const int which = int(b / blocks);
    const T* src = static_cast<const T*>(which == 0 ? p.k : p.v) + blockIdx.x * row;
    dev::kv_quantize_row_block<Tag>(row, b % blocks, [src](std::int64_t i) { return to_f32(src[i]); },
                                    cache + c.row_byte_offset(block, which, in_block));
  }
}

// Calls f with a null pointer of the C++ type of an element dtype (float,
// __half, __nv_bfloat16); invalid for a block-quantised one.
template <class F>
cudaError_t with_element_type(kv::KvDType t, F&& f) {
  switch (t) {
    case kv::KvDType::f32:
      return f(static_cast<float*>(nullptr));
    case kv::KvDType::f16:
      return f(static_cast<__half*>(nullptr));
    case kv::KvDType::bf16:
      return f(static_cast<__nv_bfloat16*>(nullptr));
    case kv::KvDType::q8_0:
    case kv::KvDType::fp8:
      break;
  }
  return cudaErrorInvalidValue;
}

template <class T, class C>
cudaError_t launch_items(const PagedAttentionParams& p, const AttentionWorkItem* items,
                         std::int32_t num_items, float* partial, cudaStream_t stream) {
  const std::size_t smem = items_smem_bytes(p.kv.head_dim);
  cudaError_t e = cudaFuncSetAttribute(paged_attention_items_kernel<T, C>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned(num_items), unsigned(p.kv.n_kv_heads));
  paged_attention_items_kernel<T, C><<<grid, kWarps * 32, smem, stream>>>(p, items, partial);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_paged_attention_items(const PagedAttentionParams& p,
                                         const AttentionWorkItem* items, std::int32_t num_items,
                                         float* partial, cudaStream_t stream) {
  if (num_items == 0) return cudaSuccess;
  const bool blocked = kv::kv_dtype_is_blocked(p.kv.dtype);
  if ((!blocked && p.kv.dtype != p.q_dtype) || p.kv.head_dim > kMaxHeadDim || p.kv.head_dim <= 0 ||
      p.kv.n_kv_heads <= 0 || p.n_heads % p.kv.n_kv_heads != 0 ||
      (blocked && (std::int64_t(p.kv.n_kv_heads) * p.kv.head_dim) % 32 != 0)) {
    return cudaErrorInvalidValue;
  }
  return with_element_type(p.q_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    switch (p.kv.dtype) {
      case kv::KvDType::q8_0:
        return launch_items<T, dev::Q8KvTag>(p, items, num_items, partial, stream);
      case kv::KvDType::fp8:
        return launch_items<T, dev::Fp8KvTag>(p, items, num_items, partial, stream);
      case kv::KvDType::f32:
      case kv::KvDType::f16:
      case kv::KvDType::bf16:
        break;
    }
    return launch_items<T, T>(p, items, num_items, partial, stream);
  });
}

cudaError_t launch_paged_attention_merge(const PagedAttentionParams& p,
                                         const AttentionMerge* merges, std::int32_t num_merges,
                                         const float* partial, cudaStream_t stream) {
  if (num_merges == 0) return cudaSuccess;
  const dim3 grid(unsigned(num_merges), unsigned(p.n_heads));
  return with_element_type(p.q_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    paged_attention_merge_kernel<T><<<grid, 128, 0, stream>>>(p, merges, partial);
    return cudaGetLastError();
  });
}

cudaError_t launch_reshape_and_cache(const ReshapeAndCacheParams& p, cudaStream_t stream) {
  if (p.num_tokens == 0) return cudaSuccess;
  const bool blocked = kv::kv_dtype_is_blocked(p.cache.dtype);
  if ((!blocked && p.src_dtype != p.cache.dtype) || (blocked && p.cache.token_stride() % 32 != 0))
    return cudaErrorInvalidValue;
  return with_element_type(p.src_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const unsigned tokens = unsigned(p.num_tokens);
    switch (p.cache.dtype) {
      case kv::KvDType::q8_0:
        reshape_and_cache_blocked_kernel<T, dev::Q8KvTag><<<tokens, 128, 0, stream>>>(p);
        break;
      case kv::KvDType::fp8:
        reshape_and_cache_blocked_kernel<T, dev::Fp8KvTag><<<tokens, 128, 0, stream>>>(p);
        break;
      case kv::KvDType::f32:
      case kv::KvDType::f16:
      case kv::KvDType::bf16:
        reshape_and_cache_kernel<T><<<tokens, 128, 0, stream>>>(p);
        break;
    }
    return cudaGetLastError();
  });
}

}  // namespace pensieve::kernels::cuda
