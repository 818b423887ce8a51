// KvCacheManager: allocation, the cached entries, the moves' chunk side and
// their reports, returning turns (attach, restores, materialize), and the
// choices of what leaves a tier when room is needed (every one asks the
// eviction policy, through the index, for the coldest candidate).
#include "actors/kv_cache_manager.hpp"

#include "actors/prefix_chain.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace pensieve::actors {

namespace {

std::int32_t share_of(double fraction, std::int32_t total) {
  return std::int32_t(std::ceil(std::clamp(fraction, 0.0, 1.0) * double(total)));
}

// Where chunk `index` of `e` sits in its namespace's prefix chain, for a
// later run to put it back (none: a path without a namespace).
kv::ChunkLabel label_of(const CachedEntry& e, std::size_t index) {
  if (!e.ns() || index > e.chain.size()) return {};
  kv::ChunkLabel l;
  l.ns = *e.ns();
  l.block_index = std::uint32_t(index);
  l.parent_chain = index == 0 ? chain_seed(l.ns) : e.chain[index - 1];
  l.chain = index < e.chain.size() ? e.chain[index] : 0;
  return l;
}

}  // namespace

KvCacheManager::KvCacheManager(KvCacheSizes sizes, KvCacheOptions options)
    : sizes_(sizes),
      options_(options),
      policy_(options.eviction_policy, options.cost_model),
      // The disk is reached through host slots: without a host tier it is unused.
      pools_{DevicePool(sizes.num_blocks), HostPool(sizes.host_slots),
             DiskPool(sizes.host_slots > 0 ? sizes.disk_slots : 0)},
      index_(sizes.block_tokens, &pools_.device.allocator()) {}

void KvCacheManager::set_cost_model(const CostModel& cost) {
  options_.cost_model = cost;
  policy_ = EvictionPolicy(options_.eviction_policy, cost);
}

// --- device blocks -------------------------------------------------------------

std::int32_t KvCacheManager::blocks_needed(const kv::BlockTable& table, std::int64_t n) const {
  return table.blocks_needed(n, pools_.device.allocator());
}

std::optional<kv::AppendResult> KvCacheManager::append(kv::BlockTable& table, std::int64_t n) {
  if (blocks_needed(table, n) > free_device_blocks()) return std::nullopt;
  auto appended = table.append(n, pools_.device.allocator());
  assert(appended && "append found fewer free blocks than blocks_needed promised");
  return appended;
}

void KvCacheManager::truncate(kv::BlockTable& table, std::int64_t keep, std::vector<kv::BlockId>& freed) {
  auto gone = table.truncate(keep, pools_.device.allocator());
  freed.insert(freed.end(), gone.begin(), gone.end());
}

void KvCacheManager::release_host(HostSlot slot) { pools_.host.release(slot); }

// --- entries -------------------------------------------------------------------

void KvCacheManager::put(ConversationId conversation, std::span<const std::int32_t> tokens, kv::BlockTable table,
                         std::int64_t now_ns, std::vector<kv::BlockId>& freed, std::optional<std::string> unnamed,
                         std::optional<std::string> shared) {
  forget(conversation, freed);
  // Stateless paths have no conversation that would ever forget them.
  if (unnamed) forget_unnamed_where(true, freed);
  CachedEntry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.last_active_ns = now_ns;
  e.unnamed = std::move(unnamed);
  if (!e.unnamed) e.shared = std::move(shared);
  for (kv::BlockId b : table.blocks()) {
    pools_.device.retain(b);  // the chunk's reference; the table's goes below
    CachedChunk c;
    c.id = index_.next_chunk_id();
    c.device = b;
    e.chunks.push_back(std::move(c));
  }
  auto gone = table.release(pools_.device.allocator());
  assert(gone.empty());
  (void)gone;
  index_.insert(conversation, std::move(e));
}

void KvCacheManager::forget(ConversationId conversation, std::vector<kv::BlockId>& freed) {
  evicted_tokens_.erase(conversation);
  CachedEntry* e = index_.find(conversation);
  if (!e) return;
  for (CachedChunk& c : e->chunks) drop_all_copies(c, pools_, freed);
  index_.erase(conversation);
}

