// KvTierCache: the entries and their chunks, the slots' reference counts,
// the moves in flight and their reports, and returning turns (attach,
// restores, materialize). Which chunk leaves a tier when room is needed, and
// the ahead-of-time moves, are in kv_tier_room.cpp.
#include "actors/kv_tier_cache.hpp"

#include <algorithm>
#include <cassert>

namespace pensieve::actors {

namespace {

kv::BlockId as_block(HostSlot s) { return kv::BlockId{s.value}; }
kv::BlockId as_block(DiskSlot s) { return kv::BlockId{s.value}; }

}  // namespace

KvTierCache::KvTierCache(KvCacheSizes sizes, KvCacheOptions options)
    : sizes_(sizes),
      options_(options),
      policy_(options.eviction_policy, options.cost_model),
      device_(std::max(0, sizes.num_blocks)),
      host_(std::max(0, sizes.host_slots)),
      // The disk is reached through host slots: without a host tier it is unused.
      disk_(sizes.host_slots > 0 ? std::max(0, sizes.disk_slots) : 0) {}

void KvTierCache::set_cost_model(const CostModel& cost) {
  options_.cost_model = cost;
  policy_ = EvictionPolicy(options_.eviction_policy, cost);
}

// --- entries -----------------------------------------------------------------

void KvTierCache::put(ConversationId conversation, std::span<const std::int32_t> tokens, kv::BlockTable table,
                      std::int64_t now_ns, std::vector<kv::BlockId>& freed) {
  forget(conversation, freed);
  Entry e;
  e.tokens.assign(tokens.begin(), tokens.end());
  e.last_active_ns = now_ns;
  for (kv::BlockId b : table.blocks()) {
    device_.retain(b);  // the chunk's reference; the table's goes below
    Chunk c;
    c.id = next_chunk_id_++;
    c.device = b;
    e.chunks.push_back(std::move(c));
  }
  auto gone = table.release(device_);
  assert(gone.empty());
  (void)gone;
  entries_.emplace(conversation, std::move(e));
}

void KvTierCache::forget(ConversationId conversation, std::vector<kv::BlockId>& freed) {
  evicted_tokens_.erase(conversation);
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return;
  for (Chunk& c : it->second.chunks) drop_all(c, freed);
  entries_.erase(it);
}

std::optional<std::vector<std::int32_t>> KvTierCache::tokens(ConversationId conversation) const {
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return std::nullopt;
  return it->second.tokens;
}

std::vector<ChunkView> KvTierCache::chunks(ConversationId conversation) const {
  std::vector<ChunkView> out;
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return out;
  for (const Chunk& c : it->second.chunks) {
    ChunkView v{ChunkTier::dropped, c.device, c.host, c.disk, c.moving != Move::none};
    if (c.device) v.tier = ChunkTier::device;
    else if (c.host_valid()) v.tier = ChunkTier::host;
    else if (c.disk_valid()) v.tier = ChunkTier::disk;
    else if (c.moving == Move::restore) v.tier = ChunkTier::restoring;
    out.push_back(v);
  }
  return out;
}

std::span<const std::int32_t> KvTierCache::chunk_tokens(const Entry& e, std::size_t index) const {
  const std::size_t bt = std::size_t(sizes_.block_tokens);
  const std::size_t begin = std::min(e.tokens.size(), index * bt);
  const std::size_t end = std::min(e.tokens.size(), begin + bt);
  return std::span(e.tokens).subspan(begin, end - begin);
}

ChunkCandidate KvTierCache::candidate(ConversationId conversation, const Entry& e, std::size_t index) const {
  const std::int64_t bt = sizes_.block_tokens;
  const std::int64_t begin = std::int64_t(index) * bt;
  const std::int64_t end = std::min<std::int64_t>(std::int64_t(e.tokens.size()), begin + bt);
  return {conversation, std::int32_t(index), begin, end, e.last_active_ns, e.attached.has_value()};
}

// --- slots -------------------------------------------------------------------

void KvTierCache::release_device(kv::BlockId b, std::vector<kv::BlockId>& freed) {
  if (device_.release(b)) freed.push_back(b);
}

void KvTierCache::release_host(HostSlot slot) { host_.release(as_block(slot)); }

void KvTierCache::drop_device(Chunk& c, std::vector<kv::BlockId>& freed) {
  if (!c.device) return;
  release_device(*c.device, freed);
  c.device.reset();
}

void KvTierCache::drop_host(Chunk& c) {
  if (!c.host) return;
  host_.release(as_block(*c.host));
  c.host.reset();
  c.from_disk = false;
}

void KvTierCache::drop_disk(Chunk& c) {
  if (!c.disk) return;
  disk_.release(as_block(*c.disk));
  c.disk.reset();
  c.disk_tokens.clear();
}

// The chunk leaves; a transfer still in flight keeps its own references.
void KvTierCache::drop_all(Chunk& c, std::vector<kv::BlockId>& freed) {
  drop_device(c, freed);
  drop_host(c);
  drop_disk(c);
  c.moving = Move::none;
  c.evict_device = false;
}

void KvTierCache::note_dropped(const Entry& e) {
  if (std::all_of(e.chunks.begin(), e.chunks.end(), [](const Chunk& c) { return c.dropped(); })) {
    ++stats_.evicted_conversations;
  }
}

// --- transfers -----------------------------------------------------------------

void KvTierCache::start_swap_out(const Pick& p, HostSlot slot, bool evict, KvTransfers& out) {
  Chunk& c = p.chunk();
  assert(c.device && !c.host && c.moving == Move::none);
  c.host = slot;                  // the chunk's reference (from allocate)
  host_.retain(as_block(slot));   // the transfer's
  device_.retain(*c.device);      // the transfer's: the block is read until reported
  c.moving = Move::swap_out;
  c.evict_device = evict;
  swap_outs_[slot.value] = InFlight{p.conversation, c.id, p.index, *c.device, slot, {}};
  out.swap_out.push_back({*c.device, slot});
  ++stats_.swap_out_chunks;
}

void KvTierCache::start_spill(const Pick& p, DiskSlot slot, KvTransfers& out) {
  Chunk& c = p.chunk();
  assert(c.host_valid() && !c.disk && c.moving == Move::none);
  c.disk = slot;
  disk_.retain(as_block(slot));
  host_.retain(as_block(*c.host));
  c.moving = Move::spill;
  auto tokens = chunk_tokens(*p.entry, p.index);
  c.disk_tokens.assign(tokens.begin(), tokens.end());
  spills_[slot.value] = InFlight{p.conversation, c.id, p.index, {}, *c.host, slot};
  out.spill.push_back({*c.host, slot, c.disk_tokens});
  ++stats_.spill_chunks;
}

void KvTierCache::start_restore(ConversationId conversation, Entry& e, std::size_t index, HostSlot slot,
                                KvTransfers& out) {
  Chunk& c = e.chunks[index];
  assert(c.disk_valid() && !c.host && c.moving == Move::none);
  c.host = slot;
  host_.retain(as_block(slot));
  disk_.retain(as_block(*c.disk));
  c.moving = Move::restore;
  restores_[slot.value] = InFlight{conversation, c.id, index, {}, slot, *c.disk};
  out.restore.push_back({slot, *c.disk, c.disk_tokens});
  ++stats_.restore_chunks;
}

KvTierCache::Chunk* KvTierCache::find(const InFlight& f) {
  auto it = entries_.find(f.conversation);
  if (it == entries_.end() || f.index >= it->second.chunks.size()) return nullptr;
  Chunk& c = it->second.chunks[f.index];
  return c.id == f.chunk_id ? &c : nullptr;
}

void KvTierCache::transfers_done(const TransfersDone& done, std::vector<kv::BlockId>& freed) {
  for (const DeviceHostCopy& t : done.swap_out) {
    auto it = swap_outs_.find(t.host.value);
    assert(it != swap_outs_.end() && it->second.device == t.device && "a swap-out that was never asked");
    if (it == swap_outs_.end()) continue;
    const InFlight f = it->second;
    swap_outs_.erase(it);
    release_device(f.device, freed);
    host_.release(as_block(f.host));
    if (Chunk* c = find(f)) {
      c->moving = Move::none;
      if (std::exchange(c->evict_device, false)) drop_device(*c, freed);
    }
  }
  auto finish_spill = [&](const HostDiskCopy& t, bool ok) {
    auto it = spills_.find(t.disk.value);
    assert(it != spills_.end() && "a spill that was never asked");
    if (it == spills_.end()) return;
    const InFlight f = it->second;
    spills_.erase(it);
    host_.release(as_block(f.host));
    disk_.release(as_block(f.disk));
    if (Chunk* c = find(f)) {
      c->moving = Move::none;
      if (!ok) drop_disk(*c);
      c->spill_failed = !ok;  // not tried again: a broken disk must not stall evictions
    }
    if (!ok) ++stats_.spill_failures;
  };
  for (const HostDiskCopy& t : done.spill) finish_spill(t, true);
  for (const HostDiskCopy& t : done.spill_failed) finish_spill(t, false);
  auto finish_restore = [&](const HostDiskCopy& t, bool ok) {
    auto it = restores_.find(t.host.value);
    assert(it != restores_.end() && "a restore that was never asked");
    if (it == restores_.end()) return;
    const InFlight f = it->second;
    restores_.erase(it);
    host_.release(as_block(f.host));
    disk_.release(as_block(f.disk));
    Chunk* c = find(f);
    if (!c) return;
    c->moving = Move::none;
    if (ok) {
      c->from_disk = true;
    } else {
      // Never used: the chunk is recomputed from the token history.
      drop_host(*c);
      drop_disk(*c);
      ++stats_.corrupt_chunks;
    }
  };
  for (const HostDiskCopy& t : done.restored) finish_restore(t, true);
  for (const HostDiskCopy& t : done.corrupt) finish_restore(t, false);
}

// --- returning turns -----------------------------------------------------------

void KvTierCache::truncate(Entry& e, std::int64_t keep, std::vector<kv::BlockId>& freed) {
  const std::size_t bt = std::size_t(sizes_.block_tokens);
  const std::size_t keep_chunks = (std::size_t(keep) + bt - 1) / bt;
  while (e.chunks.size() > keep_chunks) {
    drop_all(e.chunks.back(), freed);
    e.chunks.pop_back();
  }
  e.tokens.resize(std::size_t(keep));
}

bool KvTierCache::attach(ConversationId conversation, TurnId turn, std::span<const std::int32_t> want,
                         std::int64_t now_ns, KvTransfers& out, std::vector<kv::BlockId>& freed) {
  if (auto ev = evicted_tokens_.find(conversation); ev != evicted_tokens_.end()) {
    // Evicted whole earlier: what it had cached (and still shares) is fed again.
    stats_.recomputed_tokens += std::clamp<std::int64_t>(std::int64_t(want.size()) - 1, 0, ev->second);
    evicted_tokens_.erase(ev);
  }
  auto it = entries_.find(conversation);
  if (it == entries_.end() || it->second.attached || want.empty()) return false;
  Entry& e = it->second;
  std::size_t common = 0;
  while (common < e.tokens.size() && common < want.size() && e.tokens[common] == want[common]) ++common;
  // At least the newest token is fed again: its logits pick the next one.
  const std::int64_t keep = std::min<std::int64_t>(std::int64_t(common), std::int64_t(want.size()) - 1);
  truncate(e, keep, freed);
  if (keep == 0 && e.chunks.empty()) {
    entries_.erase(it);
    return false;
  }
  e.attached = turn;
  continue_restores(conversation, now_ns, out);
  return true;
}

void KvTierCache::continue_restores(ConversationId conversation, std::int64_t now_ns, KvTransfers& out) {
  auto it = entries_.find(conversation);
  if (it == entries_.end() || !it->second.attached) return;
  Entry& e = it->second;
  for (std::size_t i = 0; i < e.chunks.size(); ++i) {
    Chunk& c = e.chunks[i];
    if (!c.needs_restore()) continue;
    auto slot = take_host_slot(now_ns, HostNeed::restore, nullptr, out);
    if (!slot) slot = take_from_later_turn(*e.attached, now_ns, out);
    if (slot) {
      start_restore(conversation, e, i, *slot, out);
      continue;
    }
    if (spills_.empty() && restores_.empty() && !other_ready(conversation)) {
      // No host room will come for it: recomputed instead.
      drop_disk(c);
      ++stats_.disk_dropped;
      ++stats_.restores_given_up;
    }
  }
}

// Another waiting turn can take its KV once the device has room: its
// host slots free then.
bool KvTierCache::other_ready(ConversationId conversation) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const auto& kv) {
    return kv.first != conversation && kv.second.attached && ready(kv.first);
  });
}

