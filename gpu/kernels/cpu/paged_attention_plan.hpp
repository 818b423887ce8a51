#pragma once
// The plan step of paged attention (FlashInfer shape: plan on the host from
// the batch's sizes, then run): the batch cut into work items. Shared by the
// CPU kernel and the CUDA launches. Multi-token spans (prefill) become items
// of at most rows_per_item query rows over their whole context; decode rows
// (sequences with one new token) follow the decode strategy: one item per
// sequence, split-KV, or packed (sequence, KV range) items. KV is only ever
// cut at multiples of kv_tile_tokens, the tiles the CPU kernel's online
// softmax merges in a fixed order, so every plan gives the same bits there.
#include "gpu/kernels/cpu/paged_attention_items.hpp"
#include "gpu/kernels/decode_plan.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace pensieve::kernels {

struct AttentionBatchShape {
  std::span<const std::int32_t> q_start;         // [num_seqs + 1]
  std::span<const std::int32_t> context_tokens;  // [num_seqs]
};

struct AttentionPlanOptions {
  std::int32_t kv_tile_tokens = 128;
  std::int32_t rows_per_item = 16;
  std::int32_t workers = 1;                // threads on the CPU, SMs on CUDA
  std::optional<DecodePlanChoice> decode;  // forced; else choose_decode_plan
  DecodePlanThresholds thresholds;
};

struct AttentionPlan {
  std::int32_t kv_tile_tokens = 0;
  std::int32_t num_seqs = 0;
  std::int32_t total_rows = 0;
  DecodePlanChoice decode;
  std::vector<AttentionWorkItem> items;
  std::vector<AttentionMerge> merges;
  std::int64_t partial_tiles = 0;  // sum of merges' num_tiles
};

// Checks the shape (q_start from 0 and increasing, 1 <= q_len <= context).
Result<AttentionPlan> plan_paged_attention(const AttentionBatchShape& shape,
                                           std::int32_t n_kv_heads,
                                           const AttentionPlanOptions& options = {});

}  // namespace pensieve::kernels
