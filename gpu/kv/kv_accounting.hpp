#pragma once
// Memory accounting of one tier: blocks free and used, tokens held, and the
// fragmentation that paging leaves (the unused tail of each sequence's last
// block, at most block_tokens - 1 slots per sequence). Pure function of the
// allocator and the live block tables.
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_table.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace pensieve::kv {

struct KvMemoryReport {
  std::int32_t free_blocks = 0;
  std::int32_t used_blocks = 0;
  std::int64_t referenced_tokens = 0;  // sum over tables (shared prefixes counted per sharer)
  std::int64_t unused_slots = 0;       // allocated but empty slots at the tails of the tables
  std::size_t bytes_per_token = 0;
  std::size_t used_bytes() const { return std::size_t(used_blocks) * block_bytes; }
  std::size_t block_bytes = 0;
  // Unused slots over the slots of used blocks (0 when nothing is used).
  double fragmentation() const;
};

KvMemoryReport kv_memory_report(const BlockAllocator& allocator,
                                std::span<const BlockTable* const> tables,
                                std::int32_t block_tokens, std::size_t bytes_per_token);

}  // namespace pensieve::kv