bool KvTierCache::attached_to(ConversationId conversation, TurnId turn) const {
  auto it = entries_.find(conversation);
  return it != entries_.end() && it->second.attached == turn;
}

void KvTierCache::detach(ConversationId conversation, TurnId turn) {
  auto it = entries_.find(conversation);
  if (it != entries_.end() && it->second.attached == turn) it->second.attached.reset();
}

bool KvTierCache::ready(ConversationId conversation) const {
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return true;
  return std::none_of(it->second.chunks.begin(), it->second.chunks.end(),
                      [](const Chunk& c) { return c.moving == Move::restore || c.needs_restore(); });
}

std::int64_t KvTierCache::cached_token_count(ConversationId conversation) const {
  auto it = entries_.find(conversation);
  return it == entries_.end() ? 0 : std::int64_t(it->second.tokens.size());
}

namespace {

// Chunks [0, kept) are materialized; the dropped ones after them are simply
// not cached any more.
template <class Chunks>
std::size_t kept_chunks(const Chunks& chunks) {
  std::size_t kept = chunks.size();
  while (kept > 0 && chunks[kept - 1].dropped()) --kept;
  return kept;
}

}  // namespace

std::int32_t KvTierCache::blocks_to_materialize(ConversationId conversation) const {
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return 0;
  const auto& chunks = it->second.chunks;
  const std::size_t kept = kept_chunks(chunks);
  return std::int32_t(std::count_if(chunks.begin(), chunks.begin() + std::ptrdiff_t(kept),
                                    [](const Chunk& c) { return !c.device; }));
}

