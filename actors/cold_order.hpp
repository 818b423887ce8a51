#pragma once
// ColdOrder: the cached entries of a KvCacheIndex kept in the order the
// eviction queries walk them, so "the coldest chunk matching this" visits
// the few entries that can hold it rather than every cached chunk. Scans
// over every chunk, several per plan, were nearly all of the scheduler's
// plan time with 10^3 conversations cached (profile in
// bench/results/2026-12-02-pensieve-sim.md).
//
// Each entry sits in one group: idle or waiting (attached to a turn), and
// the token count of its smallest chunk (its last); in a group, ordered by
// its last-active time. A chunk's retention value is at least the cost of
// its group's smallest chunk over its entry's idle time (LRU: the
// last-active time itself), and that floor grows along a group, so a walk
// over the groups in increasing floor (ColdWalk) can stop once the floor
// passes the best chunk found: no chunk left can leave before it.
// Alongside, per entry and per kind, which chunk codes (code_of) its chunks
// have, so a query skips entries with no chunk it wants and answers at once
// when no chunk anywhere has one.
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
  bool keyed = false;  // in a group (some chunk holds or moves a copy)
  bool dirty = false;  // changed since: refreshed before the next query
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

  // Idle (`waiting` false) or waiting entries' groups, by smallest chunk's tokens.
  std::span<const Group> groups(bool waiting) const;
  std::int32_t block_tokens() const { return block_tokens_; }
  // Chunks of idle or waiting entries with code `code`.
  std::int64_t count(bool waiting, ChunkCode code) const { return counts_[waiting ? 1 : 0][code]; }
  // A chunk with code `code`, for a predicate to judge.
  const CachedChunk& sample(ChunkCode code) const { return samples_[code]; }

 private:
  std::size_t group_of(bool waiting, std::int32_t min_tokens) const {
    return (waiting ? std::size_t(block_tokens_) + 1 : 0) + std::size_t(min_tokens);
  }

  std::int32_t block_tokens_;
  std::vector<Group> groups_;
  std::array<std::array<std::int64_t, chunk_codes>, 2> counts_{};
  std::vector<CachedChunk> samples_;
};

// One kind's keyed entries in increasing retention floor at `now_ns`.
class ColdWalk {
 public:
  ColdWalk(const ColdOrder& order, const EvictionPolicy& policy, std::int64_t now_ns, bool waiting);
  // The next entry, unless every one left has a floor above `ceiling` (a
  // chunk's retention value): none of their chunks leaves before it.
  const ColdOrder::Key* next(double ceiling);
  std::size_t visited() const { return visited_; }

 private:
  struct Cursor {
    double floor = 0;
    std::size_t group = 0;
    ColdOrder::Group::const_iterator at;
    bool operator>(const Cursor& o) const { return floor != o.floor ? floor > o.floor : group > o.group; }
  };
  void push(std::size_t group, ColdOrder::Group::const_iterator at);

  std::span<const ColdOrder::Group> groups_;
  bool lru_;
  std::int64_t now_ns_;
  std::vector<double> cheapest_;  // per group: a floor on its chunks' recompute cost
  std::priority_queue<Cursor, std::vector<Cursor>, std::greater<>> heap_;
  std::size_t visited_ = 0;
};

}  // namespace pensieve::actors
