#include "gpu/kernels/decode_plan.hpp"

#include <algorithm>
#include <cmath>

namespace pensieve::kernels {

const char* decode_strategy_name(DecodeStrategy s) {
  switch (s) {
    case DecodeStrategy::per_sequence:
      return "per_sequence";
    case DecodeStrategy::split_kv:
      return "split_kv";
    case DecodeStrategy::packed:
      return "packed";
  }
  return "?";
}

std::string DecodePlanChoice::describe() const {
  std::string s = decode_strategy_name(strategy);
  if (strategy == DecodeStrategy::split_kv) s += " splits=" + std::to_string(num_splits);
  if (strategy == DecodeStrategy::packed) s += " tiles_per_item=" + std::to_string(tiles_per_item);
  return s;
}

DecodePlanChoice choose_decode_plan(const DecodeBatchShape& shape, const DecodePlanThresholds& t) {
  DecodePlanChoice choice;
  const auto n = static_cast<std::int64_t>(shape.context_tokens.size());
  if (n == 0) return choice;
  const std::int64_t tile = std::max<std::int32_t>(1, shape.kv_tile_tokens);
  std::int64_t total_tokens = 0, max_tokens = 0, total_tiles = 0, max_tiles = 0;
  for (std::int32_t c : shape.context_tokens) {
    total_tokens += c;
    max_tokens = std::max<std::int64_t>(max_tokens, c);
    const std::int64_t tiles = (c + tile - 1) / tile;
    total_tiles += tiles;
    max_tiles = std::max(max_tiles, tiles);
  }
  const double workers = std::max<std::int32_t>(1, shape.workers);
  const double items = double(n) * std::max<std::int32_t>(1, shape.n_kv_heads);
  const double target_items = workers * t.target_items_per_worker;
  const double mean_tokens = double(total_tokens) / double(n);

  if (items >= workers * t.min_items_per_worker) {
    const bool imbalanced =
        mean_tokens > 0 && double(max_tokens) / mean_tokens > t.packed_imbalance_ratio;
    if (!imbalanced || max_tiles <= 1) return choice;
    choice.strategy = DecodeStrategy::packed;
    const double tiles_per_item = std::ceil(double(total_tiles) * items / double(n) / target_items);
    choice.tiles_per_item = static_cast<std::int32_t>(std::max(1.0, tiles_per_item));
    return choice;
  }
  if (max_tokens < t.split_min_context_tokens || max_tiles <= 1) return choice;
  choice.strategy = DecodeStrategy::split_kv;
  const double splits = std::ceil(target_items / items);
  choice.num_splits = static_cast<std::int32_t>(std::clamp<double>(splits, 2.0, double(max_tiles)));
  return choice;
}

}  // namespace pensieve::kernels
