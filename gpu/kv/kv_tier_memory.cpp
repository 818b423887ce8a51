#include "gpu/kv/kv_tier_memory.hpp"

namespace pensieve::kv {

std::size_t block_slice_bytes(const PagedKvView& view) {
  return std::size_t(view.block_bytes());
}

KvTierMemory tier_memory(const KvPool& pool) {
  KvTierMemory m;
  m.num_blocks = pool.config().num_blocks;
  m.slice_bytes = block_slice_bytes(pool.layer(0));
  for (std::int32_t l = 0; l < pool.config().n_layers; ++l) m.layers.push_back(static_cast<std::byte*>(pool.layer(l).data));
  return m;
}

}  // namespace pensieve::kv
