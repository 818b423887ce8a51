// The decoder's element-wise and row-wise CUDA kernels (see ops_launch.hpp).
// Memory-bound and simple: one thread block per row where a row reduction is
// needed, otherwise a 2-D grid of (row, 256-column chunk).
#include "gpu/kernels/cuda/device_math.cuh"
#include "gpu/kernels/cuda/kv_quant.cuh"
#include "gpu/kernels/cuda/ops_launch.hpp"

#include <cstdint>
#include <type_traits>

namespace pensieve::kernels::cuda {
namespace {

using dev::from_f32;
using dev::to_f32;

constexpr int kChunk = 256;

dim3 rows_grid(std::int32_t rows, std::int32_t cols) {
  return dim3(unsigned(rows), unsigned((cols + kChunk - 1) / kChunk));
}

// Calls f with a null pointer of the C++ type of `t` (float, __half, __nv_bfloat16).
template <class F>
cudaError_t with_dtype(KvDType t, F&& f) {
  switch (t) {
    case KvDType::f32:
      f(static_cast<float*>(nullptr));
      return cudaGetLastError();
    case KvDType::f16:
      f(static_cast<__half*>(nullptr));
      return cudaGetLastError();
    case KvDType::bf16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      return cudaGetLastError();
    case KvDType::q8_0:
    case KvDType::fp8:
      break;  // not element types: their cache writes take the blocked kernels
  }
  return cudaErrorInvalidValue;
}

template <class T>
__global__ void embedding_kernel(const T* table, std::int32_t dim, const std::int32_t* tokens,
                                 float* out) {
  const std::int64_t src = std::int64_t(tokens[blockIdx.x]) * dim;
  const std::int64_t dst = std::int64_t(blockIdx.x) * dim;
  for (int d = threadIdx.x; d < dim; d += blockDim.x) out[dst + d] = to_f32(table[src + d]);
}

template <class T>
__global__ void rms_norm_kernel(RmsNormLaunch p) {
  __shared__ float scratch[32];
  const std::int64_t in_row =
      p.row_index != nullptr ? std::int64_t(p.row_index[blockIdx.x]) : std::int64_t(blockIdx.x);
  const float* x = p.x + in_row * p.x_stride;
  float sum = 0.0f;
  for (int d = threadIdx.x; d < p.dim; d += blockDim.x) sum = fmaf(x[d], x[d], sum);
  sum = dev::block_sum(sum, scratch);
  const float scale = 1.0f / sqrtf(sum / float(p.dim) + p.eps);
  T* y = static_cast<T*>(p.y) + std::int64_t(blockIdx.x) * p.y_stride;
  for (int d = threadIdx.x; d < p.dim; d += blockDim.x) y[d] = from_f32<T>(p.weight[d] * (scale * x[d]));
}

__global__ void rope_kernel(RopeLaunch p) {
  const int half = p.rope_dims / 2;
  const float pos = float(p.positions[blockIdx.x]);
  float* row = p.x + std::int64_t(blockIdx.x) * p.row_stride;
  for (int idx = threadIdx.x; idx < p.n_heads * half; idx += blockDim.x) {
    const int h = idx / half, i = idx % half;
    float* x = row + std::int64_t(h) * p.head_dim;
    const int a = p.interleaved ? 2 * i : i;
    const int b = p.interleaved ? 2 * i + 1 : i + half;
    const float angle = pos * p.inv_freq[i];
    const float c = cosf(angle), s = sinf(angle);
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

template <class T>
__global__ void silu_mul_kernel(const float* gate, const float* up, std::int64_t in_stride,
                                std::int32_t cols, T* out, std::int64_t out_stride) {
  const int i = blockIdx.y * kChunk + threadIdx.x;
  if (i >= cols) return;
  const std::int64_t r = blockIdx.x;
  const float g = gate[r * in_stride + i];
  out[r * out_stride + i] = from_f32<T>(g / (1.0f + expf(-g)) * up[r * in_stride + i]);
}

__global__ void add_rows_kernel(float* x, std::int64_t x_stride, const float* delta,
                                std::int64_t delta_stride, std::int32_t cols) {
  const int i = blockIdx.y * kChunk + threadIdx.x;
  if (i >= cols) return;
  x[std::int64_t(blockIdx.x) * x_stride + i] += delta[std::int64_t(blockIdx.x) * delta_stride + i];
}

__global__ void add_bias_kernel(float* x, std::int64_t x_stride, std::int32_t cols,
                                const float* bias) {
  const int i = blockIdx.y * kChunk + threadIdx.x;
  if (i >= cols) return;
  x[std::int64_t(blockIdx.x) * x_stride + i] += bias[i];
}

template <class T>
__global__ void convert_rows_kernel(const float* src, std::int64_t src_stride, std::int32_t cols,
                                    T* dst, std::int64_t dst_stride) {
  const int i = blockIdx.y * kChunk + threadIdx.x;
  if (i >= cols) return;
  dst[std::int64_t(blockIdx.x) * dst_stride + i] =
      from_f32<T>(src[std::int64_t(blockIdx.x) * src_stride + i]);
}

template <class T>
__global__ void cache_write_kernel(const float* k, const float* v, std::int64_t src_stride,
                                   const std::int64_t* slots, kv::PagedKvView c) {
  const std::int64_t slot = slots[blockIdx.x];
  if (slot < 0) return;
  const auto block = std::int32_t(slot / c.block_tokens);
  const auto in_block = std::int32_t(slot % c.block_tokens);
  const std::int64_t row = c.token_stride();
  const float* ks = k + std::int64_t(blockIdx.x) * src_stride;
  const float* vs = v + std::int64_t(blockIdx.x) * src_stride;
  T* kd = static_cast<T*>(c.data) + c.offset(block, 0, in_block, 0);
  T* vd = static_cast<T*>(c.data) + c.offset(block, 1, in_block, 0);
  for (std::int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    kd[i] = from_f32<T>(ks[i]);
    vd[i] = from_f32<T>(vs[i]);
  }
}

// The same into a block-quantised cache: one warp per block (kv_quant.cuh)
// of the token's K row then its V row.
template <class Tag>
__global__ void cache_write_blocked_kernel(const float* k, const float* v, std::int64_t src_stride,
                                           const std::int64_t* slots, kv::PagedKvView c) {
  const std::int64_t slot = slots[blockIdx.x];
  if (slot < 0) return;
  const auto block = std::int32_t(slot / c.block_tokens);
  const auto in_block = std::int32_t(slot % c.block_tokens);
  const std::int64_t row = c.token_stride(), blocks = dev::kv_row_blocks<Tag>(row);
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  auto* cache = static_cast<std::uint8_t*>(c.data);
  for (std::int64_t b = warp; b < 2 * blocks; b += warps) {
    const int which = int(b / blocks);
    const float* src = (which == 0 ? k : v) + std::int64_t(blockIdx.x) * src_stride;
    dev::kv_quantize_row_block<Tag>(row, b % blocks, [src](std::int64_t i) { return src[i]; },
                                    cache + c.row_byte_offset(block, which, in_block));
  }
}

// Element d of a head after RoPE (the rotation of its pair), or as it is.
__device__ __forceinline__ float rotated(const float* x, int d, int rope_dims, bool interleaved,
                                         float pos, const float* inv_freq) {
  if (d >= rope_dims) return x[d];
  const int half = rope_dims / 2;
  const int i = interleaved ? d / 2 : (d < half ? d : d - half);
  const int a = interleaved ? 2 * i : i;
  const int b = interleaved ? 2 * i + 1 : i + half;
  const float angle = pos * inv_freq[i];
  const float c = cosf(angle), s = sinf(angle);
  const float x0 = x[a], x1 = x[b];
  return d == a ? x0 * c - x1 * s : x0 * s + x1 * c;
}

template <class T>
__global__ void qkv_rope_cache_kernel(QkvRopeCacheLaunch p) {
  const std::int64_t t = blockIdx.x;
  const float* row = p.qkv + t * p.row_stride;
  const float pos = float(p.positions[t]);
  const int hd = p.head_dim, q_heads = p.n_heads, heads = p.n_heads + p.n_kv_heads;
  const std::int64_t slot = p.slots[t];
  T* q = static_cast<T*>(p.q_out) + t * p.q_stride;
  T* k = nullptr;
  T* v = nullptr;
  if (slot >= 0) {
    const auto block = std::int32_t(slot / p.cache.block_tokens);
    const auto in_block = std::int32_t(slot % p.cache.block_tokens);
    k = static_cast<T*>(p.cache.data) + p.cache.offset(block, 0, in_block, 0);
    v = static_cast<T*>(p.cache.data) + p.cache.offset(block, 1, in_block, 0);
  }
  for (int idx = threadIdx.x; idx < heads * hd; idx += blockDim.x) {
    const int h = idx / hd, d = idx % hd;
    const float y = rotated(row + std::int64_t(h) * hd, d, p.rope_dims, p.interleaved, pos, p.inv_freq);
    if (h < q_heads) {
      q[idx] = from_f32<T>(y);
    } else if (k != nullptr) {
      k[idx - q_heads * hd] = from_f32<T>(y);
    }
  }
  if (v == nullptr) return;
  const float* vs = row + std::int64_t(heads) * hd;
  for (int idx = threadIdx.x; idx < p.n_kv_heads * hd; idx += blockDim.x) v[idx] = from_f32<T>(vs[idx]);
}

// qkv_rope_cache with a block-quantised cache: Q as above (T: its type); K
// and V quantised from F32 one warp per block (kv_quant.cuh), each lane
// computing its values' rotations itself (no staging, no block-wide barrier).
template <class T, class Tag>
__global__ void qkv_rope_cache_blocked_kernel(QkvRopeCacheLaunch p) {
  const std::int64_t t = blockIdx.x;
  const float* row_in = p.qkv + t * p.row_stride;
  const float pos = float(p.positions[t]);
  const int hd = p.head_dim, q_heads = p.n_heads;
  T* q = static_cast<T*>(p.q_out) + t * p.q_stride;
  for (int idx = threadIdx.x; idx < q_heads * hd; idx += blockDim.x) {
    q[idx] = from_f32<T>(rotated(row_in + std::int64_t(idx / hd) * hd, idx % hd, p.rope_dims, p.interleaved, pos,
                                 p.inv_freq));
  }
  const std::int64_t slot = p.slots[t];
  if (slot < 0) return;
  const auto block = std::int32_t(slot / p.cache.block_tokens);
  const auto in_block = std::int32_t(slot % p.cache.block_tokens);
  const std::int64_t row = std::int64_t(p.n_kv_heads) * hd, blocks = dev::kv_row_blocks<Tag>(row);
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const float* k_src = row_in + std::int64_t(q_heads) * hd;
  const float* v_src = k_src + std::int64_t(p.n_kv_heads) * hd;
  auto* cache = static_cast<std::uint8_t*>(p.cache.data);
  for (std::int64_t b = warp; b < 2 * blocks; b += warps) {
    const int which = int(b / blocks);
    const auto value = [&](std::int64_t i) {
      return which == 0 ? rotated(k_src + (i / hd) * hd, int(i % hd), p.rope_dims, p.interleaved, pos, p.inv_freq)
                        : v_src[i];
    };
    dev::kv_quantize_row_block<Tag>(row, b % blocks, value, cache + p.cache.row_byte_offset(block, which, in_block));
  }
}

template <class T>
__global__ void widen_kernel(const T* src, std::int64_t n, float* dst) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    dst[i] = to_f32(src[i]);
  }
}

__device__ __forceinline__ std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void fill_uniform_kernel(T* dst, std::int64_t n, std::uint64_t seed, float scale) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::uint64_t h = splitmix64(seed * 0x100000001b3ull ^ std::uint64_t(i));
    const float u = float(h >> 40) * (1.0f / 16777216.0f);  // [0, 1), 24 bits
    dst[i] = from_f32<T>((2.0f * u - 1.0f) * scale);
  }
}

