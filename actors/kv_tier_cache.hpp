#pragma once
// KvTierCache: the KV of conversations between their turns, chunk by chunk
// (one chunk = one KV block), over the device, host and disk tiers, and the
// bookkeeping of every tier's slots. Pure: it decides moves and writes them
// into KvTransfers; the swap engine executes them and reports back through
// transfers_done().
//
// A cached chunk is on the device (possibly with a clean host copy after an
// ahead-of-time swap-out), on the host (possibly with a clean disk copy), on
// disk, being restored, or dropped (recomputed from the token history when
// its conversation returns). Demotion: device -> host -> disk -> dropped,
// lowest retention value first (EvictionPolicy). Every slot is reference
// counted (kv::BlockAllocator per tier): a chunk holds one reference on each
// slot it uses and an in-flight transfer one on each end, so no slot or
// device block is reused while a copy still reads or writes it.
//
// With host_slots == 0 there are no tiers: the cache keeps whole
// conversations on the device and evicts a whole conversation at a time,
// lowest value first, as the scheduler always did.
//
// Owns the device block allocator too (the GPU worker owns the memory).
// Owned by SchedulerCore; used on the scheduler actor's thread only.
// (kv_tier_cache.cpp: entries, slots, moves and returning turns;
// kv_tier_room.cpp: which chunk leaves a tier, and ahead-of-time moves.)
#include "actors/eviction_policy.hpp"
#include "actors/ids.hpp"
#include "actors/kv_cache_options.hpp"
#include "actors/kv_transfers.hpp"
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_table.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace pensieve::actors {

enum class ChunkTier : std::uint8_t { device, host, disk, restoring, dropped };

// One cached chunk, for tests and inspection.
struct ChunkView {
  ChunkTier tier = ChunkTier::dropped;
  std::optional<kv::BlockId> device;
  std::optional<HostSlot> host;  // valid copy or a copy being written
  std::optional<DiskSlot> disk;
  bool moving = false;           // a transfer of it is in flight
};

struct TierStats {
  std::int64_t hit_tokens_device = 0;  // cached tokens reused from each tier
  std::int64_t hit_tokens_host = 0;
  std::int64_t hit_tokens_disk = 0;
  std::int64_t recomputed_tokens = 0;  // cached once, dropped, fed again
  std::uint64_t swap_in_chunks = 0;
  std::uint64_t swap_out_chunks = 0;   // ahead of time and under pressure
  std::uint64_t spill_chunks = 0;
  std::uint64_t restore_chunks = 0;
  // Evictions, by tier and reason.
  std::uint64_t device_reclaimed = 0;       // device copy reused; its clean host copy stays
  std::uint64_t device_evicted_to_host = 0; // under pressure: copied out, then reused
  std::uint64_t device_dropped = 0;         // nowhere to go
  // Why (their sum is device_dropped): every host slot pinned or in flight;
  // the chunk colder than every host chunk that could make room; a spill
  // started to free a host slot for it but not waited for.
  std::uint64_t device_dropped_host_busy = 0;
  std::uint64_t device_dropped_coldest = 0;
  std::uint64_t device_dropped_spilling = 0;
  std::uint64_t restores_given_up = 0;      // disk copy dropped: no host slot for its restore
  std::uint64_t host_reclaimed = 0;         // host copy reused; its clean disk copy stays
  std::uint64_t host_dropped = 0;
  std::uint64_t disk_dropped = 0;
  std::uint64_t corrupt_chunks = 0;         // restored but failed verification: dropped
  std::uint64_t spill_failures = 0;
  std::uint64_t evicted_conversations = 0;  // every chunk of a conversation gone
  std::int32_t host_slots = 0;
  std::int32_t free_host_slots = 0;
  std::int32_t disk_slots = 0;
  std::int32_t free_disk_slots = 0;
};

// A returning turn's share of its conversation's cached KV.
struct AttachedKv {
  kv::BlockTable table;
  std::int64_t computed = 0;  // tokens [0, computed) have blocks in `table`
  // Ranges of [0, computed) whose chunks were dropped: fed again, in order,
  // before anything past `computed`.
  std::vector<std::pair<std::int64_t, std::int64_t>> holes;
  // Host -> device copies this turn's first batch needs. The caller holds
  // the reference on each host slot: release_host() once the copy is done.
  std::vector<DeviceHostCopy> swap_in;
  std::int64_t hit_tokens = 0;        // reused as is
  std::int64_t recompute_tokens = 0;  // cached once but dropped: fed again
};

class KvTierCache {
 public:
  // freed: a device block is free now; pending: a copy-out will free one
  // when reported; spilling: a spill was started to make host room for a
  // copy-out; waiting: spills under way will make that room (ask again once
  // one is reported); none: nothing left to evict.
  enum class Room : std::uint8_t { freed, pending, spilling, waiting, none };

  KvTierCache(KvCacheSizes sizes, KvCacheOptions options);

  bool tiered() const { return sizes_.host_slots > 0; }
  std::int32_t block_tokens() const { return sizes_.block_tokens; }
  // Recalibrated recompute costs; they take effect at the next decision.
  void set_cost_model(const CostModel& cost);
  kv::BlockAllocator& device() { return device_; }
  const kv::BlockAllocator& device() const { return device_; }

  // A finished turn's KV: `tokens` are what `table` covers; its blocks become
  // device chunks (an older entry of the conversation goes).
  void put(ConversationId conversation, std::span<const std::int32_t> tokens, kv::BlockTable table,
           std::int64_t now_ns, std::vector<kv::BlockId>& freed);
  void forget(ConversationId conversation, std::vector<kv::BlockId>& freed);
  std::size_t size() const { return entries_.size(); }
  std::optional<std::vector<std::int32_t>> tokens(ConversationId conversation) const;
  std::vector<ChunkView> chunks(ConversationId conversation) const;

  // A turn of `conversation` wants its KV for history `want`: keeps the
  // longest common prefix (short of the newest token), attaches the entry to
  // `turn` and plans restores of its chunks that are only on disk. While
  // attached, its host and disk copies stay (restores in flight or done are
  // not undone), but its device chunks may still leave, last, when a
  // running turn needs the room. False: nothing cached to attach.
  bool attach(ConversationId conversation, TurnId turn, std::span<const std::int32_t> want, std::int64_t now_ns,
              KvTransfers& out, std::vector<kv::BlockId>& freed);
  bool attached_to(ConversationId conversation, TurnId turn) const;
  void detach(ConversationId conversation, TurnId turn);  // the turn ended before materialize()
  bool ready(ConversationId conversation) const;          // every chunk restored (or given up)
  // Retries restores that found no host slot earlier (each plan).
  void continue_restores(ConversationId conversation, std::int64_t now_ns, KvTransfers& out);
  std::int64_t cached_token_count(ConversationId conversation) const;
  // Device blocks materialize() takes.
  std::int32_t blocks_to_materialize(ConversationId conversation) const;
  // Hands an attached entry over to its turn (the entry leaves the cache).
  // Needs blocks_to_materialize() free device blocks.
  AttachedKv materialize(ConversationId conversation, std::vector<kv::BlockId>& freed);
  void release_host(HostSlot slot);

  // One step towards a free device block (see Room). Idle conversations'
  // chunks go first; then, so a queued turn never holds device blocks a
  // running turn needs, those of conversations whose turn is waiting (not
  // `spare`'s: the turn asking).
  Room make_device_room(std::int64_t now_ns, KvTransfers& out, std::vector<kv::BlockId>& freed,
                        std::optional<ConversationId> spare = std::nullopt);
  std::int32_t pending_device_frees() const;
  std::int32_t spills_in_flight() const { return std::int32_t(spills_.size()); }
  // Device blocks that cached chunks could give up (for the decode reserve):
  // idle conversations' and waiting turns' alike, as make_device_room takes
  // both, but not `spare`'s (the turn asking).
  std::int32_t reclaimable_device_blocks(std::optional<ConversationId> spare = std::nullopt) const;
  // Ahead-of-time moves: device -> host below the watermark, host -> disk
  // below the same share of free host slots.
  void ahead_of_time(std::int64_t now_ns, KvTransfers& out);
  void transfers_done(const TransfersDone& done, std::vector<kv::BlockId>& freed);

  TierStats stats() const;

 private:
  enum class Move : std::uint8_t { none, swap_out, spill, restore };
  struct Chunk {
    std::uint64_t id = 0;
    std::optional<kv::BlockId> device;
    std::optional<HostSlot> host;
    std::optional<DiskSlot> disk;
    Move moving = Move::none;
    bool evict_device = false;  // the swap-out frees the device block when done
    bool from_disk = false;     // its host copy was restored (hit accounting)
    bool spill_failed = false;  // its spill failed once: never spilled again
    std::vector<std::int32_t> disk_tokens;  // what the disk copy covers
    bool host_valid() const { return host && moving != Move::swap_out && moving != Move::restore; }
    bool disk_valid() const { return disk && moving != Move::spill; }
    bool dropped() const { return !device && !host_valid() && !disk_valid() && moving != Move::restore; }
    bool needs_restore() const { return !device && !host && disk_valid() && moving == Move::none; }
  };
  struct Entry {
    std::vector<std::int32_t> tokens;
    std::vector<Chunk> chunks;
    std::int64_t last_active_ns = 0;
    std::optional<TurnId> attached;
  };
  struct InFlight {
    ConversationId conversation;
    std::uint64_t chunk_id = 0;
    std::size_t index = 0;
    kv::BlockId device;
    HostSlot host;
    DiskSlot disk;
  };
  struct Pick {
    Entry* entry = nullptr;
    ConversationId conversation;
    std::size_t index = 0;
    ChunkCandidate candidate;
    Chunk& chunk() const { return entry->chunks[index]; }
  };

  // The coldest chunk matching `pred` among idle conversations, or (with
  // `waiting`) among those attached to a waiting turn, except `spare`.
  template <class Pred>
  std::optional<Pick> coldest(std::int64_t now_ns, Pred pred, bool waiting = false,
                              std::optional<ConversationId> spare = std::nullopt);
  template <class EntryPred, class Pred>
  std::optional<Pick> coldest_where(std::int64_t now_ns, EntryPred entry_pred, Pred pred);
  enum class Copy : std::uint8_t { clean, copying, none };  // a device chunk's host copy
  std::optional<Pick> device_victim(std::int64_t now_ns, Copy copy, std::optional<ConversationId> spare);
  bool other_ready(ConversationId conversation) const;
  ChunkCandidate candidate(ConversationId conversation, const Entry& e, std::size_t index) const;
  std::span<const std::int32_t> chunk_tokens(const Entry& e, std::size_t index) const;

  enum class HostNeed : std::uint8_t { ahead, evict, restore };
  // Why take_host_slot() found no slot.
  enum class HostMiss : std::uint8_t { busy, coldest, spilling };
  std::optional<HostSlot> take_host_slot(std::int64_t now_ns, HostNeed need, const ChunkCandidate* for_chunk,
                                         KvTransfers& out, HostMiss* miss = nullptr,
                                         std::optional<ConversationId> spare = std::nullopt);
  std::optional<HostSlot> take_from_later_turn(TurnId turn, std::int64_t now_ns, KvTransfers& out);
  std::optional<DiskSlot> take_disk_slot(std::int64_t now_ns, const ChunkCandidate* leaving_after);
  void start_swap_out(const Pick& p, HostSlot slot, bool evict, KvTransfers& out);
  void start_spill(const Pick& p, DiskSlot slot, KvTransfers& out);
  void start_restore(ConversationId conversation, Entry& e, std::size_t index, HostSlot slot, KvTransfers& out);
  Chunk* find(const InFlight& f);

  void drop_device(Chunk& c, std::vector<kv::BlockId>& freed);
  void drop_host(Chunk& c);
  void drop_disk(Chunk& c);
  void drop_all(Chunk& c, std::vector<kv::BlockId>& freed);
  void truncate(Entry& e, std::int64_t keep, std::vector<kv::BlockId>& freed);
  void note_dropped(const Entry& e);
  void release_device(kv::BlockId b, std::vector<kv::BlockId>& freed);

  KvCacheSizes sizes_;
  KvCacheOptions options_;
  EvictionPolicy policy_;
  kv::BlockAllocator device_;
  kv::BlockAllocator host_;  // host slots, as block ids
  kv::BlockAllocator disk_;  // disk slots, as block ids
  std::map<ConversationId, Entry> entries_;
  // Without tiers: how many tokens a conversation had cached when it was
  // evicted whole, counted as recomputed when it returns (or forgotten).
  std::map<ConversationId, std::int64_t> evicted_tokens_;
  std::map<std::uint32_t, InFlight> swap_outs_;  // by host slot
  std::map<std::uint32_t, InFlight> spills_;     // by disk slot
  std::map<std::uint32_t, InFlight> restores_;   // by host slot
  std::uint64_t next_chunk_id_ = 1;
  TierStats stats_;
};

}  // namespace pensieve::actors
