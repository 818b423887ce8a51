#include "gpu/kv/kv_tier_memory.hpp"

namespace pensieve::kv {

KvTierMemory tier_memory(std::span<const PagedKvView> layers) {
  KvTierMemory m;
  if (layers.empty()) return m;
  m.num_blocks = layers.front().num_blocks;
  m.slice_bytes = layers.front().block_bytes();
  for (const PagedKvView& v : layers) m.layers.push_back(static_cast<std::byte*>(v.data));
  return m;
}

KvTierMemory tier_memory(const KvPool& pool) {
  std::vector<PagedKvView> views;
  for (std::int32_t l = 0; l < pool.config().n_layers; ++l) views.push_back(pool.layer(l));
  return tier_memory(views);
}

}  // namespace pensieve::kv
