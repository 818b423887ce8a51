#include "gpu/kv/kv_accounting.hpp"

#include <vector>

namespace pensieve::kv {

double KvMemoryReport::fragmentation() const {
  if (used_blocks == 0 || bytes_per_token == 0) return 0.0;
  const double slots = double(used_blocks) * double(block_bytes / bytes_per_token);
  return double(unused_slots) / slots;
}

KvMemoryReport kv_memory_report(const BlockAllocator& allocator,
                                std::span<const BlockTable* const> tables,
                                std::int32_t block_tokens, std::size_t bytes_per_token) {
  KvMemoryReport r;
  r.free_blocks = allocator.free_blocks();
  r.used_blocks = allocator.used_blocks();
  r.bytes_per_token = bytes_per_token;
  r.block_bytes = bytes_per_token * std::size_t(block_tokens);
  // A shared partly filled tail is one block: count its empty slots once.
  std::vector<bool> tail_seen(static_cast<std::size_t>(allocator.num_blocks()), false);
  for (const BlockTable* t : tables) {
    r.referenced_tokens += t->num_tokens();
    if (t->blocks().empty() || t->unused_slots() == 0) continue;
    const BlockId tail = t->blocks().back();
    if (tail_seen[tail.value]) continue;
    tail_seen[tail.value] = true;
    r.unused_slots += t->unused_slots();
  }
  return r;
}

}  // namespace pensieve::kv
