#include "actors/kv_cache_index.hpp"

#include <algorithm>

namespace pensieve::actors {

CachedEntry* KvCacheIndex::find(ConversationId conversation) {
  auto it = entries_.find(conversation);
  return it == entries_.end() ? nullptr : &it->second;
}

const CachedEntry* KvCacheIndex::find(ConversationId conversation) const {
  auto it = entries_.find(conversation);
  return it == entries_.end() ? nullptr : &it->second;
}

CachedChunk* KvCacheIndex::find(const ChunkKey& key) {
  CachedEntry* e = find(key.conversation);
  if (!e || key.index >= e->chunks.size()) return nullptr;
  CachedChunk& c = e->chunks[key.index];
  return c.id == key.id ? &c : nullptr;
}

std::span<const std::int32_t> KvCacheIndex::chunk_tokens(const CachedEntry& e, std::size_t index) const {
  const std::size_t bt = std::size_t(block_tokens_);
  const std::size_t begin = std::min(e.tokens.size(), index * bt);
  const std::size_t end = std::min(e.tokens.size(), begin + bt);
  return std::span(e.tokens).subspan(begin, end - begin);
}

std::optional<PrefixMatch> KvCacheIndex::longest_unnamed_prefix(std::string_view ns,
                                                                std::span<const std::int32_t> want) const {
  std::optional<PrefixMatch> best;
  const CachedEntry* best_entry = nullptr;
  for (const auto& [path, e] : entries_) {
    if (!e.unnamed || *e.unnamed != ns || e.attached) continue;
    const auto [mismatch, _] = std::mismatch(e.tokens.begin(), e.tokens.end(), want.begin(), want.end());
    const auto common = std::int64_t(mismatch - e.tokens.begin());
    if (common < block_tokens_) continue;
    const bool better = !best || common > best->tokens ||
                        (common == best->tokens && e.last_active_ns > best_entry->last_active_ns);
    if (better) {
      best = PrefixMatch{path, common};
      best_entry = &e;
    }
  }
  return best;
}

std::size_t KvCacheIndex::unnamed_paths() const {
  return std::size_t(std::count_if(entries_.begin(), entries_.end(),
                                   [](const auto& kv) { return kv.second.unnamed.has_value(); }));
}

ChunkCandidate KvCacheIndex::candidate(ConversationId conversation, const CachedEntry& e, std::size_t index) const {
  const std::int64_t bt = block_tokens_;
  const std::int64_t begin = std::int64_t(index) * bt;
  const std::int64_t end = std::min<std::int64_t>(std::int64_t(e.tokens.size()), begin + bt);
  return {conversation, std::int32_t(index), begin, end, e.last_active_ns, e.attached.has_value()};
}

}  // namespace pensieve::actors