AttachedKv KvTierCache::materialize(ConversationId conversation, std::vector<kv::BlockId>& freed) {
  AttachedKv out{kv::BlockTable(sizes_.block_tokens)};
  auto it = entries_.find(conversation);
  if (it == entries_.end()) return out;
  Entry& e = it->second;
  assert(ready(conversation) && device_.free_blocks() >= blocks_to_materialize(conversation));
  const std::int64_t bt = sizes_.block_tokens;
  const std::size_t kept = kept_chunks(e.chunks);
  out.computed = std::min<std::int64_t>(std::int64_t(e.tokens.size()), std::int64_t(kept) * bt);
  std::vector<kv::BlockId> blocks;
  for (std::size_t i = 0; i < kept; ++i) {
    Chunk& c = e.chunks[i];
    const std::int64_t begin = std::int64_t(i) * bt;
    const std::int64_t len = std::min(bt, out.computed - begin);
    if (c.device) {
      blocks.push_back(*std::exchange(c.device, std::nullopt));  // its reference moves to the table
      stats_.hit_tokens_device += len;
      out.hit_tokens += len;
    } else if (c.host_valid()) {
      const kv::BlockId b = *device_.allocate();
      blocks.push_back(b);
      out.swap_in.push_back({b, *std::exchange(c.host, std::nullopt)});  // its reference moves to the caller
      (c.from_disk ? stats_.hit_tokens_disk : stats_.hit_tokens_host) += len;
      out.hit_tokens += len;
      ++stats_.swap_in_chunks;
    } else {
      blocks.push_back(*device_.allocate());
      if (!out.holes.empty() && out.holes.back().second == begin) out.holes.back().second = begin + len;
      else out.holes.emplace_back(begin, begin + len);
    }
  }
  out.recompute_tokens = std::int64_t(e.tokens.size()) - out.hit_tokens;
  stats_.recomputed_tokens += out.recompute_tokens;
  for (Chunk& c : e.chunks) drop_all(c, freed);
  entries_.erase(it);
  out.table = kv::BlockTable::adopt(sizes_.block_tokens, std::move(blocks), out.computed);
  return out;
}

TierStats KvTierCache::stats() const {
  TierStats s = stats_;
  s.host_slots = host_.num_blocks();
  s.free_host_slots = host_.free_blocks();
  s.disk_slots = disk_.num_blocks();
  s.free_disk_slots = disk_.free_blocks();
  return s;
}

}  // namespace pensieve::actors