std::optional<PrefixMatch> KvCacheManager::counted(std::span<const std::int32_t> want,
                                                   std::optional<PrefixMatch> match) {
  // The newest token is fed again whatever matched (see attach).
  const auto queried = std::max<std::int64_t>(0, std::int64_t(want.size()) - 1);
  stats_.prefix_queried_tokens += queried;
  if (match) stats_.prefix_matched_tokens += std::min(match->tokens, queried);
  return match;
}

std::optional<PrefixMatch> KvCacheManager::find_unnamed_prefix(std::string_view ns,
                                                               std::span<const std::int32_t> want) {
  return counted(want, index_.longest_unnamed_prefix(ns, want));
}

std::optional<PrefixMatch> KvCacheManager::find_prefix(std::string_view ns, std::span<const std::int32_t> want,
                                                       bool may_adopt, std::optional<ConversationId> except) {
  if (may_adopt) {
    // Taking a path over moves all of it, partial last block included;
    // sharing a longer one would leave this one behind, never continued.
    auto own = index_.longest_prefix(ns, want, PathFilter{true, except});
    if (own && own->tokens >= cached_token_count(own->path)) return counted(want, own);
  }
  return counted(want, index_.longest_prefix(ns, want, PathFilter{false, except}));
}

std::optional<kv::BlockTable> KvCacheManager::share_prefix(ConversationId path, std::span<const std::int32_t> want,
                                                           std::int64_t now_ns) {
  CachedEntry* e = index_.find(path);
  if (!e || want.empty()) return std::nullopt;
  // The path may have changed since it was looked up: its tokens now.
  want = want.first(want.size() - 1);
  const auto [mismatch, _] = std::mismatch(e->tokens.begin(), e->tokens.end(), want.begin(), want.end());
  const std::int64_t bt = sizes_.block_tokens;
  const auto full = std::size_t((mismatch - e->tokens.begin()) / bt);
  std::vector<kv::BlockId> blocks;
  for (std::size_t i = 0; i < full && i < e->chunks.size() && e->chunks[i].device; ++i) {
    blocks.push_back(*e->chunks[i].device);
  }
  if (blocks.empty()) return std::nullopt;
  e->last_active_ns = now_ns;  // what it shares is in use again
  return share_full_blocks(std::move(blocks));
}

kv::BlockTable KvCacheManager::share_running(const kv::BlockTable& table, std::int64_t blocks) {
  const std::span<const kv::BlockId> from = table.blocks().first(std::size_t(blocks));
  return share_full_blocks({from.begin(), from.end()});
}

kv::BlockTable KvCacheManager::share_full_blocks(std::vector<kv::BlockId> blocks) {
  for (kv::BlockId b : blocks) pools_.device.retain(b);
  const std::int64_t tokens = std::int64_t(blocks.size()) * sizes_.block_tokens;
  stats_.hit_tokens_device += tokens;
  return kv::BlockTable::adopt(sizes_.block_tokens, std::move(blocks), tokens);
}

void KvCacheManager::forget_unnamed(std::vector<kv::BlockId>& freed) { forget_unnamed_where(false, freed); }

bool KvCacheManager::pin(ConversationId conversation, std::int64_t until_ns, std::int64_t max_tokens) {
  const CachedEntry* e = index_.find(conversation);
  const auto blocks = std::size_t(std::max<std::int64_t>(0, max_tokens) / sizes_.block_tokens);
  if (!e || e->chain.empty() || blocks == 0) return false;
  index_.pin(*e, until_ns, blocks);
  return true;
}

std::int64_t KvCacheManager::pin_cap_blocks() const {
  return std::int64_t(options_.pin_cap_share * double(pools_.device.slots()));
}

void KvCacheManager::forget_unnamed_where(bool all_dropped_only, std::vector<kv::BlockId>& freed) {
  std::vector<ConversationId> going;
  for (const auto& [conversation, e] : index_.entries()) {
    const bool gone =
        std::all_of(e.chunks.begin(), e.chunks.end(), [](const CachedChunk& c) { return c.dropped(); });
    if (e.unnamed && !e.attached && (!all_dropped_only || gone)) going.push_back(conversation);
  }
  for (ConversationId conversation : going) forget(conversation, freed);
}

std::optional<std::vector<std::int32_t>> KvCacheManager::tokens(ConversationId conversation) const {
  const CachedEntry* e = index_.find(conversation);
  if (!e) return std::nullopt;
  return e->tokens;
}

std::vector<ChunkView> KvCacheManager::chunks(ConversationId conversation) const {
  std::vector<ChunkView> out;
  if (const CachedEntry* e = index_.find(conversation)) {
    for (const CachedChunk& c : e->chunks) out.push_back(view_of(c));
  }
  return out;
}

