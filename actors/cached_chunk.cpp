#include "actors/cached_chunk.hpp"

namespace pensieve::actors {

ChunkView view_of(const CachedChunk& c) {
  ChunkView v{ChunkTier::dropped, c.device, c.host, c.disk, c.moving != ChunkMove::none};
  if (c.device) v.tier = ChunkTier::device;
  else if (c.host_valid()) v.tier = ChunkTier::host;
  else if (c.disk_valid()) v.tier = ChunkTier::disk;
  else if (c.moving == ChunkMove::restore) v.tier = ChunkTier::restoring;
  return v;
}

ChunkCode code_of(const CachedChunk& c) {
  return ChunkCode((c.device ? 1 : 0) | (c.host ? 2 : 0) | (c.disk ? 4 : 0) | (c.evict_device ? 8 : 0) |
                   (c.spill_failed ? 16 : 0) | (unsigned(c.moving) << 5));
}

CachedChunk chunk_with_code(ChunkCode code) {
  CachedChunk c;
  if (code & 1) c.device = kv::BlockId{0};
  if (code & 2) c.host = HostSlot{0};
  if (code & 4) c.disk = DiskSlot{0};
  c.evict_device = (code & 8) != 0;
  c.spill_failed = (code & 16) != 0;
  c.moving = ChunkMove((code >> 5) & 3);
  return c;
}

void drop_device_copy(CachedChunk& c, TierPools& pools, std::vector<kv::BlockId>& freed) {
  if (!c.device) return;
  pools.device.release(*c.device, freed);
  c.device.reset();
}

void drop_host_copy(CachedChunk& c, TierPools& pools) {
  if (!c.host) return;
  pools.host.release(*c.host);
  c.host.reset();
  c.from_disk = false;
}

void drop_disk_copy(CachedChunk& c, TierPools& pools) {
  if (!c.disk) return;
  pools.disk.release(*c.disk);
  c.disk.reset();
  c.disk_tokens.clear();
}

void drop_all_copies(CachedChunk& c, TierPools& pools, std::vector<kv::BlockId>& freed) {
  drop_device_copy(c, pools, freed);
  drop_host_copy(c, pools);
  drop_disk_copy(c, pools);
  c.moving = ChunkMove::none;
  c.evict_device = false;
}

}  // namespace pensieve::actors
