#include "actors/cold_order.hpp"

#include "actors/kv_cache_index.hpp"

#include <algorithm>

namespace pensieve::actors {

ColdOrder::ColdOrder(std::int32_t block_tokens)
    : block_tokens_(block_tokens), groups_(2 * (std::size_t(block_tokens) + 1)) {
  samples_.reserve(chunk_codes);
  for (std::size_t code = 0; code < chunk_codes; ++code) samples_.push_back(chunk_with_code(ChunkCode(code)));
}

void ColdOrder::add(CachedEntry& e) {
  ColdSummary& s = e.cold;
  std::array<std::uint32_t, chunk_codes> n{};
  for (const CachedChunk& c : e.chunks) ++n[code_of(c)];
  s.waiting = e.attached.has_value();
  s.codes = {};
  s.counts.clear();
  for (std::size_t code = 0; code < chunk_codes; ++code) {
    if (n[code] == 0) continue;
    s.codes.set(ChunkCode(code));
    s.counts.emplace_back(ChunkCode(code), n[code]);
    counts_[s.waiting ? 1 : 0][code] += n[code];
  }
  s.last_active_ns = e.last_active_ns;
  // Chunks are full up to the last, which may hold fewer tokens or, past
  // the tokens, none.
  const std::int64_t bt = block_tokens_;
  const auto last_begin = std::int64_t(e.chunks.empty() ? 0 : e.chunks.size() - 1) * bt;
  s.min_tokens = std::int32_t(std::clamp<std::int64_t>(std::int64_t(e.tokens.size()) - last_begin, 0, bt));
  // Code 0 (no copy, no move) is a dropped chunk: nothing to evict. An
  // entry of dropped chunks only needs no walk (a query that wants code 0
  // scans every entry instead).
  CodeMask held = s.codes;
  held.bits[0] &= ~std::uint64_t(1);
  s.keyed = held.any();
  if (s.keyed) groups_[group_of(s.waiting, s.min_tokens)].insert(Key{s.last_active_ns, s.conversation, &e});
}

void ColdOrder::remove(CachedEntry& e) {
  ColdSummary& s = e.cold;
  for (const auto& [code, n] : s.counts) counts_[s.waiting ? 1 : 0][code] -= n;
  s.counts.clear();
  s.codes = {};
  if (s.keyed) groups_[group_of(s.waiting, s.min_tokens)].erase(Key{s.last_active_ns, s.conversation});
  s.keyed = false;
}

std::span<const ColdOrder::Group> ColdOrder::groups(bool waiting) const {
  const std::size_t per_kind = std::size_t(block_tokens_) + 1;
  return std::span<const Group>(groups_).subspan(waiting ? per_kind : 0, per_kind);
}

ColdWalk::ColdWalk(const ColdOrder& order, const EvictionPolicy& policy, std::int64_t now_ns, bool waiting)
    : groups_(order.groups(waiting)), lru_(policy.kind() == EvictionPolicyKind::lru), now_ns_(now_ns) {
  cheapest_.resize(groups_.size());
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    cheapest_[g] = policy.cost_floor(std::int64_t(g));
    if (!groups_[g].empty()) push(g, groups_[g].begin());
  }
}

void ColdWalk::push(std::size_t group, ColdOrder::Group::const_iterator at) {
  // The same idle time as EvictionPolicy::retention_value, so the floor is
  // never above the value of any chunk of the entry.
  const std::int64_t last = at->last_active_ns;
  const double floor =
      lru_ ? double(last) : cheapest_[group] / double(std::max<std::int64_t>(1, now_ns_ - last));
  heap_.push(Cursor{floor, group, at});
}

const ColdOrder::Key* ColdWalk::next(double ceiling) {
  if (heap_.empty() || heap_.top().floor > ceiling) return nullptr;
  Cursor c = heap_.top();
  heap_.pop();
  const ColdOrder::Key* key = &*c.at;
  if (++c.at != groups_[c.group].end()) push(c.group, c.at);
  ++visited_;
  return key;
}

}  // namespace pensieve::actors
