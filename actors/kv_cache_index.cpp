#include "actors/kv_cache_index.hpp"

#include "actors/prefix_chain.hpp"

#include <algorithm>
#include <cassert>
#include <functional>
#include <utility>

namespace pensieve::actors {

CachedEntry* KvCacheIndex::find(ConversationId conversation) {
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return nullptr;
  touch(it->second);  // the caller may edit it
  return &it->second;
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

void KvCacheIndex::touch(CachedEntry& e) {
  if (std::exchange(e.cold.dirty, true)) return;
  changed_.push_back(e.cold.conversation);
}

void KvCacheIndex::refresh() {
  for (ConversationId conversation : changed_) {
    auto it = entries_.find(conversation);
    if (it == entries_.end() || !it->second.cold.dirty) continue;  // erased since
    cold_.remove(it->second);
    cold_.add(it->second);
    it->second.cold.dirty = false;
  }
  changed_.clear();
}

std::vector<std::uint64_t> KvCacheIndex::chain_of(std::string_view ns, std::span<const std::int32_t> tokens,
                                                  std::size_t blocks) const {
  std::vector<std::uint64_t> keys;
  keys.reserve(blocks);
  std::uint64_t h = chain_seed(ns);
  const std::size_t bt = std::size_t(block_tokens_);
  for (std::size_t b = 0; b < blocks; ++b) {
    h = chain_step(h, tokens.subspan(b * bt, bt));
    keys.push_back(h);
  }
  return keys;
}

CachedEntry& KvCacheIndex::insert(ConversationId conversation, CachedEntry e) {
  assert(!entries_.contains(conversation));
  e.chain.clear();
  if (const auto& ns = e.ns()) {
    e.chain = chain_of(*ns, e.tokens, e.tokens.size() / std::size_t(block_tokens_));
    for (std::uint64_t key : e.chain) chain_[key].insert(conversation.value);
  }
  if (e.unnamed) ++unnamed_paths_;
  e.cold = ColdSummary{};
  e.cold.conversation = conversation;
  if (changed_.size() > 2 * entries_.size() + 64) {
    // Without queries (no tiers) nothing refreshes: the ids of entries
    // gone since, and repeats, go, so the list stays as long as the index.
    std::erase_if(changed_, [&](ConversationId c) { return !entries_.contains(c); });
    std::sort(changed_.begin(), changed_.end());
    changed_.erase(std::unique(changed_.begin(), changed_.end()), changed_.end());
  }
  CachedEntry& in = entries_.emplace(conversation, std::move(e)).first->second;
  touch(in);
  return in;
}

void KvCacheIndex::unlink(ConversationId conversation, CachedEntry& e, std::size_t keep_blocks) {
  while (e.chain.size() > keep_blocks) {
    auto it = chain_.find(e.chain.back());
    assert(it != chain_.end());
    it->second.erase(conversation.value);
    if (it->second.empty()) chain_.erase(it);
    e.chain.pop_back();
  }
}

void KvCacheIndex::erase(ConversationId conversation) {
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return;
  cold_.remove(it->second);
  unlink(it->first, it->second, 0);
  if (it->second.unnamed) --unnamed_paths_;
  entries_.erase(it);
}

void KvCacheIndex::truncate_tokens(ConversationId conversation, CachedEntry& e, std::size_t keep) {
  touch(e);  // its chunks were cut too
  if (keep >= e.tokens.size()) return;
  unlink(conversation, e, keep / std::size_t(block_tokens_));
  e.tokens.resize(keep);
}

std::span<const std::int32_t> KvCacheIndex::chunk_tokens(const CachedEntry& e, std::size_t index) const {
  const std::size_t bt = std::size_t(block_tokens_);
  const std::size_t begin = std::min(e.tokens.size(), index * bt);
  const std::size_t end = std::min(e.tokens.size(), begin + bt);
  return std::span(e.tokens).subspan(begin, end - begin);
}

std::optional<PrefixMatch> KvCacheIndex::longest_prefix(std::string_view ns, std::span<const std::int32_t> want,
                                                        const PathFilter& filter) const {
  // The deepest chain key the prompt reaches, then back towards the front
  // until some path there qualifies; a path at a deeper key always shares
  // more full blocks than one only at a shallower key.
  std::vector<const std::unordered_set<std::uint64_t>*> reached;
  {
    std::uint64_t h = chain_seed(ns);
    const std::size_t bt = std::size_t(block_tokens_);
    for (std::size_t b = 0; (b + 1) * bt <= want.size(); ++b) {
      h = chain_step(h, want.subspan(b * bt, bt));
      auto it = chain_.find(h);
      if (it == chain_.end()) break;
      reached.push_back(&it->second);
    }
  }
  for (std::size_t level = reached.size(); level-- > 0;) {
    std::optional<PrefixMatch> best;
    const CachedEntry* best_entry = nullptr;
    for (std::uint64_t id : *reached[level]) {
      const ConversationId path{id};
      const CachedEntry* e = find(path);
      if (!e || e->attached || path == filter.except || !e->ns() || *e->ns() != ns) continue;
      if (filter.unnamed_only && !e->unnamed) continue;
      // Verified token by token: a hash collision never counts as a hit.
      const auto [mismatch, _] = std::mismatch(e->tokens.begin(), e->tokens.end(), want.begin(), want.end());
      const auto common = std::int64_t(mismatch - e->tokens.begin());
      if (common < block_tokens_) continue;
      const bool better = !best || common > best->tokens ||
                          (common == best->tokens && (e->last_active_ns > best_entry->last_active_ns ||
                                                      (e->last_active_ns == best_entry->last_active_ns &&
                                                       path < best->path)));
      if (better) {
        best = PrefixMatch{path, common, e->unnamed.has_value(), e->restored};
        best_entry = e;
      }
    }
    if (best) return best;
  }
  return std::nullopt;
}

void KvCacheIndex::pin(const CachedEntry& e, std::int64_t until_ns, std::size_t max_blocks) {
  const std::size_t n = std::min(max_blocks, e.chain.size());
  const std::uint64_t ns_hash = std::hash<std::string_view>{}(e.ns() ? std::string_view(*e.ns()) : "");
  for (std::size_t i = 0; i < n; ++i) {
    PinHold& hold = pins_[e.chain[i]];
    hold.until_ns = std::max(hold.until_ns, until_ns);
    hold.ns_hash = ns_hash;
  }
}

std::size_t KvCacheIndex::unpinned_blocks(std::string_view ns, std::span<const std::int32_t> tokens) const {
  const auto keys = chain_of(ns, tokens, tokens.size() / std::size_t(block_tokens_));
  return std::size_t(std::count_if(keys.begin(), keys.end(), [&](std::uint64_t k) { return !pins_.contains(k); }));
}

void KvCacheIndex::expire_pins(std::int64_t now_ns) {
  std::erase_if(pins_, [now_ns](const auto& kv) { return kv.second.until_ns <= now_ns; });
}

std::size_t KvCacheIndex::unpin(std::optional<std::string_view> ns) {
  if (!ns) return std::exchange(pins_, {}).size();
  const std::uint64_t ns_hash = std::hash<std::string_view>{}(*ns);
  return std::erase_if(pins_, [ns_hash](const auto& kv) { return kv.second.ns_hash == ns_hash; });
}

std::int32_t KvCacheIndex::sharers(const CachedChunk& c) const {
  if (!c.device || !device_) return 1;
  // A swap-out in flight holds a reference of its own, no path's.
  const std::int32_t moving = c.moving == ChunkMove::swap_out ? 1 : 0;
  return std::max(1, device_->ref_count(*c.device) - moving);
}

ChunkCandidate KvCacheIndex::candidate(ConversationId conversation, const CachedEntry& e, std::size_t index) const {
  const std::int64_t bt = block_tokens_;
  const std::int64_t begin = std::int64_t(index) * bt;
  const std::int64_t end = std::min<std::int64_t>(std::int64_t(e.tokens.size()), begin + bt);
  return {conversation, std::int32_t(index), begin, end, e.last_active_ns, e.attached.has_value(),
          sharers(e.chunks[index])};
}

}  // namespace pensieve::actors
