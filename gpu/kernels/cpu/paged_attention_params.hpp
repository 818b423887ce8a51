#pragma once
// The parameters of multi-token paged attention, shared by the CPU kernel and
// its CUDA twin (plain data, no owning members; pointers are host memory for
// the CPU kernel and device memory for the CUDA one).
//
// A batch is ragged: sequence s contributes the query rows
// [q_start[s], q_start[s+1]) (1..n new tokens; their K/V are already in the
// cache) and has context_tokens[s] tokens in total, the new ones last. New
// token i of s sits at position context_tokens[s] - q_len(s) + i and attends
// causally to positions [0, that position] (the last sliding_window of them
// when a window is set). GQA: query head h reads KV head
// h / (n_heads / n_kv_heads).
#include "gpu/kv/paged_kv_view.hpp"

#include <cstdint>

namespace pensieve::kernels {

struct PagedAttentionParams {
  const void* q = nullptr;                       // [total_q_rows][n_heads][head_dim], dtype q_dtype
  void* out = nullptr;                           // same shape and dtype as q; every element written
  kv::KvDType q_dtype = kv::KvDType::f32;        // the CPU kernel takes F32 only
  kv::PagedKvView kv;                            // one layer of the pool
  const std::int32_t* q_start = nullptr;         // [num_seqs + 1], q_start[0] == 0
  const std::int32_t* context_tokens = nullptr;  // [num_seqs]
  const std::int32_t* block_table = nullptr;  // [num_seqs][max_blocks_per_seq] physical block ids
  std::int32_t max_blocks_per_seq = 0;
  std::int32_t num_seqs = 0;
  std::int32_t n_heads = 0;  // query heads, a multiple of kv.n_kv_heads
  float softmax_scale = 1.0f;
  // Sliding window: the query at position p sees keys (p - window, p]; 0:
  // all of [0, p]. Soft-capping: scores become cap * tanh(score / cap)
  // before the softmax; 0: none. (CPU kernel only: the CUDA backend refuses
  // models that need either, gpu/backend/paged_forward.cpp.)
  std::int32_t sliding_window = 0;
  float logit_softcap = 0.0f;
};

}  // namespace pensieve::kernels
