#pragma once
// KvCacheManager: the device cache manager. It answers the scheduler's
// "allocate these blocks" with blocks or a plain no (append), and, asked to
// make device room, says what one step achieved (DeviceRoom): the
// scheduler acts on it (evict again, wait for moves under way, preempt).
// Between turns it keeps conversations' KV chunk by chunk (one chunk = one
// KV block, a CachedChunk) over the device, host and disk tiers; a
// returning turn attaches its conversation's chunks and materializes them
// into its block table (hits, swap-ins, recomputed holes).
//
// What it owns: the tiers' pools (TierPools: every device block, host and
// disk slot and its references), the moves in flight (TierMoveLedger: it
// writes them into KvTransfers, the swap engine executes them and reports
// back through transfers_done()), and the index of cached histories
// (KvCacheIndex). Its own part is the decisions.
// Demotion: device -> host -> disk -> dropped, lowest retention value first
// (EvictionPolicy).
//
// With host_slots == 0 there are no tiers: whole conversations stay on the
// device and the coldest one is evicted whole, as the scheduler always did.
//
// Owned by SchedulerCore; used on the scheduler actor's thread only.
#include "actors/cached_chunk.hpp"
#include "actors/disk_chunk_paths.hpp"
#include "actors/disk_restore_rule.hpp"
#include "actors/eviction_policy.hpp"
#include "actors/ids.hpp"
#include "actors/kv_cache_index.hpp"
#include "actors/kv_cache_options.hpp"
#include "actors/kv_cache_stats.hpp"
#include "actors/kv_transfers.hpp"
#include "actors/tier_move_ledger.hpp"
#include "actors/tier_pool.hpp"
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_table.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pensieve::actors {

// What one step of make_device_room() achieved.
struct DeviceRoom {
  enum class Step : std::uint8_t {
    progress,   // a device block is free now, or a move under way frees one
    wait,       // disk moves under way will make host room: ask again once one is reported
    exhausted,  // nothing cached is left to evict: preempt
  };
  Step step = Step::exhausted;
  // With progress: device blocks that moves under way will free once
  // reported (copy-outs, and spills making host room for more copy-outs).
  std::int32_t coming = 0;
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

// One step of a flush to disk (KvCacheManager::flush_to_disk).
struct KvFlushStep {
  std::int32_t started = 0;    // moves this step asked for (swap-outs and spills)
  std::int32_t waiting = 0;    // chunks whose move is under way, or that wait for a host slot
  std::int64_t left = 0;       // chunks that will not get a disk copy (no disk room, or a dropped chunk before them)
  bool done() const { return started == 0 && waiting == 0; }
};

class KvCacheManager {
 public:
  KvCacheManager(KvCacheSizes sizes, KvCacheOptions options);

  bool tiered() const { return sizes_.host_slots > 0; }
  std::int32_t block_tokens() const { return sizes_.block_tokens; }
  // Recalibrated recompute costs; they take effect at the next decision.
  void set_cost_model(const CostModel& cost);
  const CostModel& cost_model() const { return policy_.cost(); }

  // --- device blocks for running sequences ---
  std::int32_t device_blocks() const { return pools_.device.slots(); }
  std::int32_t free_device_blocks() const { return pools_.device.free_slots(); }
  const kv::BlockAllocator& device_allocator() const { return pools_.device.allocator(); }
  // Blocks append(table, n) takes (a copy-on-write's target included).
  std::int32_t blocks_needed(const kv::BlockTable& table, std::int64_t n) const;
  // Room for `n` more tokens in `table` (with a copy-on-write to run first,
  // if any), or nullopt and nothing changed: too few free device blocks.
  std::optional<kv::AppendResult> append(kv::BlockTable& table, std::int64_t n);
  // Keeps a table's first `keep` tokens; its freed blocks go to `freed`.
  void truncate(kv::BlockTable& table, std::int64_t keep, std::vector<kv::BlockId>& freed);
  void release_host(HostSlot slot);  // a swap-in's source, once the copy landed

  // --- cached conversations ---
  // A finished turn's KV: `tokens` are what `table` covers; its blocks become
  // device chunks (an older entry of the conversation goes). With
  // `unnamed`: a stateless turn's path in that cache namespace, which a
  // later stateless turn may continue (longest_unnamed_prefix); unnamed
  // paths whose every chunk was dropped go then. With `shared` (and no
  // `unnamed`): a conversation's KV whose full blocks later turns of that
  // namespace may share (find_prefix), its own turns still attach it.
  void put(ConversationId conversation, std::span<const std::int32_t> tokens, kv::BlockTable table,
           std::int64_t now_ns, std::vector<kv::BlockId>& freed,
           std::optional<std::string> unnamed = std::nullopt, std::optional<std::string> shared = std::nullopt);
  void forget(ConversationId conversation, std::vector<kv::BlockId>& freed);
  std::size_t size() const { return index_.size(); }
  // A stateless turn's lookup: the unnamed path of `ns` it continues (see
  // KvCacheIndex::longest_unnamed_prefix), counted in the prefix-cache stats.
  std::optional<PrefixMatch> find_unnamed_prefix(std::string_view ns, std::span<const std::int32_t> want);
  // Any turn's lookup of the one index (conversations' paths too, but
  // `except`'s): with `may_adopt`, an unnamed path the prompt continues
  // whole comes first (a stateless turn takes it over); else the path
  // sharing the most tokens with `want`. Counted in the prefix-cache stats.
  std::optional<PrefixMatch> find_prefix(std::string_view ns, std::span<const std::int32_t> want, bool may_adopt,
                                         std::optional<ConversationId> except);
  // A table sharing the leading full blocks of what `path` has in common
  // with `want` (short of its newest token) that are on the device (one more
  // reference each; the path keeps its own), for a turn that diverges from
  // the path: two requests with one system prompt, a regeneration, an
  // edit. Nullopt: no such block.
  std::optional<kv::BlockTable> share_prefix(ConversationId path, std::span<const std::int32_t> want,
                                             std::int64_t now_ns);
  // A table sharing the first `blocks` full blocks of a running turn's
  // `table` (one more reference each), for a new turn whose prompt
  // continues that turn's written tokens; counted as device hits.
  kv::BlockTable share_running(const kv::BlockTable& table, std::int64_t blocks);
  // Pins the full blocks of `conversation`'s cached path (it needs a
  // namespace) until `until_ns`: no eviction takes their chunks before then
  // (make_device_room is exhausted rather). False: no such path.
  // Only its first `max_tokens` tokens' full blocks.
  bool pin(ConversationId conversation, std::int64_t until_ns, std::int64_t max_tokens = INT64_MAX);
  // Pins' room: the device blocks they may hold (options.pin_cap_share),
  // those they hold now (expired ones gone) and what pinning `tokens` in
  // `ns` would add.
  std::int64_t pin_cap_blocks() const;
  std::int64_t pinned_blocks() const { return std::int64_t(index_.pins()); }
  void expire_pins(std::int64_t now_ns) { index_.expire_pins(now_ns); }
  // Pins of `ns` (of every namespace when absent) go before their time;
  // returns the blocks they held.
  std::int64_t unpin(std::optional<std::string_view> ns) { return std::int64_t(index_.unpin(ns)); }
  std::int64_t blocks_to_pin(std::string_view ns, std::span<const std::int32_t> tokens) const {
    return std::int64_t(index_.unpinned_blocks(ns, tokens));
  }
  // At start-up, before any turn: a previous run's disk chunks
  // (restore_paths), registered as restored unnamed paths of their
  // namespaces, on disk only; their slots are taken. Ids from
  // restored_path_ids up.
  void restore_disk_paths(const RestoredKv& found);
  static constexpr std::uint64_t restored_path_ids = std::uint64_t(1) << 62;
  // A turn of `conversation` with nothing of its own cached takes over a
  // restored path its prompt shares blocks with: the path becomes the
  // conversation's (its namespace shared, as a conversation's KV is).
  // False: the path is gone, attached or moving.
  bool adopt_restored(ConversationId path, ConversationId conversation);
  // Every idle unnamed path goes (clearing the stateless cache).
  void forget_unnamed(std::vector<kv::BlockId>& freed);
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

  // --- making room ---
  // One step towards a free device block. Idle conversations' chunks go
  // first; then, so a queued turn never holds device blocks a running turn
  // needs, those of conversations whose turn is waiting (not `spare`'s: the
  // turn asking).
  DeviceRoom make_device_room(std::int64_t now_ns, KvTransfers& out, std::vector<kv::BlockId>& freed,
                              std::optional<ConversationId> spare = std::nullopt);
  // Device blocks that cached chunks could give up (for the decode reserve):
  // idle conversations' and waiting turns' alike, as make_device_room takes
  // both, but not `spare`'s (the turn asking).
  std::int32_t reclaimable_device_blocks(std::optional<ConversationId> spare = std::nullopt) const;
  // Ahead-of-time moves: device -> host below the watermark, host -> disk
  // below the same share of free host slots.
  void ahead_of_time(std::int64_t now_ns, KvTransfers& out);
  // At a clean exit (kv_cache_flush.cpp): one step towards a disk copy of
  // every idle path's chunks, so that a restart finds them. Conversations
  // most recently active first, each from its first chunk on (a restart
  // places only a path whose leading chunks are on disk); a device chunk
  // goes through a host slot (a free one, or a clean host copy given up).
  // Call again once the moves it asked for are reported, until done().
  KvFlushStep flush_to_disk(std::int64_t now_ns, KvTransfers& out);
  void transfers_done(const TransfersDone& done, std::vector<kv::BlockId>& freed);

  TierStats stats() const;

 private:
  // A table of `blocks`, full and on the device, one more reference each;
  // their tokens counted as device hits (share_prefix, share_running).
  kv::BlockTable share_full_blocks(std::vector<kv::BlockId> blocks);
  enum class Copy : std::uint8_t { clean, copying, none };  // a device chunk's host copy
  enum class HostNeed : std::uint8_t { ahead, evict, restore };
  enum class HostMiss : std::uint8_t { busy, coldest, spilling };  // why take_host_slot() found none

  template <class Pred>
  std::optional<ChunkPick> coldest(std::int64_t now_ns, Pred pred, bool waiting = false,
                                   std::optional<ConversationId> spare = std::nullopt) {
    return index_.coldest(policy_, now_ns, pred, waiting, spare);
  }
  bool other_ready(ConversationId conversation) const;
  void truncate(ConversationId conversation, CachedEntry& e, std::int64_t keep, std::vector<kv::BlockId>& freed);
  void note_dropped(const CachedEntry& e);
  std::optional<PrefixMatch> counted(std::span<const std::int32_t> want, std::optional<PrefixMatch> match);
  void forget_unnamed_where(bool all_dropped_only, std::vector<kv::BlockId>& freed);

  // Making room.
  DeviceRoom evict_whole_conversation(std::int64_t now_ns, std::vector<kv::BlockId>& freed);
  std::optional<ChunkPick> device_victim(std::int64_t now_ns, Copy copy, std::optional<ConversationId> spare);
  std::optional<HostSlot> take_host_slot(std::int64_t now_ns, HostNeed need, const ChunkCandidate* for_chunk,
                                         KvTransfers& out, HostMiss* miss = nullptr,
                                         std::optional<ConversationId> spare = std::nullopt);
  std::optional<HostSlot> take_from_later_turn(TurnId turn, std::int64_t now_ns, KvTransfers& out);
  std::optional<DiskSlot> take_disk_slot(std::int64_t now_ns, const ChunkCandidate* leaving_after);
  std::int32_t pending_device_frees();

  // Moves: the chunk's side; the ledger takes the move's references.
  void start_swap_out(const ChunkPick& p, HostSlot slot, bool evict, KvTransfers& out);
  void start_spill(const ChunkPick& p, DiskSlot slot, KvTransfers& out);
  void start_restore(ConversationId conversation, CachedEntry& e, std::size_t index, HostSlot slot,
                     KvTransfers& out);

  KvCacheSizes sizes_;
  KvCacheOptions options_;
  EvictionPolicy policy_;
  TierPools pools_;
  TierMoveLedger moves_;
  KvCacheIndex index_;
  // Without tiers: how many tokens a conversation had cached when it was
  // evicted whole, counted as recomputed when it returns (or forgotten).
  std::map<ConversationId, std::int64_t> evicted_tokens_;
  TierStats stats_;
  DiskReadMeter read_meter_;  // restores' measured read time, for the disk-vs-recompute rule
};

}  // namespace pensieve::actors
