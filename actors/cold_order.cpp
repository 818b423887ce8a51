#include "actors/cold_order.hpp"

#include "actors/kv_cache_index.hpp"

#include <algorithm>
#include <utility>

namespace pensieve::actors {

ColdOrder::ColdOrder(std::int32_t block_tokens)
    : block_tokens_(block_tokens), groups_(2 * chunk_codes * (std::size_t(block_tokens) + 1)) {
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
  // Code 0 (no copy, no move) is a dropped chunk: nothing to evict, so no
  // group (a query that wants code 0 scans every entry instead).
  for (const auto& [code, n] : s.counts) {
    if (code != 0) groups_[group_of(s.waiting, code, s.min_tokens)].insert(Key{s.last_active_ns, s.conversation, &e});
  }
}

void ColdOrder::remove(CachedEntry& e) {
  ColdSummary& s = e.cold;
  for (const auto& [code, n] : s.counts) {
    counts_[s.waiting ? 1 : 0][code] -= n;
    if (code != 0) groups_[group_of(s.waiting, code, s.min_tokens)].erase(Key{s.last_active_ns, s.conversation});
  }
  s.counts.clear();
  s.codes = {};
}

std::span<const ColdOrder::Group> ColdOrder::groups(bool waiting, ChunkCode code) const {
  return std::span<const Group>(groups_).subspan(group_of(waiting, code, 0), std::size_t(block_tokens_) + 1);
}

ColdWalk::ColdWalk(const ColdOrder& order, const EvictionPolicy& policy, std::int64_t now_ns, bool waiting,
                   const CodeMask& want, std::uint64_t stamp)
    : lru_(policy.kind() == EvictionPolicyKind::lru), now_ns_(now_ns), stamp_(stamp) {
  cheapest_.resize(std::size_t(order.block_tokens()) + 1);
  for (std::size_t t = 0; t < cheapest_.size(); ++t) cheapest_[t] = policy.cost_floor(std::int64_t(t));
  for (std::size_t code = 1; code < chunk_codes; ++code) {
    if (!want.test(ChunkCode(code))) continue;
    const auto groups = order.groups(waiting, ChunkCode(code));
    for (std::size_t t = 0; t < groups.size(); ++t) {
      if (!groups[t].empty()) push(Cursor{0, &groups[t], std::int32_t(t), groups[t].begin()});
    }
  }
}

void ColdWalk::push(Cursor c) {
  // The same idle time as EvictionPolicy::retention_value, so the floor is
  // never above the value of any chunk of the entry.
  const std::int64_t last = c.at->last_active_ns;
  c.floor = lru_ ? double(last) : cheapest_[std::size_t(c.min_tokens)] / double(std::max<std::int64_t>(1, now_ns_ - last));
  heap_.push(c);
}

CachedEntry* ColdWalk::next(double ceiling) {
  while (!heap_.empty() && heap_.top().floor <= ceiling) {
    Cursor c = heap_.top();
    heap_.pop();
    CachedEntry* e = c.at->entry;
    if (++c.at != c.group->end()) push(c);
    if (std::exchange(e->cold.walked, stamp_) == stamp_) continue;  // met in another code's group
    ++visited_;
    return e;
  }
  return nullptr;
}

}  // namespace pensieve::actors