void KvCacheManager::note_dropped(const CachedEntry& e) {
  if (std::all_of(e.chunks.begin(), e.chunks.end(), [](const CachedChunk& c) { return c.dropped(); })) {
    ++stats_.evicted_conversations;
  }
}

// --- moves -----------------------------------------------------------------------

void KvCacheManager::start_swap_out(const ChunkPick& p, HostSlot slot, bool evict, KvTransfers& out) {
  CachedChunk& c = p.chunk();
  assert(c.device && !c.host && c.moving == ChunkMove::none);
  c.host = slot;  // the chunk's reference (from allocate)
  c.moving = ChunkMove::swap_out;
  c.evict_device = evict;
  moves_.swap_out(p.key(), *c.device, slot, pools_, out);
  index_.touch(*p.entry);
  ++stats_.swap_out_chunks;
}

void KvCacheManager::start_spill(const ChunkPick& p, DiskSlot slot, KvTransfers& out) {
  CachedChunk& c = p.chunk();
  assert(c.host_valid() && !c.disk && c.moving == ChunkMove::none);
  c.disk = slot;
  c.moving = ChunkMove::spill;
  auto tokens = index_.chunk_tokens(*p.entry, p.index);
  c.disk_tokens.assign(tokens.begin(), tokens.end());
  moves_.spill(p.key(), *c.host, slot, c.disk_tokens, pools_, out, label_of(*p.entry, p.index));
  index_.touch(*p.entry);
  ++stats_.spill_chunks;
}

void KvCacheManager::start_restore(ConversationId conversation, CachedEntry& e, std::size_t index, HostSlot slot,
                                   KvTransfers& out) {
  CachedChunk& c = e.chunks[index];
  assert(c.disk_valid() && !c.host && c.moving == ChunkMove::none);
  c.host = slot;
  c.moving = ChunkMove::restore;
  moves_.restore({conversation, index, c.id}, *c.disk, slot, c.disk_tokens, pools_, out);
  index_.touch(e);
  ++stats_.restore_chunks;
}

void KvCacheManager::transfers_done(const TransfersDone& done, std::vector<kv::BlockId>& freed) {
  for (const DeviceHostCopy& t : done.swap_out) {
    const auto key = moves_.swap_out_done(t, pools_, freed);
    CachedChunk* c = key ? index_.find(*key) : nullptr;
    if (!c) continue;
    c->moving = ChunkMove::none;
    if (std::exchange(c->evict_device, false)) drop_device_copy(*c, pools_, freed);
  }
  auto finish_spill = [&](const HostDiskCopy& t, bool ok) {
    const auto key = moves_.spill_done(t, pools_);
    if (!key) return;
    if (CachedChunk* c = index_.find(*key)) {
      c->moving = ChunkMove::none;
      if (!ok) drop_disk_copy(*c, pools_);
      c->spill_failed = !ok;  // not tried again: a broken disk must not stall evictions
    }
    if (!ok) ++stats_.spill_failures;
  };
  for (const HostDiskCopy& t : done.spill) finish_spill(t, true);
  for (const HostDiskCopy& t : done.spill_failed) finish_spill(t, false);
  auto finish_restore = [&](const HostDiskCopy& t, bool ok) {
    const auto key = moves_.restore_done(t, pools_);
    CachedChunk* c = key ? index_.find(*key) : nullptr;
    if (!c) return;
    c->moving = ChunkMove::none;
    if (ok) {
      c->from_disk = true;
    } else {
      // Never used: the chunk is recomputed from the token history.
      drop_host_copy(*c, pools_);
      drop_disk_copy(*c, pools_);
      ++stats_.corrupt_chunks;
    }
  };
  for (const HostDiskCopy& t : done.restored) finish_restore(t, true);
  for (const HostDiskCopy& t : done.corrupt) finish_restore(t, false);
  read_meter_.observe(std::int64_t(done.restored.size() + done.corrupt.size()), done.restore_wall_ns);
}

// --- returning turns -------------------------------------------------------------

