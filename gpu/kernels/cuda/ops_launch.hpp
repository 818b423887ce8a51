#pragma once
// Raw launchers of the decoder's element-wise and row-wise CUDA kernels
// (defined in ops_kernels.cu). Plain types only, so nvcc never sees host-side
// headers; gpu/backend/cuda wraps them with Result and the forward pass.
// Every pointer is device memory. Activations are F32 rows with a stride (in
// elements) unless a dtype says otherwise; "dtype" outputs are F32, F16 or
// BF16, rounded to nearest even. Each op is the CUDA twin of the CPU op named
// beside it (gpu/kernels/cpu/*) and matches it within F32 rounding.
#include "gpu/kv/paged_kv_view.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pensieve::kernels::cuda {

using kv::KvDType;

// embedding_lookup: out row t = table row tokens[t] widened to F32.
cudaError_t launch_embedding(const void* table, KvDType table_dtype, std::int32_t dim,
                             const std::int32_t* tokens, std::int32_t n_tokens, float* out,
                             cudaStream_t stream);

// rms_norm: y row r = weight * (x_r / sqrt(mean(x_r^2) + eps)), where x_r is
// x row row_index[r] (row r when row_index is null: a gather of the rows that
// want logits). y in y_dtype.
struct RmsNormLaunch {
  const float* x = nullptr;
  std::int64_t x_stride = 0;
  const std::int32_t* row_index = nullptr;
  std::int32_t rows = 0;
  std::int32_t dim = 0;
  const float* weight = nullptr;
  float eps = 1e-5f;
  void* y = nullptr;
  KvDType y_dtype = KvDType::f32;
  std::int64_t y_stride = 0;
};
cudaError_t launch_rms_norm(const RmsNormLaunch& p, cudaStream_t stream);

// rope, in place on the first n_heads heads of each row (several tensors'
// heads side by side in one row work too: Q then K of a fused QKV row).
// Interleaved rotates (x[2i], x[2i+1]); half-split (x[i], x[i + rope_dims/2]).
struct RopeLaunch {
  float* x = nullptr;
  std::int64_t row_stride = 0;
  std::int32_t rows = 0;
  std::int32_t n_heads = 0;
  std::int32_t head_dim = 0;
  std::int32_t rope_dims = 0;  // even, <= head_dim
  bool interleaved = true;
  const float* inv_freq = nullptr;        // rope_dims / 2
  const std::int32_t* positions = nullptr;  // [rows]
};
cudaError_t launch_rope(const RopeLaunch& p, cudaStream_t stream);

// silu_mul: out[r][i] = silu(gate[r][i]) * up[r][i] (SwiGLU), out in out_dtype.
cudaError_t launch_silu_mul(const float* gate, const float* up, std::int64_t in_stride,
                            std::int32_t rows, std::int32_t cols, void* out, KvDType out_dtype,
                            std::int64_t out_stride, cudaStream_t stream);

// add_inplace: x += delta (residual connection).
cudaError_t launch_add_rows(float* x, std::int64_t x_stride, const float* delta,
                            std::int64_t delta_stride, std::int32_t rows, std::int32_t cols,
                            cudaStream_t stream);

// add_bias: every row += bias (cols floats).
cudaError_t launch_add_bias(float* x, std::int64_t x_stride, std::int32_t rows, std::int32_t cols,
                            const float* bias, cudaStream_t stream);

// dst = src rounded to dst_dtype (the attention kernel's F16/BF16 queries).
cudaError_t launch_convert_rows(const float* src, std::int64_t src_stride, std::int32_t rows,
                                std::int32_t cols, void* dst, KvDType dst_dtype,
                                std::int64_t dst_stride, cudaStream_t stream);

// reshape_and_cache from F32 rows (the CPU op's input): token t's K is
// k + t * src_stride (n_kv_heads * head_dim floats), V likewise; written to
// slot slots[t] of the cache in its dtype; negative slots are skipped. The
// bytes equal the CPU op's.
cudaError_t launch_cache_write_f32(const float* k, const float* v, std::int64_t src_stride,
                                   const std::int64_t* slots, std::int32_t num_tokens,
                                   const kv::PagedKvView& cache, cudaStream_t stream);

// The three steps between the QKV product and attention, fused (one launch
// instead of three; each element's arithmetic is the separate ops'): RoPE on
// the Q and K heads of each fused row [Q | K | V] (F32), Q rounded to the
// cache dtype into q_out, K and V written to their slot of the cache
// (negative slots skip the K/V write, not the Q one).
struct QkvRopeCacheLaunch {
  const float* qkv = nullptr;
  std::int64_t row_stride = 0;
  std::int32_t rows = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  std::int32_t rope_dims = 0;
  bool interleaved = true;
  const float* inv_freq = nullptr;
  const std::int32_t* positions = nullptr;
  const std::int64_t* slots = nullptr;
  void* q_out = nullptr;  // [rows][q_stride], q_dtype
  std::int64_t q_stride = 0;
  // The cache's dtype for an element-type cache; f32, f16 or bf16 with a
  // q8_0 or fp8 cache (K and V then quantised from F32, as the CPU op does).
  KvDType q_dtype = KvDType::f32;
  kv::PagedKvView cache;
};
cudaError_t launch_qkv_rope_cache(const QkvRopeCacheLaunch& p, cudaStream_t stream);

// Widens n elements of src (src_dtype) to F32; for copying results back.
cudaError_t launch_widen(const void* src, KvDType src_dtype, std::int64_t n, float* dst,
                         cudaStream_t stream);

// Fills n elements with uniform values in [-scale, scale) from a counter hash
// (deterministic per seed and index): random weights without a host copy.
cudaError_t launch_fill_uniform(void* dst, KvDType dtype, std::int64_t n, std::uint64_t seed,
                                float scale, cudaStream_t stream);

}  // namespace pensieve::kernels::cuda
