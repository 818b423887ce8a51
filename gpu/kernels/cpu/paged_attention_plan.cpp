#include "gpu/kernels/cpu/paged_attention_plan.hpp"

#include <algorithm>
#include <string>

namespace pensieve::kernels {
namespace {

std::optional<Error> check_shape(const AttentionBatchShape& shape) {
  const std::size_t n = shape.context_tokens.size();
  if (shape.q_start.size() != n + 1)
    return fail("paged attention: q_start needs num_seqs + 1 entries");
  if (shape.q_start[0] != 0) return fail("paged attention: q_start[0] must be 0");
  for (std::size_t s = 0; s < n; ++s) {
    const std::int32_t q_len = shape.q_start[s + 1] - shape.q_start[s];
    if (q_len < 1 || q_len > shape.context_tokens[s]) {
      return fail("paged attention: sequence " + std::to_string(s) + " has " +
                  std::to_string(q_len) + " new tokens for a context of " +
                  std::to_string(shape.context_tokens[s]));
    }
  }
  return std::nullopt;
}

// Cuts tiles [0, tiles) of a decode row into `parts` contiguous ranges of
// near-equal size (the first ones one tile longer).
void add_split_items(AttentionPlan& plan, std::int32_t seq, std::int32_t context,
                     std::int32_t tiles, std::int32_t parts) {
  const std::int32_t tile = plan.kv_tile_tokens;
  if (parts <= 1) {
    plan.items.push_back({seq, 0, 1, 0, context, -1});
    return;
  }
  AttentionMerge merge{seq, static_cast<std::int32_t>(plan.items.size()), parts, tiles,
                       plan.partial_tiles};
  const auto merge_index = static_cast<std::int32_t>(plan.merges.size());
  std::int32_t t = 0;
  for (std::int32_t p = 0; p < parts; ++p) {
    const std::int32_t len = tiles / parts + (p < tiles % parts ? 1 : 0);
    plan.items.push_back({seq, 0, 1, t * tile, std::min(context, (t + len) * tile), merge_index});
    t += len;
  }
  plan.merges.push_back(merge);
  plan.partial_tiles += tiles;
}

}  // namespace

Result<AttentionPlan> plan_paged_attention(const AttentionBatchShape& shape,
                                           std::int32_t n_kv_heads,
                                           const AttentionPlanOptions& options) {
  if (auto error = check_shape(shape)) return *error;
  if (options.kv_tile_tokens <= 0 || options.rows_per_item <= 0) {
    return fail("paged attention: kv_tile_tokens and rows_per_item must be positive");
  }
  AttentionPlan plan;
  plan.kv_tile_tokens = options.kv_tile_tokens;
  plan.num_seqs = static_cast<std::int32_t>(shape.context_tokens.size());
  plan.total_rows = shape.q_start.back();

  std::vector<std::int32_t> decode_contexts;
  for (std::int32_t s = 0; s < plan.num_seqs; ++s) {
    if (shape.q_start[s + 1] - shape.q_start[s] == 1)
      decode_contexts.push_back(shape.context_tokens[s]);
  }
  plan.decode = options.decode ? *options.decode
                               : choose_decode_plan({decode_contexts, n_kv_heads, options.workers,
                                                     options.kv_tile_tokens},
                                                    options.thresholds);
  const std::int32_t tile = options.kv_tile_tokens;
  for (std::int32_t s = 0; s < plan.num_seqs; ++s) {
    const std::int32_t q_len = shape.q_start[s + 1] - shape.q_start[s];
    const std::int32_t context = shape.context_tokens[s];
    if (q_len > 1) {
      for (std::int32_t r = 0; r < q_len; r += options.rows_per_item) {
        plan.items.push_back({s, r, std::min(options.rows_per_item, q_len - r), 0, context, -1});
      }
      continue;
    }
    const std::int32_t tiles = (context + tile - 1) / tile;
    switch (plan.decode.strategy) {
      case DecodeStrategy::per_sequence:
        add_split_items(plan, s, context, tiles, 1);
        break;
      case DecodeStrategy::split_kv:
        add_split_items(plan, s, context, tiles,
                        std::min(tiles, std::max(1, plan.decode.num_splits)));
        break;
      case DecodeStrategy::packed: {
        const std::int32_t per_item = std::max(1, plan.decode.tiles_per_item);
        add_split_items(plan, s, context, tiles, (tiles + per_item - 1) / per_item);
        break;
      }
    }
  }
  return plan;
}

}  // namespace pensieve::kernels
