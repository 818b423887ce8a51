#pragma once
// ColdOrder: the cached entries of a KvCacheIndex kept in the order the
// eviction queries walk them, so "the coldest chunk matching this" visits
// the few entries that can hold it rather than every cached chunk. Scans
// over every chunk, several per plan, were nearly all of the scheduler's
// plan time with 10^3 conversations cached (profile in
// bench/results/2026-12-02-pensieve-sim.md).
//
// An entry sits in one group per chunk code (code_of) its chunks have:
// by idle or waiting (attached to a turn), the code, and the token count of
// its smallest chunk (its last); in a group, ordered by its last-active
// time. A chunk's retention value is at least the cost of its group's
// smallest chunk over its entry's idle time (LRU: the last-active time
// itself), and that floor grows along a group, so a walk over the groups of
// the codes a query wants, in increasing floor (ColdWalk), meets only
// entries holding such a chunk and can stop once the floor passes the best
// chunk found: no chunk left can leave before it. Alongside, per kind, how
// many chunks have each code, so a query no chunk answers costs nothing.
//
// Pure; owned by KvCacheIndex, used on the scheduler actor's thread.
#include "actors/cached_chunk.hpp"
#include "actors/eviction_policy.hpp"
#include "actors/ids.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <queue>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace pensieve::actors {

struct CachedEntry;

// A set of chunk codes.
struct CodeMask {
  std::array<std::uint64_t, 2> bits{0, 0};
  void set(ChunkCode c) { bits[c >> 6] |= std::uint64_t(1) << (c & 63); }
  bool test(ChunkCode c) const { return (bits[c >> 6] >> (c & 63)) & 1; }
  bool any() const { return (bits[0] | bits[1]) != 0; }
  bool meets(const CodeMask& o) const { return ((bits[0] & o.bits[0]) | (bits[1] & o.bits[1])) != 0; }
};

// What ColdOrder holds of one entry, as of the entry's last refresh.
struct ColdSummary {
  ConversationId conversation;  // the entry's key in the index
  CodeMask codes;               // the codes its chunks have
  std::vector<std::pair<ChunkCode, std::uint32_t>> counts;  // how many chunks have each
  std::int64_t last_active_ns = 0;
  std::int32_t min_tokens = 0;  // its group
  bool waiting = false;
  bool dirty = false;  // changed since: refreshed before the next query
  std::uint64_t walked = 0;  // the last walk that visited it (ColdWalk::stamp)
};

class ColdOrder {
 public:
  struct Key {
    std::int64_t last_active_ns = 0;
    ConversationId conversation;
    CachedEntry* entry = nullptr;  // not compared: the id is unique
    bool operator<(const Key& o) const {
      return last_active_ns != o.last_active_ns ? last_active_ns < o.last_active_ns : conversation < o.conversation;
    }
  };
  using Group = std::set<Key>;

  explicit ColdOrder(std::int32_t block_tokens);

  // Summarizes `e` afresh and keys it (after remove(), or for a new entry).
  void add(CachedEntry& e);
  // Takes `e` out, as its summary last saw it.
  void remove(CachedEntry& e);

  // Idle (`waiting` false) or waiting entries holding a chunk with code
  // `code`, by their smallest chunk's tokens (index 0 to block_tokens).
  std::span<const Group> groups(bool waiting, ChunkCode code) const;
  std::int32_t block_tokens() const { return block_tokens_; }
  // Chunks of idle or waiting entries with code `code`.
  std::int64_t count(bool waiting, ChunkCode code) const { return counts_[waiting ? 1 : 0][code]; }
  // A chunk with code `code`, for a predicate to judge.
  const CachedChunk& sample(ChunkCode code) const { return samples_[code]; }

 private:
  std::size_t group_of(bool waiting, ChunkCode code, std::int32_t min_tokens) const {
    const std::size_t per_code = std::size_t(block_tokens_) + 1;
    return ((waiting ? chunk_codes : 0) + code) * per_code + std::size_t(min_tokens);
  }

  std::int32_t block_tokens_;
  std::vector<Group> groups_;
  std::array<std::array<std::int64_t, chunk_codes>, 2> counts_{};
  std::vector<CachedChunk> samples_;
};

// The entries of one kind holding a chunk of the codes a query wants, in
// increasing retention floor at `now_ns`.
class ColdWalk {
 public:
  // Over the groups of the codes in `want` (never code 0, dropped chunks:
  // those entries are in no group). `stamp`: a number no earlier walk of
  // this order used, to visit an entry in several groups once.
  ColdWalk(const ColdOrder& order, const EvictionPolicy& policy, std::int64_t now_ns, bool waiting,
           const CodeMask& want, std::uint64_t stamp);
  // The next entry not visited yet, unless every one left has a floor
  // above `ceiling` (a chunk's retention value): none of their chunks
  // leaves before it.
  CachedEntry* next(double ceiling);
  std::size_t visited() const { return visited_; }

 private:
  struct Cursor {
    double floor = 0;
    const ColdOrder::Group* group = nullptr;
    std::int32_t min_tokens = 0;
    ColdOrder::Group::const_iterator at;
    bool operator>(const Cursor& o) const { return floor > o.floor; }
  };
  void push(Cursor c);

  bool lru_;
  std::int64_t now_ns_;
  std::uint64_t stamp_;
  std::vector<double> cheapest_;  // per smallest chunk's tokens: a floor on a chunk's recompute cost
  std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> heap_;
  std::size_t visited_ = 0;
};

}  // namespace pensieve::actors