void KvCacheManager::truncate(ConversationId conversation, CachedEntry& e, std::int64_t keep,
                              std::vector<kv::BlockId>& freed) {
  const std::size_t bt = std::size_t(sizes_.block_tokens);
  const std::size_t keep_chunks = (std::size_t(keep) + bt - 1) / bt;
  while (e.chunks.size() > keep_chunks) {
    drop_all_copies(e.chunks.back(), pools_, freed);
    e.chunks.pop_back();
  }
  index_.truncate_tokens(conversation, e, std::size_t(keep));
}

bool KvCacheManager::attach(ConversationId conversation, TurnId turn, std::span<const std::int32_t> want,
                            std::int64_t now_ns, KvTransfers& out, std::vector<kv::BlockId>& freed) {
  if (auto ev = evicted_tokens_.find(conversation); ev != evicted_tokens_.end()) {
    // Evicted whole earlier: what it had cached (and still shares) is fed again.
    stats_.recomputed_tokens += std::clamp<std::int64_t>(std::int64_t(want.size()) - 1, 0, ev->second);
    evicted_tokens_.erase(ev);
  }
  CachedEntry* found = index_.find(conversation);
  if (!found || found->attached || want.empty()) return false;
  CachedEntry& e = *found;
  std::size_t common = 0;
  while (common < e.tokens.size() && common < want.size() && e.tokens[common] == want[common]) ++common;
  // At least the newest token is fed again: its logits pick the next one.
  const std::int64_t keep = std::min<std::int64_t>(std::int64_t(common), std::int64_t(want.size()) - 1);
  truncate(conversation, e, keep, freed);
  if (keep == 0 && e.chunks.empty()) {
    index_.erase(conversation);
    return false;
  }
  e.attached = turn;
  continue_restores(conversation, now_ns, out);
  return true;
}

void KvCacheManager::continue_restores(ConversationId conversation, std::int64_t now_ns, KvTransfers& out) {
  CachedEntry* found = index_.find(conversation);
  if (!found || !found->attached) return;
  CachedEntry& e = *found;
  for (std::size_t i = 0; i < e.chunks.size(); ++i) {
    CachedChunk& c = e.chunks[i];
    if (!c.needs_restore()) continue;
    const ChunkCandidate k = index_.candidate(conversation, e, i);
    if (!read_from_disk(options_.disk_restore, read_meter_, policy_.cost(), options_.cost_in_seconds, k.begin_token,
                        k.end_token)) {
      drop_disk_copy(c, pools_);  // recomputed with the turn's prefill
      index_.touch(e);
      ++stats_.restores_recomputed;
      continue;
    }
    auto slot = take_host_slot(now_ns, HostNeed::restore, nullptr, out);
    if (!slot) slot = take_from_later_turn(*e.attached, now_ns, out);
    if (slot) {
      start_restore(conversation, e, i, *slot, out);
      continue;
    }
    if (!moves_.disk_busy() && !other_ready(conversation)) {
      // No host room will come for it: recomputed instead.
      drop_disk_copy(c, pools_);
      index_.touch(e);  // after the queries above
      ++stats_.disk_dropped;
      ++stats_.restores_given_up;
    }
  }
}

// Another waiting turn can take its KV once the device has room: its
// host slots free then.
bool KvCacheManager::other_ready(ConversationId conversation) const {
  const auto& entries = index_.entries();
  return std::any_of(entries.begin(), entries.end(), [&](const auto& kv) {
    return kv.first != conversation && kv.second.attached && ready(kv.first);
  });
}

bool KvCacheManager::attached_to(ConversationId conversation, TurnId turn) const {
  const CachedEntry* e = index_.find(conversation);
  return e && e->attached == turn;
}

void KvCacheManager::detach(ConversationId conversation, TurnId turn) {
  CachedEntry* e = index_.find(conversation);
  if (e && e->attached == turn) e->attached.reset();
}

bool KvCacheManager::ready(ConversationId conversation) const {
  const CachedEntry* e = index_.find(conversation);
  if (!e) return true;
  return std::none_of(e->chunks.begin(), e->chunks.end(), [](const CachedChunk& c) {
    return c.moving == ChunkMove::restore || c.needs_restore();
  });
}

std::int64_t KvCacheManager::cached_token_count(ConversationId conversation) const {
  const CachedEntry* e = index_.find(conversation);
  return e ? std::int64_t(e->tokens.size()) : 0;
}

namespace {

// Chunks [0, kept) are materialized; the dropped ones after them are simply
// not cached any more.
std::size_t kept_chunks(const std::vector<CachedChunk>& chunks) {
  std::size_t kept = chunks.size();
  while (kept > 0 && chunks[kept - 1].dropped()) --kept;
  return kept;
}

}  // namespace