unsigned grid_stride_blocks(std::int64_t n) {
  const std::int64_t blocks = (n + 255) / 256;
  return unsigned(blocks < 65536 ? blocks : 65536);
}

}  // namespace

cudaError_t launch_embedding(const void* table, KvDType table_dtype, std::int32_t dim,
                             const std::int32_t* tokens, std::int32_t n_tokens, float* out,
                             cudaStream_t stream) {
  if (n_tokens == 0) return cudaSuccess;
  if (dim <= 0 || n_tokens < 0) return cudaErrorInvalidValue;
  return with_dtype(table_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    embedding_kernel<T><<<unsigned(n_tokens), 256, 0, stream>>>(static_cast<const T*>(table), dim,
                                                                 tokens, out);
  });
}

cudaError_t launch_rms_norm(const RmsNormLaunch& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.dim <= 0) return cudaErrorInvalidValue;
  return with_dtype(p.y_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    rms_norm_kernel<T><<<unsigned(p.rows), 512, 0, stream>>>(p);
  });
}

cudaError_t launch_rope(const RopeLaunch& p, cudaStream_t stream) {
  if (p.rows == 0 || p.rope_dims == 0) return cudaSuccess;
  if (p.rows < 0 || p.rope_dims % 2 != 0 || p.rope_dims > p.head_dim || p.n_heads <= 0)
    return cudaErrorInvalidValue;
  rope_kernel<<<unsigned(p.rows), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_silu_mul(const float* gate, const float* up, std::int64_t in_stride,
                            std::int32_t rows, std::int32_t cols, void* out, KvDType out_dtype,
                            std::int64_t out_stride, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  return with_dtype(out_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    silu_mul_kernel<T><<<rows_grid(rows, cols), kChunk, 0, stream>>>(
        gate, up, in_stride, cols, static_cast<T*>(out), out_stride);
  });
}

