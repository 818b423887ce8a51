#pragma once
// BlockTable: one sequence's map from logical block j (tokens
// [j*block_tokens, (j+1)*block_tokens)) to a physical block. Holds one
// reference on each of its blocks in the allocator it was filled from.
// Pure logic, used on its owner's thread. Only the last block may be partly
// filled, so a sequence wastes at most block_tokens - 1 slots.
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_id.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace pensieve::kv {

// Copy the first `tokens` token slots of block `src` into block `dst` (every
// layer, K and V): the copy-on-write of a shared, partly filled block when a
// sharer writes its first divergent token.
struct CopyOnWrite {
  BlockId src;
  BlockId dst;
  std::int32_t tokens = 0;
  friend bool operator==(const CopyOnWrite&, const CopyOnWrite&) = default;
};

struct AppendResult {
  std::optional<CopyOnWrite> copy;  // to run before the new tokens are written
  std::int32_t new_blocks = 0;      // blocks allocated, the copy's target included
};

class BlockTable {
 public:
  explicit BlockTable(std::int32_t block_tokens);

  std::int32_t block_tokens() const { return block_tokens_; }
  std::int64_t num_tokens() const { return num_tokens_; }
  std::span<const BlockId> blocks() const { return blocks_; }
  std::int64_t capacity_tokens() const { return std::int64_t(blocks_.size()) * block_tokens_; }
  // Slots allocated but not holding a token (at most block_tokens - 1).
  std::int64_t unused_slots() const { return capacity_tokens() - num_tokens_; }

  // The physical slot (block * block_tokens + offset) of token `pos`.
  std::int64_t slot(std::int64_t pos) const;

  // Blocks that append(n) would take from the allocator (copy included).
  std::int32_t blocks_needed(std::int64_t n, const BlockAllocator& allocator) const;

  // Makes room for n more tokens. If the partly filled last block is shared,
  // the first new token is the first divergent one: the block is replaced by a
  // private copy (returned, to be executed on the pool). nullopt when the
  // allocator has too few free blocks; then nothing changed.
  std::optional<AppendResult> append(std::int64_t n, BlockAllocator& allocator);

  // A table over blocks the caller already holds one reference each on
  // (those references move into the table): KV brought back from another
  // tier or kept between turns. `num_tokens` must fit the blocks, and leave
  // no block empty.
  static BlockTable adopt(std::int32_t block_tokens, std::vector<BlockId> blocks, std::int64_t num_tokens);

  // A new table sharing every block (one more reference each): a forked
  // conversation or a shared prefix.
  BlockTable fork(BlockAllocator& allocator) const;

  // Keeps the first n tokens (a history edited after them); releases the
  // blocks past them. Returns the blocks that became free.
  std::vector<BlockId> truncate(std::int64_t n, BlockAllocator& allocator);
  std::vector<BlockId> release(BlockAllocator& allocator) { return truncate(0, allocator); }

 private:
  std::int32_t block_tokens_;
  std::int64_t num_tokens_ = 0;
  std::vector<BlockId> blocks_;
};

}  // namespace pensieve::kv