std::int32_t KvCacheManager::blocks_to_materialize(ConversationId conversation) const {
  const CachedEntry* e = index_.find(conversation);
  if (!e) return 0;
  const std::size_t kept = kept_chunks(e->chunks);
  return std::int32_t(std::count_if(e->chunks.begin(), e->chunks.begin() + std::ptrdiff_t(kept),
                                    [](const CachedChunk& c) { return !c.device; }));
}

AttachedKv KvCacheManager::materialize(ConversationId conversation, std::vector<kv::BlockId>& freed) {
  AttachedKv out{kv::BlockTable(sizes_.block_tokens)};
  CachedEntry* found = index_.find(conversation);
  if (!found) return out;
  CachedEntry& e = *found;
  assert(ready(conversation) && free_device_blocks() >= blocks_to_materialize(conversation));
  const std::int64_t bt = sizes_.block_tokens;
  const std::size_t kept = kept_chunks(e.chunks);
  out.computed = std::min<std::int64_t>(std::int64_t(e.tokens.size()), std::int64_t(kept) * bt);
  std::vector<kv::BlockId> blocks;
  for (std::size_t i = 0; i < kept; ++i) {
    CachedChunk& c = e.chunks[i];
    const std::int64_t begin = std::int64_t(i) * bt;
    const std::int64_t len = std::min(bt, out.computed - begin);
    if (c.device) {
      blocks.push_back(*std::exchange(c.device, std::nullopt));  // its reference moves to the table
      stats_.hit_tokens_device += len;
      out.hit_tokens += len;
    } else if (c.host_valid()) {
      const kv::BlockId b = *pools_.device.allocate();
      blocks.push_back(b);
      out.swap_in.push_back({b, *std::exchange(c.host, std::nullopt)});  // its reference moves to the caller
      (c.from_disk ? stats_.hit_tokens_disk : stats_.hit_tokens_host) += len;
      out.hit_tokens += len;
      ++stats_.swap_in_chunks;
    } else {
      blocks.push_back(*pools_.device.allocate());
      if (!out.holes.empty() && out.holes.back().second == begin) out.holes.back().second = begin + len;
      else out.holes.emplace_back(begin, begin + len);
    }
  }
  out.recompute_tokens = std::int64_t(e.tokens.size()) - out.hit_tokens;
  stats_.recomputed_tokens += out.recompute_tokens;
  for (CachedChunk& c : e.chunks) drop_all_copies(c, pools_, freed);
  index_.erase(conversation);
  out.table = kv::BlockTable::adopt(sizes_.block_tokens, std::move(blocks), out.computed);
  return out;
}

// --- host and disk slots ---------------------------------------------------------

