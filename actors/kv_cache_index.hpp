#pragma once
// KvCacheIndex: which token histories have cached KV, and their chunks: a
// conversation's history and one CachedChunk per KV block of it, ordered by
// conversation. Answers "the coldest chunk matching this" for every
// eviction choice (EvictionPolicy decides between two), and finds the chunk
// a reported move was for. Knows nothing of slots' references (the
// KvCacheManager's pools and ledger do), but reads the device allocator's
// reference counts: a block several paths share is worth that many to keep.
//
// The prefix lookup is a hash chain over full blocks, per cache namespace
// (vLLM's scheme): a path's i-th full block is keyed by the hash of its
// namespace and every token of blocks [0, i]; each key lists the paths
// holding that prefix. A lookup walks the prompt's full blocks through the
// keys (one hash-map probe each) and verifies only the paths of the deepest
// key it reached, so its cost grows with the prompt's length and the paths
// sharing its longest prefix, never with the number of paths cached.
//
// The coldest-chunk queries walk ColdOrder (entries by kind, chunk code,
// smallest chunk and last-active time), which the
// index keeps in step: an entry changed through find(), insert(),
// truncate_tokens() or touch() is summarized again before the next query.
// Whoever edits a chunk or an entry after a query (through a ChunkPick or
// a pointer it kept) calls touch() once done.
//
// Pure; used on the scheduler actor's thread (KvCacheManager owns it).
#include "actors/cached_chunk.hpp"
#include "actors/cold_order.hpp"
#include "actors/eviction_policy.hpp"
#include "actors/ids.hpp"
#include "gpu/kv/block_allocator.hpp"

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace pensieve::actors {

struct CachedEntry {
  std::vector<std::int32_t> tokens;
  std::vector<CachedChunk> chunks;  // chunk i covers tokens [i * block_tokens, (i + 1) * block_tokens)
  std::int64_t last_active_ns = 0;
  std::optional<TurnId> attached;   // a waiting turn has it (see KvCacheManager::attach)
  // Set: a stateless turn's path, in this cache namespace (tenant and
  // cache_salt), that no conversation names; a later stateless turn of the
  // namespace whose prompt starts with it continues it.
  std::optional<std::string> unnamed;
  // Set: a conversation's path whose full blocks other turns of this
  // namespace may share (a system prompt); it is never taken over.
  std::optional<std::string> shared;
  // An unnamed path put back from the disk tier at start-up (a previous
  // run's chunks): the first turn whose prompt shares a block with it takes
  // it over, a conversation's turn included.
  bool restored = false;
  // Its full blocks' keys in the prefix chain (see KvCacheIndex), one per
  // full block of `tokens`; empty when it has no namespace.
  std::vector<std::uint64_t> chain;
  // The index's summary of it for the coldest-chunk queries (ColdOrder).
  ColdSummary cold;

  const std::optional<std::string>& ns() const { return unnamed ? unnamed : shared; }
};

// Which paths a prefix lookup may return.
struct PathFilter {
  bool unnamed_only = true;                 // false: conversations' shared paths too
  std::optional<ConversationId> except;     // never this one (the asking conversation)
};

// A cached path a prompt continues, and how many of its tokens match.
struct PrefixMatch {
  ConversationId path;
  std::int64_t tokens = 0;
  bool unnamed = true;  // false: a conversation's path (shared, never taken over)
  bool restored = false;  // a path put back from disk (CachedEntry::restored)
};

// A chunk the index picked, with what the eviction policy weighed.
struct ChunkPick {
  CachedEntry* entry = nullptr;
  ConversationId conversation;
  std::size_t index = 0;
  ChunkCandidate candidate;
  CachedChunk& chunk() const { return entry->chunks[index]; }
  ChunkKey key() const { return {conversation, index, chunk().id}; }
};

class KvCacheIndex {
 public:
  using Entries = std::map<ConversationId, CachedEntry>;

  // `device`: the allocator whose reference counts say how many paths and
  // turns share a device chunk (null: every chunk counts once).
  explicit KvCacheIndex(std::int32_t block_tokens, const kv::BlockAllocator* device = nullptr)
      : block_tokens_(block_tokens), device_(device), cold_(block_tokens) {}

  std::int32_t block_tokens() const { return block_tokens_; }
  // Entries change through insert(), erase() and truncate_tokens() only,
  // which keep the prefix chain in step; chunks are edited through find().
  const Entries& entries() const { return entries_; }
  CachedEntry& insert(ConversationId conversation, CachedEntry e);
  void erase(ConversationId conversation);
  // Keeps the entry's first `keep` tokens (its chunks are the caller's).
  void truncate_tokens(ConversationId conversation, CachedEntry& e, std::size_t keep);
  std::size_t size() const { return entries_.size(); }
  // The non-const finds count the entry as changed (see touch()).
  CachedEntry* find(ConversationId conversation);
  const CachedEntry* find(ConversationId conversation) const;
  // The chunk a move was for, or null when it has left since.
  CachedChunk* find(const ChunkKey& key);
  // `e`, or a chunk of it, changed: summarized again before the next query.
  void touch(CachedEntry& e);
  // A fresh chunk id, never handed out before.
  std::uint64_t next_chunk_id() { return next_chunk_id_++; }

  // The idle unnamed path of namespace `ns` that shares the longest token
  // prefix with `want`, at least one full block long (a shorter match saves
  // less than the lookup and the copy of a partial block cost); the most
  // recently active one among equals. Nullopt: none.
  std::optional<PrefixMatch> longest_unnamed_prefix(std::string_view ns, std::span<const std::int32_t> want) const {
    return longest_prefix(ns, want, PathFilter{});
  }
  // The same over the paths `filter` admits.
  std::optional<PrefixMatch> longest_prefix(std::string_view ns, std::span<const std::int32_t> want,
                                            const PathFilter& filter) const;
  std::size_t unnamed_paths() const { return unnamed_paths_; }
  // How many paths and turns hold the chunk's device block (1 off the device).
  std::int32_t sharers(const CachedChunk& c) const;

  // Pins: a prefix of a namespace whose chunks, in every path holding it,
  // never leave their tier until `until_ns` (keyed by the prefix's chain
  // keys, so a path cached again later with the same prefix is pinned too).
  // Only its first `max_blocks` full blocks (a request's prompt, not its reply).
  void pin(const CachedEntry& e, std::int64_t until_ns, std::size_t max_blocks = SIZE_MAX);
  void expire_pins(std::int64_t now_ns);  // pins whose time has come go
  // Drops the pins of namespace `ns` (every namespace's when absent) before
  // their time; their chunks stay cached, evictable again. Returns the
  // pinned blocks it freed.
  std::size_t unpin(std::optional<std::string_view> ns);
  // How many of `tokens`' full blocks in `ns` no pin holds yet: what
  // pinning them adds to pins(), whether they are cached or not.
  std::size_t unpinned_blocks(std::string_view ns, std::span<const std::int32_t> tokens) const;
  bool pinned(const CachedEntry& e, std::size_t index) const {
    return index < e.chain.size() && pins_.contains(e.chain[index]);
  }
  std::size_t pins() const { return pins_.size(); }

  ChunkCandidate candidate(ConversationId conversation, const CachedEntry& e, std::size_t index) const;
  std::span<const std::int32_t> chunk_tokens(const CachedEntry& e, std::size_t index) const;

  // The coldest unpinned chunk matching `pred` among idle entries (with
  // `waiting`: entries attached to a waiting turn) matching `entry_pred`.
  // `pred` reads only the fields code_of() covers. The picked entry counts
  // as changed.
  template <class EntryPred, class Pred>
  std::optional<ChunkPick> coldest_where(const EvictionPolicy& policy, std::int64_t now_ns, bool waiting,
                                         EntryPred entry_pred, Pred pred);
  // The same by visiting every chunk: the reference the walk is tested
  // against, and the way when `pred` admits a dropped chunk (code 0).
  template <class EntryPred, class Pred>
  std::optional<ChunkPick> coldest_scan(const EvictionPolicy& policy, std::int64_t now_ns, bool waiting,
                                        EntryPred entry_pred, Pred pred);
  // Among idle entries, or (with `waiting`) among those attached to a
  // waiting turn, except `spare`'s.
  template <class Pred>
  std::optional<ChunkPick> coldest(const EvictionPolicy& policy, std::int64_t now_ns, Pred pred,
                                   bool waiting = false, std::optional<ConversationId> spare = std::nullopt) {
    return coldest_where(
        policy, now_ns, waiting, [&](ConversationId c, const CachedEntry&) { return c != spare; }, pred);
  }
  // How many chunks of idle (with `waiting`: waiting) entries match `pred`
  // (which reads only what code_of() covers).
  template <class Pred>
  std::int64_t count_where(bool waiting, Pred pred);
  // Entries the last coldest_where() walked (for tests of its reach).
  std::size_t last_walk_visits() const { return last_walk_visits_; }

 private:
  // The chain keys of `tokens`' first `blocks` full blocks in `ns`.
  std::vector<std::uint64_t> chain_of(std::string_view ns, std::span<const std::int32_t> tokens,
                                      std::size_t blocks) const;
  void unlink(ConversationId conversation, CachedEntry& e, std::size_t keep_blocks);
  // Summarizes the entries changed since the last query again.
  void refresh();
  // The codes of `waiting`'s chunks that `pred` admits.
  template <class Pred>
  CodeMask codes_where(bool waiting, Pred pred) const;

  std::int32_t block_tokens_;
  const kv::BlockAllocator* device_;
  Entries entries_;
  // Chain key -> the paths (conversation ids) holding that prefix.
  std::unordered_map<std::uint64_t, std::unordered_set<std::uint64_t>> chain_;
  struct PinHold {
    std::int64_t until_ns = 0;
    std::uint64_t ns_hash = 0;  // std::hash of the namespace, for unpin()
  };
  std::unordered_map<std::uint64_t, PinHold> pins_;  // chain key -> its pin
  std::size_t unnamed_paths_ = 0;
  std::uint64_t next_chunk_id_ = 1;
  ColdOrder cold_;
  std::vector<ConversationId> changed_;  // entries touched since the last refresh
  std::size_t last_walk_visits_ = 0;
  std::uint64_t walks_ = 0;  // ColdWalk's stamps
};

template <class Pred>
CodeMask KvCacheIndex::codes_where(bool waiting, Pred pred) const {
  CodeMask want;
  for (std::size_t code = 0; code < chunk_codes; ++code) {
    if (cold_.count(waiting, ChunkCode(code)) > 0 && pred(cold_.sample(ChunkCode(code)))) want.set(ChunkCode(code));
  }
  return want;
}

template <class Pred>
std::int64_t KvCacheIndex::count_where(bool waiting, Pred pred) {
  refresh();
  std::int64_t n = 0;
  for (std::size_t code = 0; code < chunk_codes; ++code) {
    const std::int64_t k = cold_.count(waiting, ChunkCode(code));
    if (k > 0 && pred(cold_.sample(ChunkCode(code)))) n += k;
  }
  return n;
}

template <class EntryPred, class Pred>
std::optional<ChunkPick> KvCacheIndex::coldest_where(const EvictionPolicy& policy, std::int64_t now_ns, bool waiting,
                                                     EntryPred entry_pred, Pred pred) {
  refresh();
  last_walk_visits_ = 0;
  const CodeMask want = codes_where(waiting, pred);
  if (!want.any()) return std::nullopt;
  if (want.test(0)) return coldest_scan(policy, now_ns, waiting, entry_pred, pred);
  ColdWalk walk(cold_, policy, now_ns, waiting, want, ++walks_);
  std::optional<ChunkPick> best;
  double best_value = std::numeric_limits<double>::infinity();
  const bool lru = policy.kind() == EvictionPolicyKind::lru;
  const std::size_t bt = std::size_t(block_tokens_);
  while (CachedEntry* found = walk.next(best_value)) {
    CachedEntry& e = *found;
    const ConversationId conversation = e.cold.conversation;
    if (!entry_pred(conversation, e)) continue;
    // Chunks [0, full) hold block_tokens each; their floors grow with the
    // index (EvictionPolicy::value_floor), so past the first one above the
    // best value only the short chunks after them may still leave first.
    const std::size_t full = std::min(e.chunks.size(), e.tokens.size() / bt);
    for (std::size_t i = 0; i < e.chunks.size(); ++i) {
      if (!want.test(code_of(e.chunks[i])) || pinned(e, i)) continue;
      const auto begin = std::int64_t(i * bt);
      const auto end = std::min<std::int64_t>(std::int64_t(e.tokens.size()), begin + block_tokens_);
      if (policy.value_floor(begin, end, e.last_active_ns, now_ns) > best_value) {
        if (i < full) i = full - 1;
        continue;
      }
      ChunkCandidate c = candidate(conversation, e, i);
      // A higher value never leaves first; an equal one may (ties).
      const double v = policy.retention_value(c, now_ns);
      if (v <= best_value && (!best || policy.leaves_before(c, best->candidate, now_ns))) {
        best = ChunkPick{&e, conversation, i, c};
        best_value = v;
      }
      if (lru) break;  // LRU: the entry's later chunks leave after this one
    }
  }
  last_walk_visits_ = walk.visited();
  if (best) touch(*best->entry);
  return best;
}

template <class EntryPred, class Pred>
std::optional<ChunkPick> KvCacheIndex::coldest_scan(const EvictionPolicy& policy, std::int64_t now_ns, bool waiting,
                                                    EntryPred entry_pred, Pred pred) {
  std::optional<ChunkPick> best;
  for (auto& [conversation, e] : entries_) {
    if (e.attached.has_value() != waiting || !entry_pred(conversation, e)) continue;
    for (std::size_t i = 0; i < e.chunks.size(); ++i) {
      if (!pred(e.chunks[i]) || pinned(e, i)) continue;
      ChunkCandidate c = candidate(conversation, e, i);
      if (!best || policy.leaves_before(c, best->candidate, now_ns)) best = ChunkPick{&e, conversation, i, c};
    }
  }
  if (best) touch(*best->entry);
  return best;
}

}  // namespace pensieve::actors
