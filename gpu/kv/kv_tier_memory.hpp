#pragma once
// KvTierMemory: where one tier's KV blocks lie, as plain addresses: per
// layer, the base of [num_blocks][2][block_tokens][n_kv_heads][head_dim], so
// that block b of layer l is one contiguous slice at base + b * slice_bytes.
// The swap engine moves chunks between tiers with nothing more; the memory
// may be host memory (kv::KvPool), device memory or pinned host memory (the
// CUDA backend's pools): only a Stream of the right backend may touch it.
// Does not own the memory.
#include "gpu/kv/kv_pool.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pensieve::kv {

struct KvTierMemory {
  std::int32_t num_blocks = 0;
  std::size_t slice_bytes = 0;      // one block of one layer, K and V
  std::vector<std::byte*> layers;   // one base per layer

  std::int32_t n_layers() const { return std::int32_t(layers.size()); }
  std::size_t chunk_bytes() const { return slice_bytes * layers.size(); }
  std::byte* slice(std::int32_t layer, std::uint32_t block) const {
    return layers[std::size_t(layer)] + std::size_t(block) * slice_bytes;
  }
};

// The memory of a pool's layers, one view per layer (any tier: a host
// KvPool's, or a CUDA pool's device or pinned memory).
KvTierMemory tier_memory(std::span<const PagedKvView> layers);
KvTierMemory tier_memory(const KvPool& pool);

}  // namespace pensieve::kv