// A host slot now, or nullopt (and why, in `miss`). To make one: a clean
// host copy is given up (its disk copy stays; ahead of time only one that
// leaves before `for_chunk`, for a restore also a device chunk's spare host
// copy); else the coldest host-only chunk goes down: spilled when the disk
// has room (the slot frees once reported: nullopt now), else dropped if it
// leaves before `for_chunk`. An eviction spills even a hotter host chunk
// while the disk has free slots (nothing is lost that way), and at last
// takes from waiting turns' host copies (but `spare`'s): they are restored
// again later, which costs far less than recomputing the evicted chunk.
std::optional<HostSlot> KvCacheManager::take_host_slot(std::int64_t now_ns, HostNeed need,
                                                       const ChunkCandidate* for_chunk, KvTransfers& out,
                                                       HostMiss* miss, std::optional<ConversationId> spare) {
  auto missed = [&](HostMiss why) -> std::optional<HostSlot> {
    if (miss) *miss = why;
    return std::nullopt;
  };
  auto take = [&]() { return pools_.host.allocate(); };
  auto colder = [&](const ChunkPick& p) {
    return !for_chunk || policy_.leaves_before(p.candidate, *for_chunk, now_ns);
  };
  const auto clean_host = [](const CachedChunk& c) {
    return !c.device && c.host_valid() && c.disk_valid() && c.moving == ChunkMove::none;
  };
  const auto host_only = [](const CachedChunk& c) {
    return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == ChunkMove::none;
  };
  if (auto s = take()) return s;
  while (auto p = coldest(now_ns, clean_host)) {
    if (need == HostNeed::ahead && !colder(*p)) break;
    drop_host_copy(p->chunk(), pools_);
    index_.touch(*p->entry);
    ++stats_.host_reclaimed;
    if (auto s = take()) return s;
  }
  if (need == HostNeed::restore) {
    while (auto p = coldest(now_ns, [](const CachedChunk& c) {
             return c.device && c.host_valid() && c.moving == ChunkMove::none;
           })) {
      drop_host_copy(p->chunk(), pools_);
      index_.touch(*p->entry);
      ++stats_.host_reclaimed;
      if (auto s = take()) return s;
    }
  }
  const bool disk_room = pools_.disk.free_slots() > 0;
  auto p = coldest(now_ns, [](const CachedChunk& c) {
    return !c.device && c.host_valid() && c.moving == ChunkMove::none;
  });
  if (p && (colder(*p) || (need == HostNeed::evict && disk_room && host_only(p->chunk())))) {
    if (host_only(p->chunk())) {
      if (auto slot = take_disk_slot(now_ns, &p->candidate)) {
        start_spill(*p, *slot, out);
        return missed(HostMiss::spilling);
      }
    }
    if (colder(*p)) {
      drop_host_copy(p->chunk(), pools_);
      drop_disk_copy(p->chunk(), pools_);
      index_.touch(*p->entry);  // after take_disk_slot's query
      ++stats_.host_dropped;
      note_dropped(*p->entry);
      return take();
    }
  }
  if (need == HostNeed::evict) {
    if (auto q = coldest(now_ns, clean_host, true, spare)) {
      drop_host_copy(q->chunk(), pools_);
      index_.touch(*q->entry);
      ++stats_.host_reclaimed;
      return take();
    }
    if (auto q = coldest(now_ns, host_only, true, spare); q && disk_room) {
      if (auto slot = take_disk_slot(now_ns, nullptr)) {
        start_spill(*q, *slot, out);
        return missed(HostMiss::spilling);
      }
    }
  }
  return missed(p ? HostMiss::coldest : HostMiss::busy);
}

std::optional<DiskSlot> KvCacheManager::take_disk_slot(std::int64_t now_ns, const ChunkCandidate* leaving_after) {
  if (auto s = pools_.disk.allocate()) return s;
  auto p = coldest(now_ns, [](const CachedChunk& c) {
    return !c.device && !c.host && c.disk_valid() && c.moving == ChunkMove::none;
  });
  if (!p || (leaving_after && !policy_.leaves_before(p->candidate, *leaving_after, now_ns))) {
    return std::nullopt;
  }
  drop_disk_copy(p->chunk(), pools_);
  index_.touch(*p->entry);
  ++stats_.disk_dropped;
  note_dropped(*p->entry);
  return pools_.disk.allocate();
}

// Waiting turns' restores compete for host slots; the earlier turn (lower
// id: a total order, so two turns never hold each other's room) takes a later
// one's: a restored copy is given up (its disk copy stays, read again later),
// or a host-only one is spilled while the disk has room (nullopt: the slot
// is reclaimable once the spill is reported).
std::optional<HostSlot> KvCacheManager::take_from_later_turn(TurnId turn, std::int64_t now_ns, KvTransfers& out) {
  const auto later = [turn](ConversationId, const CachedEntry& e) { return e.attached && *e.attached > turn; };
  if (auto p = index_.coldest_where(policy_, now_ns, true, later, [](const CachedChunk& c) {
        return !c.device && c.host_valid() && c.disk_valid() && c.moving == ChunkMove::none;
      })) {
    drop_host_copy(p->chunk(), pools_);
    index_.touch(*p->entry);
    ++stats_.host_reclaimed;
    return pools_.host.allocate();
  }
  if (pools_.disk.free_slots() == 0) return std::nullopt;
  if (auto p = index_.coldest_where(policy_, now_ns, true, later, [](const CachedChunk& c) {
        return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == ChunkMove::none;
      })) {
    if (auto slot = take_disk_slot(now_ns, nullptr)) start_spill(*p, *slot, out);
  }
  return std::nullopt;
}

// --- device room -----------------------------------------------------------------

