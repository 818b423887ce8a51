#include "gpu/kv/block_allocator.hpp"

#include <cassert>
#include <stdexcept>

namespace pensieve::kv {

BlockAllocator::BlockAllocator(std::int32_t num_blocks)
    : refs_(static_cast<std::size_t>(num_blocks), 0) {
  if (num_blocks < 0) throw std::invalid_argument("BlockAllocator: negative block count");
  for (std::int32_t i = 0; i < num_blocks; ++i)
    free_.push_back(BlockId{static_cast<std::uint32_t>(i)});
}

std::optional<BlockId> BlockAllocator::allocate() {
  if (free_.empty()) return std::nullopt;
  const BlockId id = free_.front();
  free_.pop_front();
  assert(refs_[id.value] == 0 && "a block on the free list has references");
  refs_[id.value] = 1;
  return id;
}

std::optional<std::vector<BlockId>> BlockAllocator::allocate_n(std::int32_t n) {
  if (n < 0 || n > free_blocks()) return std::nullopt;
  std::vector<BlockId> ids;
  ids.reserve(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) ids.push_back(*allocate());
  return ids;
}

void BlockAllocator::retain(BlockId id) {
  if (id.value >= refs_.size() || refs_[id.value] <= 0) {
    throw std::logic_error("BlockAllocator::retain of a block that is not allocated");
  }
  ++refs_[id.value];
}

bool BlockAllocator::release(BlockId id) {
  if (id.value >= refs_.size() || refs_[id.value] <= 0) {
    throw std::logic_error("BlockAllocator::release of a block that is not allocated");
  }
  if (--refs_[id.value] > 0) return false;
  if (free_hook_) free_hook_(id);
  free_.push_back(id);
  return true;
}

std::int32_t BlockAllocator::ref_count(BlockId id) const {
  if (id.value >= refs_.size()) throw std::out_of_range("BlockAllocator: block id out of range");
  return refs_[id.value];
}

}  // namespace pensieve::kv
