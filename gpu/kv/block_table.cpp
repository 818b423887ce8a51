#include "gpu/kv/block_table.hpp"

#include <stdexcept>
#include <utility>

namespace pensieve::kv {

BlockTable::BlockTable(std::int32_t block_tokens) : block_tokens_(block_tokens) {
  if (block_tokens <= 0) throw std::invalid_argument("BlockTable: block_tokens must be positive");
}

std::int64_t BlockTable::slot(std::int64_t pos) const {
  if (pos < 0 || pos >= capacity_tokens())
    throw std::out_of_range("BlockTable::slot: position past the table");
  const auto block = blocks_[static_cast<std::size_t>(pos / block_tokens_)];
  return std::int64_t(block.value) * block_tokens_ + pos % block_tokens_;
}

std::int32_t BlockTable::blocks_needed(std::int64_t n, const BlockAllocator& allocator) const {
  const std::int64_t total_blocks = (num_tokens_ + n + block_tokens_ - 1) / block_tokens_;
  std::int64_t needed = total_blocks - std::int64_t(blocks_.size());
  const bool partly_filled_last = num_tokens_ % block_tokens_ != 0;
  if (n > 0 && partly_filled_last && allocator.is_shared(blocks_.back())) ++needed;
  return static_cast<std::int32_t>(needed);
}

std::optional<AppendResult> BlockTable::append(std::int64_t n, BlockAllocator& allocator) {
  if (n < 0) throw std::invalid_argument("BlockTable::append: negative token count");
  const std::int32_t needed = blocks_needed(n, allocator);
  if (needed > allocator.free_blocks()) return std::nullopt;
  AppendResult result;
  result.new_blocks = needed;
  if (n > 0 && num_tokens_ % block_tokens_ != 0 && allocator.is_shared(blocks_.back())) {
    const BlockId src = blocks_.back();
    const BlockId dst = *allocator.allocate();
    allocator.release(src);  // still referenced by the other sharers
    blocks_.back() = dst;
    result.copy = CopyOnWrite{src, dst, static_cast<std::int32_t>(num_tokens_ % block_tokens_)};
  }
  num_tokens_ += n;
  while (capacity_tokens() < num_tokens_) blocks_.push_back(*allocator.allocate());
  return result;
}

BlockTable BlockTable::adopt(std::int32_t block_tokens, std::vector<BlockId> blocks, std::int64_t num_tokens) {
  BlockTable table(block_tokens);
  const auto need = static_cast<std::size_t>((num_tokens + block_tokens - 1) / block_tokens);
  if (num_tokens < 0 || blocks.size() != need)
    throw std::invalid_argument("BlockTable::adopt: the blocks do not match the token count");
  table.blocks_ = std::move(blocks);
  table.num_tokens_ = num_tokens;
  return table;
}

BlockTable BlockTable::fork(BlockAllocator& allocator) const {
  BlockTable copy(block_tokens_);
  copy.num_tokens_ = num_tokens_;
  copy.blocks_ = blocks_;
  for (BlockId id : blocks_) allocator.retain(id);
  return copy;
}

std::vector<BlockId> BlockTable::truncate(std::int64_t n, BlockAllocator& allocator) {
  if (n < 0 || n > num_tokens_)
    throw std::invalid_argument("BlockTable::truncate: bad token count");
  std::vector<BlockId> freed;
  const auto keep_blocks = static_cast<std::size_t>((n + block_tokens_ - 1) / block_tokens_);
  while (blocks_.size() > keep_blocks) {
    if (allocator.release(blocks_.back())) freed.push_back(blocks_.back());
    blocks_.pop_back();
  }
  num_tokens_ = n;
  return freed;
}

}  // namespace pensieve::kv
