#pragma once
// KvCache: one tier's pool together with its allocator: the place where the
// block tables' decisions (copy-on-write, freeing) meet the memory. Owns the
// pool and the allocator; used on the thread of its owner (the GPU worker).
// Sequences are plain BlockTables owned by the caller.
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_table.hpp"
#include "gpu/kv/kv_accounting.hpp"
#include "gpu/kv/kv_pool.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace pensieve::kv {

class KvCache {
 public:
  explicit KvCache(const KvPoolConfig& config);
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  KvPool& pool() { return pool_; }
  const KvPool& pool() const { return pool_; }
  BlockAllocator& allocator() { return allocator_; }
  const BlockAllocator& allocator() const { return allocator_; }

  BlockTable new_sequence() const { return BlockTable(pool_.config().block_tokens); }

  // Room for n more tokens of `table`, copying a shared tail block first.
  // Returns the slots of the new tokens (for reshape_and_cache), or nullopt
  // when the tier is out of blocks (nothing changed).
  std::optional<std::vector<std::int64_t>> append(BlockTable& table, std::int64_t n);
  BlockTable fork(const BlockTable& table) { return table.fork(allocator_); }
  void release(BlockTable& table) { table.release(allocator_); }

  KvMemoryReport report(std::span<const BlockTable* const> tables) const;

 private:
  KvPool pool_;
  BlockAllocator allocator_;
};

}  // namespace pensieve::kv