// A device chunk to evict: clean (its host copy is done), being copied out
// (not yet marked to leave) or not yet copied out; idle conversations'
// first, then waiting turns' (but `spare`'s).
std::optional<ChunkPick> KvCacheManager::device_victim(std::int64_t now_ns, Copy copy,
                                                       std::optional<ConversationId> spare) {
  auto pred = [copy](const CachedChunk& c) {
    if (!c.device || c.evict_device) return false;
    switch (copy) {
      case Copy::clean: return c.host_valid() && c.moving == ChunkMove::none;
      case Copy::copying: return c.moving == ChunkMove::swap_out;
      case Copy::none: return !c.host_valid();
    }
    return false;
  };
  if (auto p = coldest(now_ns, pred)) return p;
  return coldest(now_ns, pred, true, spare);
}

// Without tiers: a whole conversation at a time, valued over its whole
// history; a path whose leading blocks are pinned loses only what follows
// them (valued over that tail), so a pinned system prompt does not keep every
// reply behind it on the device.
DeviceRoom KvCacheManager::evict_whole_conversation(std::int64_t now_ns, std::vector<kv::BlockId>& freed) {
  std::optional<std::pair<ConversationId, ChunkCandidate>> victim;
  index_.expire_pins(now_ns);
  for (const auto& [conversation, e] : index_.entries()) {
    if (e.attached || e.chunks.empty()) continue;
    std::size_t pinned = 0;
    while (pinned < e.chunks.size() && index_.pinned(e, pinned)) ++pinned;
    if (pinned == e.chunks.size()) continue;
    const std::int64_t begin = std::int64_t(pinned) * sizes_.block_tokens;
    ChunkCandidate c{conversation, std::int32_t(pinned), begin, std::int64_t(e.tokens.size()), e.last_active_ns,
                     false};
    if (!victim || policy_.leaves_before(c, victim->second, now_ns)) victim.emplace(conversation, c);
  }
  if (!victim) return {DeviceRoom::Step::exhausted};
  CachedEntry& gone = *index_.find(victim->first);
  const auto keep_chunks = std::size_t(victim->second.index);
  stats_.device_dropped += gone.chunks.size() - keep_chunks;
  const auto cached = std::int64_t(gone.tokens.size()) - victim->second.begin_token;
  const bool named = !gone.unnamed;  // no turn returns under an unnamed path's id to recompute it
  if (keep_chunks == 0) {
    forget(victim->first, freed);
    ++stats_.evicted_conversations;
  } else {
    truncate(victim->first, gone, victim->second.begin_token, freed);
  }
  if (named) evicted_tokens_[victim->first] = cached;
  return {DeviceRoom::Step::progress, pending_device_frees()};
}

DeviceRoom KvCacheManager::make_device_room(std::int64_t now_ns, KvTransfers& out, std::vector<kv::BlockId>& freed,
                                            std::optional<ConversationId> spare) {
  if (!tiered()) return evict_whole_conversation(now_ns, freed);
  index_.expire_pins(now_ns);
  const auto progress = [&](std::int32_t spills) {
    return DeviceRoom{DeviceRoom::Step::progress, pending_device_frees() + spills};
  };
  // A device copy whose host copy is done: reusing it costs nothing.
  if (auto p = device_victim(now_ns, Copy::clean, spare)) {
    drop_device_copy(p->chunk(), pools_, freed);
    index_.touch(*p->entry);
    ++stats_.device_reclaimed;
    return progress(0);
  }
  auto p = device_victim(now_ns, Copy::none, spare);
  auto copying = device_victim(now_ns, Copy::copying, spare);
  if (copying && (!p || policy_.leaves_before(copying->candidate, p->candidate, now_ns))) p = copying;
  if (!p) return {DeviceRoom::Step::exhausted};
  CachedChunk& c = p->chunk();
  if (c.moving == ChunkMove::swap_out) {  // already being copied out ahead of time
    c.evict_device = true;
    index_.touch(*p->entry);  // after the query for `copying`
    ++stats_.device_evicted_to_host;
    return progress(0);
  }
  HostMiss miss = HostMiss::busy;
  if (auto slot = take_host_slot(now_ns, HostNeed::evict, &p->candidate, out, &miss, spare)) {
    start_swap_out(*p, *slot, true, out);
    ++stats_.device_evicted_to_host;
    return progress(0);
  }
  if (copying) {  // no host room for a new copy: one already under way frees its block
    copying->chunk().evict_device = true;
    index_.touch(*copying->entry);
    ++stats_.device_evicted_to_host;
    return progress(0);
  }
  // A spill or restore under way makes a host copy reclaimable once
  // reported (a restored one is read again later): the chunk waits for it
  // rather than being dropped while the disk has room. A spill started
  // just now makes room for one more copy-out per spill in flight.
  if (miss == HostMiss::spilling) return progress(moves_.spills());
  if (moves_.disk_busy()) return {DeviceRoom::Step::wait};
  drop_device_copy(c, pools_, freed);
  index_.touch(*p->entry);
  ++stats_.device_dropped;
  ++(miss == HostMiss::busy ? stats_.device_dropped_host_busy
                            : miss == HostMiss::coldest ? stats_.device_dropped_coldest : stats_.device_dropped_spilling);
  note_dropped(*p->entry);
  return progress(0);
}

