#pragma once
// Raw launchers of the CUDA attention kernels (defined in
// paged_attention_kernels.cu). Plain types only, so that nvcc never sees the
// host-side headers; paged_attention_cuda.hpp wraps them with plans,
// workspaces and Result. Every pointer is device memory except the params
// struct itself, which travels by value.
#include "gpu/kernels/cpu/paged_attention_items.hpp"
#include "gpu/kernels/cpu/paged_attention_params.hpp"
#include "gpu/kernels/cpu/reshape_and_cache.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace pensieve::kernels::cuda {

inline constexpr std::int32_t kMaxHeadDim = 256;

// Phase 1: one thread block per (work item, KV head). Items with merge < 0
// write `out`; the others write their partial softmax state (m, l, acc) to
// partial[(item * n_heads + head) * (head_dim + 2)].
cudaError_t launch_paged_attention_items(const PagedAttentionParams& params,
                                         const AttentionWorkItem* items, std::int32_t num_items,
                                         float* partial, cudaStream_t stream);

// Phase 2: one thread block per (merge, query head): combines the partial
// states of a split decode row in KV order and writes `out`.
cudaError_t launch_paged_attention_merge(const PagedAttentionParams& params,
                                         const AttentionMerge* merges, std::int32_t num_merges,
                                         const float* partial, cudaStream_t stream);

// reshape_and_cache with K/V in the cache's dtype.
cudaError_t launch_reshape_and_cache(const ReshapeAndCacheParams& params, cudaStream_t stream);

}  // namespace pensieve::kernels::cuda
