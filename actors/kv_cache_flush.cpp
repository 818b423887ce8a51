// KvCacheManager at a clean exit: the idle paths' chunks that live only on
// the device or the host get a disk copy, so that the next run's start-up
// scan finds them (disk_chunk_paths.hpp) and a returning conversation reads
// its KV instead of recomputing it.
#include "actors/kv_cache_manager.hpp"

#include <algorithm>

namespace pensieve::actors {

KvFlushStep KvCacheManager::flush_to_disk(std::int64_t now_ns, KvTransfers& out) {
  KvFlushStep step;
  if (!tiered() || pools_.disk.slots() == 0) return step;
  // Most recently active first: under the time bound, the conversations
  // most likely to return are the ones that make it.
  std::vector<std::pair<std::int64_t, ConversationId>> order;
  for (const auto& [conversation, e] : index_.entries()) {
    if (!e.attached && e.ns()) order.emplace_back(e.last_active_ns, conversation);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const auto clean_host = [](const CachedChunk& c) {
    return c.host_valid() && c.disk_valid() && c.moving == ChunkMove::none;
  };
  bool disk_full = false;
  for (const auto& [active_ns, conversation] : order) {
    CachedEntry& e = *index_.find(conversation);  // start_spill / start_swap_out touch it
    for (std::size_t i = 0; i < e.chunks.size(); ++i) {
      CachedChunk& c = e.chunks[i];
      if (c.disk_valid()) continue;
      // A path is placed at a restart only from its first chunk on: past a
      // chunk that cannot be written, the rest would be found and discarded.
      if (disk_full || c.dropped() || c.spill_failed) {
        step.left += std::int64_t(e.chunks.size() - i);
        break;
      }
      if (c.moving != ChunkMove::none) {
        ++step.waiting;
        continue;
      }
      const ChunkPick pick{&e, conversation, i, index_.candidate(conversation, e, i)};
      if (c.host_valid()) {
        auto slot = take_disk_slot(now_ns, &pick.candidate);
        if (!slot) {
          disk_full = true;
          step.left += std::int64_t(e.chunks.size() - i);
          break;
        }
        start_spill(pick, *slot, out);
        ++step.started;
        continue;
      }
      // On the device only: through a host slot, a free one or one whose
      // chunk is on disk already; else it waits for a spill to clean one.
      auto host = pools_.host.allocate();
      if (!host) {
        if (auto p = coldest(now_ns, clean_host)) {
          drop_host_copy(p->chunk(), pools_);
          index_.touch(*p->entry);
          ++stats_.host_reclaimed;
          host = pools_.host.allocate();
        }
      }
      if (!host) {
        ++step.waiting;
        continue;
      }
      start_swap_out(pick, *host, false, out);
      ++step.started;
    }
  }
  return step;
}

}  // namespace pensieve::actors
