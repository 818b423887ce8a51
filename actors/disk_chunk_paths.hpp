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
// has none, and every block before it, from the first, is there too (the
// prefix's tokens are what the index verifies a lookup against; a chunk
// whose prefix was evicted cannot be placed). Of two chunks with one key
// the lower slot is kept. The rest are unused: their slots are free.
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
  std::vector<kv::DiskSlot> slots;
  std::vector<std::vector<std::int32_t>> chunk_tokens;
};

struct RestoredKv {
  std::vector<RestoredPath> paths;  // one per leaf, in the order of their last chunk's slot
  std::vector<kv::DiskSlot> used;    // every slot some path holds, ascending
  std::vector<kv::DiskSlot> unused;  // the scanned chunks that could not be placed, ascending
};

RestoredKv restore_paths(std::vector<DiskChunk> chunks, std::int32_t block_tokens);

// The scan's chunks as restore_paths takes them.
std::vector<DiskChunk> disk_chunks_of(const std::vector<kv::ScannedChunk>& scanned);

}  // namespace pensieve::actors