cudaError_t launch_add_rows(float* x, std::int64_t x_stride, const float* delta,
                            std::int64_t delta_stride, std::int32_t rows, std::int32_t cols,
                            cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  add_rows_kernel<<<rows_grid(rows, cols), kChunk, 0, stream>>>(x, x_stride, delta, delta_stride,
                                                               cols);
  return cudaGetLastError();
}

cudaError_t launch_add_bias(float* x, std::int64_t x_stride, std::int32_t rows, std::int32_t cols,
                            const float* bias, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  add_bias_kernel<<<rows_grid(rows, cols), kChunk, 0, stream>>>(x, x_stride, cols, bias);
  return cudaGetLastError();
}

cudaError_t launch_convert_rows(const float* src, std::int64_t src_stride, std::int32_t rows,
                                std::int32_t cols, void* dst, KvDType dst_dtype,
                                std::int64_t dst_stride, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  return with_dtype(dst_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    convert_rows_kernel<T><<<rows_grid(rows, cols), kChunk, 0, stream>>>(
        src, src_stride, cols, static_cast<T*>(dst), dst_stride);
  });
}

cudaError_t launch_cache_write_f32(const float* k, const float* v, std::int64_t src_stride,
                                   const std::int64_t* slots, std::int32_t num_tokens,
                                   const kv::PagedKvView& cache, cudaStream_t stream) {
  if (num_tokens == 0) return cudaSuccess;
  if (num_tokens < 0 || cache.block_tokens <= 0) return cudaErrorInvalidValue;
  if (kv::kv_dtype_is_blocked(cache.dtype)) {
    if (cache.token_stride() % 32 != 0) return cudaErrorInvalidValue;
    if (cache.dtype == KvDType::q8_0) {
      cache_write_blocked_kernel<dev::Q8KvTag><<<unsigned(num_tokens), 128, 0, stream>>>(k, v, src_stride, slots,
                                                                                        cache);
    } else {
      cache_write_blocked_kernel<dev::Fp8KvTag><<<unsigned(num_tokens), 128, 0, stream>>>(k, v, src_stride, slots,
                                                                                         cache);
    }
    return cudaGetLastError();
  }
  return with_dtype(cache.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    cache_write_kernel<T><<<unsigned(num_tokens), 128, 0, stream>>>(k, v, src_stride, slots, cache);
  });
}

