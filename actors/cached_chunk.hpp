#pragma once
// CachedChunk: where one cached chunk (one KV block of a cached token
// history) lives across the tiers, and which move of it is in flight. A
// chunk holds one reference on each slot it uses (TierPool); a move in
// flight holds its own (TierMoveLedger), so dropping a copy never frees a
// slot that a copy still reads or writes.
//
// A chunk is on the device (possibly with a clean host copy after an
// ahead-of-time swap-out), on the host (possibly with a clean disk copy), on
// disk, being restored, or dropped (recomputed from the token history when
// it is needed again).
//
// Plain data and free functions; used on the KV cache's thread.
#include "actors/ids.hpp"
#include "actors/kv_transfers.hpp"
#include "actors/tier_pool.hpp"
#include "gpu/kv/block_id.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace pensieve::actors {

enum class ChunkMove : std::uint8_t { none, swap_out, spill, restore };

struct CachedChunk {
  std::uint64_t id = 0;  // unique for the cache's life: a report finds its chunk or none
  std::optional<kv::BlockId> device;
  std::optional<HostSlot> host;  // valid copy or a copy being written
  std::optional<DiskSlot> disk;
  ChunkMove moving = ChunkMove::none;
  bool evict_device = false;  // the swap-out frees the device block when done
  bool from_disk = false;     // its host copy was restored (hit accounting)
  bool spill_failed = false;  // its spill failed once: never spilled again
  std::vector<std::int32_t> disk_tokens;  // what the disk copy covers

  bool host_valid() const { return host && moving != ChunkMove::swap_out && moving != ChunkMove::restore; }
  bool disk_valid() const { return disk && moving != ChunkMove::spill; }
  bool dropped() const { return !device && !host_valid() && !disk_valid() && moving != ChunkMove::restore; }
  bool needs_restore() const { return !device && !host && disk_valid() && moving == ChunkMove::none; }
};

// Which chunk a move is for: the conversation whose history it caches, its
// index there and its id (a chunk truncated away and made again at the
// same index has another id).
struct ChunkKey {
  ConversationId conversation;
  std::size_t index = 0;
  std::uint64_t id = 0;
};

// A chunk's state as one of chunk_codes small numbers: which copies it
// has, which move of it is in flight, whether its device copy leaves once
// copied out and whether its spill failed. Every eviction choice reads only
// these fields, so the index keeps, per cached entry, which codes its
// chunks have and skips entries with none a query wants (KvCacheIndex).
using ChunkCode = std::uint8_t;
inline constexpr std::size_t chunk_codes = 128;
ChunkCode code_of(const CachedChunk& c);
// A chunk whose code is `code` (slot numbers 0), to ask a predicate about it.
CachedChunk chunk_with_code(ChunkCode code);

enum class ChunkTier : std::uint8_t { device, host, disk, restoring, dropped };

// One cached chunk, for tests and inspection.
struct ChunkView {
  ChunkTier tier = ChunkTier::dropped;
  std::optional<kv::BlockId> device;
  std::optional<HostSlot> host;  // valid copy or a copy being written
  std::optional<DiskSlot> disk;
  bool moving = false;           // a transfer of it is in flight
};

ChunkView view_of(const CachedChunk& c);

// Each gives up the chunk's own reference on one copy (a device block that
// became free goes to `freed`); a move in flight keeps the ledger's.
void drop_device_copy(CachedChunk& c, TierPools& pools, std::vector<kv::BlockId>& freed);
void drop_host_copy(CachedChunk& c, TierPools& pools);
void drop_disk_copy(CachedChunk& c, TierPools& pools);
// The chunk leaves the cache: every copy, and no move counts as its any more.
void drop_all_copies(CachedChunk& c, TierPools& pools, std::vector<kv::BlockId>& freed);

}  // namespace pensieve::actors