std::int32_t KvCacheManager::pending_device_frees() {
  const auto leaving = [](const CachedChunk& c) { return c.evict_device; };
  return std::int32_t(index_.count_where(false, leaving) + index_.count_where(true, leaving));
}

std::int32_t KvCacheManager::reclaimable_device_blocks(std::optional<ConversationId> spare) const {
  // Waiting turns' chunks count too: with every waiting turn attached at
  // once (restores start while it queues), counting only idle ones made the
  // decode reserve refuse a second or third running turn on a device that
  // make_device_room could have cleared (engine-bench --tiers 16 x 12: 1.7
  // decoding sequences per iteration against 3.9 without the reserve).
  std::int32_t n = 0;
  for (const auto& [conversation, e] : index_.entries()) {
    if (conversation == spare) continue;
    for (std::size_t i = 0; i < e.chunks.size(); ++i) n += e.chunks[i].device && !index_.pinned(e, i) ? 1 : 0;
  }
  return n;
}

void KvCacheManager::ahead_of_time(std::int64_t now_ns, KvTransfers& out) {
  if (!tiered()) return;
  index_.expire_pins(now_ns);
  // Idle conversations' chunks: on the device with a host copy done or on
  // its way, and on the host with a disk copy.
  const auto clean = std::int32_t(index_.count_where(false, [](const CachedChunk& c) { return c.device && c.host; }));
  const auto clean_host =
      std::int32_t(index_.count_where(false, [](const CachedChunk& c) { return !c.device && c.host && c.disk; }));
  // Host -> disk first: a spilled chunk keeps its host copy until the slot
  // is needed, so the device -> host moves below find clean host slots.
  if (pools_.disk.slots() > 0) {
    const std::int32_t target = share_of(options_.swap_out_watermark, pools_.host.slots());
    for (std::int32_t have = pools_.host.free_slots() + clean_host; have < target; ++have) {
      auto p = coldest(now_ns, [](const CachedChunk& c) {
        return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == ChunkMove::none;
      });
      if (!p) break;
      auto slot = take_disk_slot(now_ns, &p->candidate);
      if (!slot) break;
      start_spill(*p, *slot, out);
    }
  }
  // Device -> host: keep the watermark's share of blocks free or clean.
  const std::int32_t target = share_of(options_.swap_out_watermark, pools_.device.slots());
  for (std::int32_t have = pools_.device.free_slots() + clean; have < target; ++have) {
    auto p = coldest(now_ns, [](const CachedChunk& c) {
      return c.device && !c.host && c.moving == ChunkMove::none;
    });
    if (!p) break;
    auto slot = take_host_slot(now_ns, HostNeed::ahead, &p->candidate, out);
    if (!slot) break;
    start_swap_out(*p, *slot, false, out);
  }
}

TierStats KvCacheManager::stats() const {
  TierStats s = stats_;
  s.host_slots = pools_.host.slots();
  s.free_host_slots = pools_.host.free_slots();
  s.disk_slots = pools_.disk.slots();
  s.free_disk_slots = pools_.disk.free_slots();
  s.unnamed_paths = std::int64_t(index_.unnamed_paths());
  s.disk_read_s_per_chunk = read_meter_.seconds_per_chunk().value_or(0.0);
  for (const auto& [conversation, e] : index_.entries()) {
    for (std::size_t i = 0; i < e.chunks.size(); ++i) s.pinned_chunks += index_.pinned(e, i) ? 1 : 0;
  }
  const kv::BlockAllocator& device = pools_.device.allocator();
  for (std::int32_t b = 0; b < device.num_blocks(); ++b) {
    if (device.is_shared(kv::BlockId{std::uint32_t(b)})) ++s.shared_device_blocks;
  }
  return s;
}

}  // namespace pensieve::actors
