#pragma once
// The cached paths a restart finds on the disk tier. A start-up scan keeps
// the labelled chunks of this model (kv::ScannedChunk: a block's token ids,
// its namespace, position and chain keys); this puts them back together
// into whole token prefixes of their namespaces, which the KV cache then
// registers in the prefix index as disk-resident paths
// (KvCacheManager::restore_disk_paths), so a turn whose prompt starts with
// one reads its KV from disk instead of recomputing it.
//
// A chunk is used only if it fits its label: a full block's chain key is
// its parent's stepped over its tokens, a partial block (a path's last)
// has none, and every block before it, from the first, is there too, or
// is known from a history (below). Of two chunks with one key the lower
// slot is kept. The rest are unused: their slots are free.
//
// A chunk whose earlier chunks were evicted or lost (an orphan) has no
// tokens for the prefix before it, and the prefix index verifies every
// lookup against a path's tokens, so it cannot be placed from the disk
// alone. The journal's histories can supply them: where a history of the
// chunk's namespace keys its block before the chunk with the chunk's
// parent key (the chain key covers every token before it), the path is
// placed with that history's tokens in front and its first chunks missing
// (RestoredPath::missing_front): recomputed when a turn uses it, the rest
// read from disk.
//
// Pure; runs once at start-up, on the engine's thread.
#include "gpu/kv/chunk_header.hpp"
#include "gpu/kv/tier_slots.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::actors {

struct DiskChunk {
  kv::DiskSlot slot;
  kv::ChunkLabel label;
  std::vector<std::int32_t> tokens;
};

// One token prefix of a namespace: chunk i (slots[i], covering chunk_tokens[i])
// holds tokens [i * block_tokens, ...). Paths sharing leading blocks share
// their slots.
struct RestoredPath {
  std::string ns;
  std::vector<std::int32_t> tokens;
  // Chunks [0, missing_front) are on no tier (their tokens come from a
  // history); slots[j] and chunk_tokens[j] are chunk missing_front + j's.
  std::size_t missing_front = 0;
  std::vector<kv::DiskSlot> slots;
  std::vector<std::vector<std::int32_t>> chunk_tokens;
};

// A token history known at start-up (a journaled conversation's) and the
// cache namespace its KV was written under.
struct KnownHistory {
  std::string ns;
  std::vector<std::int32_t> tokens;
};

struct RestoredKv {
  std::vector<RestoredPath> paths;  // one per leaf, in the order of their last chunk's slot
  std::vector<kv::DiskSlot> used;    // every slot some path holds, ascending
  std::vector<kv::DiskSlot> unused;  // the scanned chunks that could not be placed, ascending
  kv::DiskScanReport scan;           // what the scan read (the engine sets it; stats only)
};

RestoredKv restore_paths(std::vector<DiskChunk> chunks, std::int32_t block_tokens,
                         const std::vector<KnownHistory>& histories = {});

// The scan's chunks as restore_paths takes them.
std::vector<DiskChunk> disk_chunks_of(const std::vector<kv::ScannedChunk>& scanned);

}  // namespace pensieve::actors