cudaError_t launch_qkv_rope_cache(const QkvRopeCacheLaunch& p, cudaStream_t stream) {
  if (p.rows == 0) return cudaSuccess;
  if (p.rows < 0 || p.rope_dims % 2 != 0 || p.rope_dims > p.head_dim || p.n_heads <= 0 ||
      p.n_kv_heads <= 0 || p.cache.block_tokens <= 0 || p.cache.n_kv_heads != p.n_kv_heads ||
      p.cache.head_dim != p.head_dim) {
    return cudaErrorInvalidValue;
  }
  if (kv::kv_dtype_is_blocked(p.cache.dtype)) {
    if ((p.n_kv_heads * p.head_dim) % 32 != 0) return cudaErrorInvalidValue;
    const bool q8 = p.cache.dtype == KvDType::q8_0;
    return with_dtype(p.q_dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      if (q8) {
        qkv_rope_cache_blocked_kernel<T, dev::Q8KvTag><<<unsigned(p.rows), 256, 0, stream>>>(p);
      } else {
        qkv_rope_cache_blocked_kernel<T, dev::Fp8KvTag><<<unsigned(p.rows), 256, 0, stream>>>(p);
      }
    });
  }
  if (p.q_dtype != p.cache.dtype) return cudaErrorInvalidValue;
  return with_dtype(p.cache.dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    qkv_rope_cache_kernel<T><<<unsigned(p.rows), 256, 0, stream>>>(p);
  });
}

cudaError_t launch_widen(const void* src, KvDType src_dtype, std::int64_t n, float* dst,
                         cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return with_dtype(src_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    widen_kernel<T><<<grid_stride_blocks(n), 256, 0, stream>>>(static_cast<const T*>(src), n, dst);
  });
}

cudaError_t launch_fill_uniform(void* dst, KvDType dtype, std::int64_t n, std::uint64_t seed,
                                float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return with_dtype(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_uniform_kernel<T><<<grid_stride_blocks(n), 256, 0, stream>>>(static_cast<T*>(dst), n, seed,
                                                                       scale);
  });
}

}  // namespace pensieve::kernels::cuda
