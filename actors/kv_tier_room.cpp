// KvTierCache, making room: which chunk leaves a tier and where it goes.
// Device blocks for running turns (make_device_room), host slots for
// copy-outs and restores (take_host_slot, take_from_later_turn), disk slots
// for spills (take_disk_slot), and the ahead-of-time moves that keep the
// device and the host above their watermark. Every choice asks the eviction
// policy for the coldest candidate; the moves themselves and the slots'
// reference counts are kv_tier_cache.cpp's.
#include "actors/kv_tier_cache.hpp"

#include <algorithm>
#include <cmath>

namespace pensieve::actors {

namespace {

std::int32_t share_of(double fraction, std::int32_t total) {
  return std::int32_t(std::ceil(std::clamp(fraction, 0.0, 1.0) * double(total)));
}

}  // namespace

// --- the coldest chunk ---------------------------------------------------------

template <class Pred>
std::optional<KvTierCache::Pick> KvTierCache::coldest(std::int64_t now_ns, Pred pred, bool waiting,
                                                      std::optional<ConversationId> spare) {
  return coldest_where(
      now_ns, [&](ConversationId c, const Entry& e) { return e.attached.has_value() == waiting && c != spare; },
      pred);
}

template <class EntryPred, class Pred>
std::optional<KvTierCache::Pick> KvTierCache::coldest_where(std::int64_t now_ns, EntryPred entry_pred, Pred pred) {
  std::optional<Pick> best;
  for (auto& [conversation, e] : entries_) {
    if (!entry_pred(conversation, e)) continue;
    for (std::size_t i = 0; i < e.chunks.size(); ++i) {
      if (!pred(e.chunks[i])) continue;
      ChunkCandidate c = candidate(conversation, e, i);
      if (!best || policy_.leaves_before(c, best->candidate, now_ns)) best = Pick{&e, conversation, i, c};
    }
  }
  return best;
}

// --- host and disk slots -------------------------------------------------------

// A host slot now, or nullopt (and why, in `miss`). To make one: a clean
// host copy is given up (its disk copy stays; ahead of time only one that
// leaves before `for_chunk`, for a restore also a device chunk's spare host
// copy); else the coldest host-only chunk goes down: spilled when the disk
// has room (the slot frees once reported: nullopt now), else dropped if it
// leaves before `for_chunk`. An eviction spills even a hotter host chunk
// while the disk has free slots (nothing is lost that way), and at last
// takes from waiting turns' host copies (but `spare`'s): they are restored
// again later, which costs far less than recomputing the evicted chunk.
std::optional<HostSlot> KvTierCache::take_host_slot(std::int64_t now_ns, HostNeed need,
                                                    const ChunkCandidate* for_chunk, KvTransfers& out,
                                                    HostMiss* miss, std::optional<ConversationId> spare) {
  auto missed = [&](HostMiss why) -> std::optional<HostSlot> {
    if (miss) *miss = why;
    return std::nullopt;
  };
  auto take = [&]() -> std::optional<HostSlot> {
    if (auto b = host_.allocate()) return HostSlot{b->value};
    return std::nullopt;
  };
  auto colder = [&](const Pick& p) {
    return !for_chunk || policy_.leaves_before(p.candidate, *for_chunk, now_ns);
  };
  const auto clean_host = [](const Chunk& c) {
    return !c.device && c.host_valid() && c.disk_valid() && c.moving == Move::none;
  };
  const auto host_only = [](const Chunk& c) {
    return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == Move::none;
  };
  if (auto s = take()) return s;
  while (auto p = coldest(now_ns, clean_host)) {
    if (need == HostNeed::ahead && !colder(*p)) break;
    drop_host(p->chunk());
    ++stats_.host_reclaimed;
    if (auto s = take()) return s;
  }
  if (need == HostNeed::restore) {
    while (auto p = coldest(now_ns, [](const Chunk& c) { return c.device && c.host_valid() && c.moving == Move::none; })) {
      drop_host(p->chunk());
      ++stats_.host_reclaimed;
      if (auto s = take()) return s;
    }
  }
  const bool disk_room = disk_.free_blocks() > 0;
  auto p = coldest(now_ns, [](const Chunk& c) { return !c.device && c.host_valid() && c.moving == Move::none; });
  if (p && (colder(*p) || (need == HostNeed::evict && disk_room && host_only(p->chunk())))) {
    if (host_only(p->chunk())) {
      if (auto slot = take_disk_slot(now_ns, &p->candidate)) {
        start_spill(*p, *slot, out);
        return missed(HostMiss::spilling);
      }
    }
    if (colder(*p)) {
      drop_host(p->chunk());
      drop_disk(p->chunk());
      ++stats_.host_dropped;
      note_dropped(*p->entry);
      return take();
    }
  }
  if (need == HostNeed::evict) {
    if (auto q = coldest(now_ns, clean_host, true, spare)) {
      drop_host(q->chunk());
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

std::optional<DiskSlot> KvTierCache::take_disk_slot(std::int64_t now_ns, const ChunkCandidate* leaving_after) {
  auto take = [&]() -> std::optional<DiskSlot> {
    if (auto b = disk_.allocate()) return DiskSlot{b->value};
    return std::nullopt;
  };
  if (auto s = take()) return s;
  auto p = coldest(now_ns, [](const Chunk& c) {
    return !c.device && !c.host && c.disk_valid() && c.moving == Move::none;
  });
  if (!p || (leaving_after && !policy_.leaves_before(p->candidate, *leaving_after, now_ns))) {
    return std::nullopt;
  }
  drop_disk(p->chunk());
  ++stats_.disk_dropped;
  note_dropped(*p->entry);
  return take();
}

// Waiting turns' restores compete for host slots; the earlier turn (lower
// id: a total order, so two turns never hold each other's room) takes a later
// one's: a restored copy is given up (its disk copy stays, read again later),
// or a host-only one is spilled while the disk has room (nullopt: the slot
// is reclaimable once the spill is reported).
std::optional<HostSlot> KvTierCache::take_from_later_turn(TurnId turn, std::int64_t now_ns, KvTransfers& out) {
  const auto later = [turn](ConversationId, const Entry& e) { return e.attached && *e.attached > turn; };
  if (auto p = coldest_where(now_ns, later, [](const Chunk& c) {
        return !c.device && c.host_valid() && c.disk_valid() && c.moving == Move::none;
      })) {
    drop_host(p->chunk());
    ++stats_.host_reclaimed;
    if (auto b = host_.allocate()) return HostSlot{b->value};
    return std::nullopt;
  }
  if (disk_.free_blocks() == 0) return std::nullopt;
  if (auto p = coldest_where(now_ns, later, [](const Chunk& c) {
        return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == Move::none;
      })) {
    if (auto slot = take_disk_slot(now_ns, nullptr)) start_spill(*p, *slot, out);
  }
  return std::nullopt;
}

// --- device room ---------------------------------------------------------------

// A device chunk to evict: clean (its host copy is done), being copied out
// (not yet marked to leave) or not yet copied out; idle conversations'
// first, then waiting turns' (but `spare`'s).
std::optional<KvTierCache::Pick> KvTierCache::device_victim(std::int64_t now_ns, Copy copy,
                                                            std::optional<ConversationId> spare) {
  auto pred = [copy](const Chunk& c) {
    if (!c.device || c.evict_device) return false;
    switch (copy) {
      case Copy::clean: return c.host_valid() && c.moving == Move::none;
      case Copy::copying: return c.moving == Move::swap_out;
      case Copy::none: return !c.host_valid();
    }
    return false;
  };
  if (auto p = coldest(now_ns, pred)) return p;
  return coldest(now_ns, pred, true, spare);
}

KvTierCache::Room KvTierCache::make_device_room(std::int64_t now_ns, KvTransfers& out,
                                                std::vector<kv::BlockId>& freed,
                                                std::optional<ConversationId> spare) {
  if (!tiered()) {
    // A whole conversation at a time, valued over its whole history.
    std::optional<std::pair<ConversationId, ChunkCandidate>> victim;
    for (const auto& [conversation, e] : entries_) {
      if (e.attached || e.chunks.empty()) continue;
      ChunkCandidate c{conversation, 0, 0, std::int64_t(e.tokens.size()), e.last_active_ns, false};
      if (!victim || policy_.leaves_before(c, victim->second, now_ns)) victim.emplace(conversation, c);
    }
    if (!victim) return Room::none;
    const Entry& gone = entries_.at(victim->first);
    stats_.device_dropped += gone.chunks.size();
    const auto cached = std::int64_t(gone.tokens.size());
    forget(victim->first, freed);
    evicted_tokens_[victim->first] = cached;
    ++stats_.evicted_conversations;
    return Room::freed;
  }
  // A device copy whose host copy is done: reusing it costs nothing.
  if (auto p = device_victim(now_ns, Copy::clean, spare)) {
    drop_device(p->chunk(), freed);
    ++stats_.device_reclaimed;
    return Room::freed;
  }
  auto p = device_victim(now_ns, Copy::none, spare);
  auto copying = device_victim(now_ns, Copy::copying, spare);
  if (copying && (!p || policy_.leaves_before(copying->candidate, p->candidate, now_ns))) p = copying;
  if (!p) return Room::none;
  Chunk& c = p->chunk();
  if (c.moving == Move::swap_out) {  // already being copied out ahead of time
    c.evict_device = true;
    ++stats_.device_evicted_to_host;
    return Room::pending;
  }
  HostMiss miss = HostMiss::busy;
  if (auto slot = take_host_slot(now_ns, HostNeed::evict, &p->candidate, out, &miss, spare)) {
    start_swap_out(*p, *slot, true, out);
    ++stats_.device_evicted_to_host;
    return Room::pending;
  }
  if (copying) {  // no host room for a new copy: one already under way frees its block
    copying->chunk().evict_device = true;
    ++stats_.device_evicted_to_host;
    return Room::pending;
  }
  // A spill or restore under way makes a host copy reclaimable once
  // reported (a restored one is read again later): the chunk waits for it
  // rather than being dropped while the disk has room.
  if (miss == HostMiss::spilling) return Room::spilling;
  if (!spills_.empty() || !restores_.empty()) return Room::waiting;
  drop_device(c, freed);
  ++stats_.device_dropped;
  ++(miss == HostMiss::busy ? stats_.device_dropped_host_busy
                            : miss == HostMiss::coldest ? stats_.device_dropped_coldest : stats_.device_dropped_spilling);
  note_dropped(*p->entry);
  return Room::freed;
}

std::int32_t KvTierCache::pending_device_frees() const {
  std::int32_t n = 0;
  for (const auto& [conversation, e] : entries_) {
    for (const Chunk& c : e.chunks) n += c.evict_device ? 1 : 0;
  }
  return n;
}

std::int32_t KvTierCache::reclaimable_device_blocks(std::optional<ConversationId> spare) const {
  // Waiting turns' chunks count too: with every waiting turn attached at
  // once (restores start while it queues), counting only idle ones made the
  // decode reserve refuse a second or third running turn on a device that
  // make_device_room could have cleared (engine-bench --tiers 16 x 12: 1.7
  // decoding sequences per iteration against 3.9 without the reserve).
  std::int32_t n = 0;
  for (const auto& [conversation, e] : entries_) {
    if (conversation == spare) continue;
    for (const Chunk& c : e.chunks) n += c.device ? 1 : 0;
  }
  return n;
}

void KvTierCache::ahead_of_time(std::int64_t now_ns, KvTransfers& out) {
  if (!tiered()) return;
  std::int32_t clean = 0, clean_host = 0;
  for (const auto& [conversation, e] : entries_) {
    if (e.attached) continue;
    for (const Chunk& c : e.chunks) {
      clean += c.device && c.host ? 1 : 0;  // done or on its way
      clean_host += !c.device && c.host && c.disk ? 1 : 0;
    }
  }
  // Host -> disk first: a spilled chunk keeps its host copy until the slot
  // is needed, so the device -> host moves below find clean host slots.
  if (disk_.num_blocks() > 0) {
    const std::int32_t target = share_of(options_.swap_out_watermark, host_.num_blocks());
    for (std::int32_t have = host_.free_blocks() + clean_host; have < target; ++have) {
      auto p = coldest(now_ns, [](const Chunk& c) {
        return !c.device && c.host_valid() && !c.disk && !c.spill_failed && c.moving == Move::none;
      });
      if (!p) break;
      auto slot = take_disk_slot(now_ns, &p->candidate);
      if (!slot) break;
      start_spill(*p, *slot, out);
    }
  }
  // Device -> host: keep the watermark's share of blocks free or clean.
  const std::int32_t target = share_of(options_.swap_out_watermark, device_.num_blocks());
  for (std::int32_t have = device_.free_blocks() + clean; have < target; ++have) {
    auto p = coldest(now_ns, [](const Chunk& c) { return c.device && !c.host && c.moving == Move::none; });
    if (!p) break;
    auto slot = take_host_slot(now_ns, HostNeed::ahead, &p->candidate, out);
    if (!slot) break;
    start_swap_out(*p, *slot, false, out);
  }
}

}  // namespace pensieve::actors
