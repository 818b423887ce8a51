// KvCacheManager at a restart: the previous run's disk chunks put back
// into the index as restored paths, and a turn taking one over.
#include "actors/kv_cache_manager.hpp"

#include <algorithm>
#include <utility>

namespace pensieve::actors {

void KvCacheManager::restore_disk_paths(const RestoredKv& found) {
  stats_.disk_scan_slots = found.scan.scanned;
  stats_.disk_scan_labelled = found.scan.labelled;
  stats_.disk_scan_empty = found.scan.empty;
  stats_.disk_scan_corrupt = found.scan.corrupt;
  stats_.disk_scan_foreign = found.scan.foreign;
  stats_.disk_scan_unreadable = found.scan.unreadable;
  stats_.found_disk_discarded = found.unused.size();
  if (!tiered() || pools_.disk.slots() == 0 || found.paths.empty()) return;
  std::vector<DiskSlot> used;
  for (DiskSlot s : found.used) {
    if (std::int32_t(s.value) < pools_.disk.slots()) used.push_back(s);
  }
  pools_.disk.claim(used);
  std::vector<std::uint8_t> taken(std::size_t(pools_.disk.slots()), 0);  // the first path's reference is claim's
  std::uint64_t next = restored_path_ids;
  for (const RestoredPath& path : found.paths) {
    CachedEntry e;
    e.tokens = path.tokens;
    e.unnamed = path.ns;
    e.restored = true;
    e.last_active_ns = 0;  // as cold as can be until a turn uses it
    // A missing front (an orphan placed by a history): chunks on no tier,
    // recomputed when a turn uses the path.
    for (std::size_t i = 0; i < path.missing_front; ++i) {
      CachedChunk c;
      c.id = index_.next_chunk_id();
      e.chunks.push_back(std::move(c));
    }
    for (std::size_t i = 0; i < path.slots.size(); ++i) {
      const DiskSlot s = path.slots[i];
      if (std::int32_t(s.value) >= pools_.disk.slots()) break;  // beyond this budget: the rest is recomputed
      if (std::exchange(taken[s.value], std::uint8_t{1})) {
        pools_.disk.retain(s);  // another path's too
      } else {
        ++stats_.found_disk_chunks;
      }
      CachedChunk c;
      c.id = index_.next_chunk_id();
      c.disk = s;
      c.disk_tokens = path.chunk_tokens[i];
      e.chunks.push_back(std::move(c));
    }
    if (e.chunks.size() == path.missing_front) continue;
    e.tokens.resize(std::min(e.tokens.size(), e.chunks.size() * std::size_t(sizes_.block_tokens)));
    index_.insert(ConversationId{next++}, std::move(e));
    ++stats_.found_disk_paths;
    if (path.missing_front > 0) ++stats_.found_disk_front_missing;
  }
  for (DiskSlot s : used) {
    if (!taken[s.value]) pools_.disk.release(s);  // claimed, but only past a slot this budget lacks
  }
}

bool KvCacheManager::adopt_restored(ConversationId path, ConversationId conversation) {
  const CachedEntry* found = std::as_const(index_).find(path);
  if (!found || !found->restored || found->attached || std::as_const(index_).find(conversation)) return false;
  const CachedEntry& e = *found;
  if (std::any_of(e.chunks.begin(), e.chunks.end(), [](const CachedChunk& c) { return c.moving != ChunkMove::none; })) {
    return false;  // a move's report names the path's id
  }
  CachedEntry moved = e;  // a copy: erase() unlinks the path's chain keys through the entry's own
  index_.erase(path);
  moved.shared = std::exchange(moved.unnamed, std::nullopt);
  moved.restored = false;
  index_.insert(conversation, std::move(moved));
  return true;
}

}  // namespace pensieve::actors
