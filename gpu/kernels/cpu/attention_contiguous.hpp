#pragma once
// Attention over contiguous per-sequence K/V (no block table): the baseline
// the paged kernel is measured against, with the same arithmetic and the same
// plan, so the two agree bit for bit on the same values.
#include "gpu/kernels/cpu/attention_work_runner.hpp"
#include "gpu/kernels/cpu/attention_workspace.hpp"
#include "gpu/kernels/cpu/paged_attention_plan.hpp"

#include <cstdint>

namespace pensieve::kernels::cpu {

struct ContiguousAttentionParams {
  const float* q = nullptr;                // [total_q_rows][n_heads][head_dim]
  float* out = nullptr;                    // same shape as q
  const float* k = nullptr;                // [kv rows][n_kv_heads][head_dim]; sequence s owns rows
  const float* v = nullptr;                //   [kv_start[s], kv_start[s] + context_tokens[s])
  const std::int64_t* kv_start = nullptr;  // [num_seqs]
  const std::int32_t* q_start = nullptr;   // [num_seqs + 1]
  const std::int32_t* context_tokens = nullptr;  // [num_seqs]
  std::int32_t num_seqs = 0;
  std::int32_t n_heads = 0;
  std::int32_t n_kv_heads = 0;
  std::int32_t head_dim = 0;
  float softmax_scale = 1.0f;
  std::int32_t sliding_window = 0;  // as PagedAttentionParams
  float logit_softcap = 0.0f;
};

void contiguous_attention(const ContiguousAttentionParams& params, const AttentionPlan& plan,
                          AttentionWorkspace& workspace, WorkRunner& runner);

}  // namespace pensieve::kernels::cpu
