#pragma once
// BlockAllocator: the free list and reference counts of one tier's blocks.
// Owns no memory (the KvPool does); pure logic, used on its owner's thread.
// Allocation takes the front of the free list and a block whose last reference
// goes returns to its back, so allocation order is exact and testable.
// Running out of blocks is a normal outcome (nullopt): the scheduler preempts.
#include "gpu/kv/block_id.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

namespace pensieve::kv {

class BlockAllocator {
 public:
  // Called with each block whose last reference went, before it is reusable:
  // the pool poisons freed blocks through it in debug builds.
  using FreeHook = std::function<void(BlockId)>;

  explicit BlockAllocator(std::int32_t num_blocks);

  std::optional<BlockId> allocate();
  // All or nothing: either n blocks or none (and the free list is unchanged).
  std::optional<std::vector<BlockId>> allocate_n(std::int32_t n);

  // One more sharer of an allocated block.
  void retain(BlockId id);
  // One sharer fewer; returns true when that was the last reference and the
  // block went back to the free list.
  bool release(BlockId id);

  std::int32_t ref_count(BlockId id) const;
  bool is_shared(BlockId id) const { return ref_count(id) > 1; }

  std::int32_t num_blocks() const { return static_cast<std::int32_t>(refs_.size()); }
  std::int32_t free_blocks() const { return static_cast<std::int32_t>(free_.size()); }
  std::int32_t used_blocks() const { return num_blocks() - free_blocks(); }
  // The free list in the order allocate() would hand it out.
  std::vector<BlockId> free_list() const { return {free_.begin(), free_.end()}; }

  void set_free_hook(FreeHook hook) { free_hook_ = std::move(hook); }

 private:
  std::deque<BlockId> free_;
  std::vector<std::int32_t> refs_;
  FreeHook free_hook_;
};

}  // namespace pensieve::kv
