#include "actors/tier_move_ledger.hpp"

#include <cassert>

namespace pensieve::actors {

void TierMoveLedger::swap_out(const ChunkKey& chunk, kv::BlockId device, HostSlot host, TierPools& pools,
                              KvTransfers& out) {
  assert(!swap_outs_.contains(host.value) && !restores_.contains(host.value) && "one move per host slot");
  pools.host.retain(host);
  pools.device.retain(device);  // the block is read until the copy is reported
  swap_outs_[host.value] = InFlight{chunk, device, host, {}};
  out.swap_out.push_back({device, host});
}

void TierMoveLedger::spill(const ChunkKey& chunk, HostSlot host, DiskSlot disk, std::span<const std::int32_t> tokens,
                           TierPools& pools, KvTransfers& out, kv::ChunkLabel label) {
  assert(!spills_.contains(disk.value) && "one move per disk slot");
  pools.disk.retain(disk);
  pools.host.retain(host);
  spills_[disk.value] = InFlight{chunk, {}, host, disk};
  out.spill.push_back({host, disk, {tokens.begin(), tokens.end()}, std::move(label)});
}

void TierMoveLedger::restore(const ChunkKey& chunk, DiskSlot disk, HostSlot host,
                             std::span<const std::int32_t> tokens, TierPools& pools, KvTransfers& out) {
  assert(!swap_outs_.contains(host.value) && !restores_.contains(host.value) && "one move per host slot");
  pools.host.retain(host);
  pools.disk.retain(disk);
  restores_[host.value] = InFlight{chunk, {}, host, disk};
  out.restore.push_back({host, disk, {tokens.begin(), tokens.end()}});
}

std::optional<ChunkKey> TierMoveLedger::swap_out_done(const DeviceHostCopy& move, TierPools& pools,
                                                      std::vector<kv::BlockId>& freed) {
  auto it = swap_outs_.find(move.host.value);
  assert(it != swap_outs_.end() && it->second.device == move.device && "a swap-out that was never asked");
  if (it == swap_outs_.end()) return std::nullopt;
  const InFlight f = it->second;
  swap_outs_.erase(it);
  pools.device.release(f.device, freed);
  pools.host.release(f.host);
  return f.chunk;
}

std::optional<ChunkKey> TierMoveLedger::spill_done(const HostDiskCopy& move, TierPools& pools) {
  auto it = spills_.find(move.disk.value);
  assert(it != spills_.end() && "a spill that was never asked");
  if (it == spills_.end()) return std::nullopt;
  const InFlight f = it->second;
  spills_.erase(it);
  pools.host.release(f.host);
  pools.disk.release(f.disk);
  return f.chunk;
}

std::optional<ChunkKey> TierMoveLedger::restore_done(const HostDiskCopy& move, TierPools& pools) {
  auto it = restores_.find(move.host.value);
  assert(it != restores_.end() && "a restore that was never asked");
  if (it == restores_.end()) return std::nullopt;
  const InFlight f = it->second;
  restores_.erase(it);
  pools.host.release(f.host);
  pools.disk.release(f.disk);
  return f.chunk;
}

}  // namespace pensieve::actors
