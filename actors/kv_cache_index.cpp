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

ChunkCandidate KvCacheIndex::candidate(ConversationId conversation, const CachedEntry& e, std::size_t index) const {
  const std::int64_t bt = block_tokens_;
  const std::int64_t begin = std::int64_t(index) * bt;
  const std::int64_t end = std::min<std::int64_t>(std::int64_t(e.tokens.size()), begin + bt);
  return {conversation, std::int32_t(index), begin, end, e.last_active_ns, e.attached.has_value()};
}

}  // namespace pensieve::actors
