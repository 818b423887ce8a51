#pragma once
// Causal grouped-query attention over a contiguous KV cache, for a ragged
// batch of sequences in one call (the paged kernels replace the KV view later).
//
// Batch invariance: a query's output is computed by one thread, over KV tiles
// whose boundaries are fixed absolute positions (multiples of kv_tile_tokens),
// merged by an online softmax in ascending tile order. Neither the batch, nor
// how a prompt was chunked, nor the thread count changes its bits.
#include "gpu/kernels/cpu/thread_pool.hpp"

#include <cstdint>
#include <span>

namespace pensieve::kernels::cpu {

struct AttentionParams {
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;  // query head h reads KV head h / (n_heads / n_kv_heads)
  std::int32_t head_dim = 0;
  float scale = 0.0f;           // usually 1 / sqrt(head_dim)
  std::int32_t kv_tile_tokens = 32;
};

// One sequence's part of the batch. Query i sits at position start_pos + i
// and attends to KV positions [0, start_pos + i]; the KV of the new tokens
// must already be written.
struct AttentionSequence {
  const float* q = nullptr;  // {n_queries, n_heads * head_dim}, row stride q_stride
  std::int64_t q_stride = 0;
  std::int32_t n_queries = 0;
  std::int32_t start_pos = 0;
  const float* k = nullptr;  // {positions, n_kv_heads, head_dim}, contiguous
  const float* v = nullptr;  // same layout as k
  float* out = nullptr;      // {n_queries, n_heads * head_dim}, row stride out_stride
  std::int64_t out_stride = 0;
};

void attention(const AttentionParams& params, std::span<const AttentionSequence> batch,
               ThreadPool& pool);

}  // namespace pensieve::kernels::cpu
