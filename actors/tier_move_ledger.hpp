#pragma once
// TierMoveLedger: the tier moves in flight, from the plan that asked the
// swap engine for them (KvTransfers) to the engine's report (TransfersDone).
// A move holds one reference on the slot at each of its ends, taken when it
// starts and given back when it is reported, so no device block or slot is
// reused while a copy still reads or writes it, even after the chunk it was
// for has left the cache. Moves are found again by the slot the report
// names: a swap-out and a restore by their host slot, a spill by its disk
// slot (one move per slot at a time).
//
// Pure; used on the KV cache's thread. Swap-ins need no entry: they land
// before the batch that reads them.
#include "actors/cached_chunk.hpp"
#include "actors/kv_transfers.hpp"
#include "actors/tier_pool.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace pensieve::actors {

class TierMoveLedger {
 public:
  // Each asks the swap engine for a move (into `out`) and takes its references.
  void swap_out(const ChunkKey& chunk, kv::BlockId device, HostSlot host, TierPools& pools, KvTransfers& out);
  void spill(const ChunkKey& chunk, HostSlot host, DiskSlot disk, std::span<const std::int32_t> tokens,
             TierPools& pools, KvTransfers& out, kv::ChunkLabel label = {});
  void restore(const ChunkKey& chunk, DiskSlot disk, HostSlot host, std::span<const std::int32_t> tokens,
               TierPools& pools, KvTransfers& out);

  // A reported move: gives back its references (a device block that became
  // free goes to `freed`) and names the chunk it was for. nullopt (after an
  // assertion) for a move that was never asked.
  std::optional<ChunkKey> swap_out_done(const DeviceHostCopy& move, TierPools& pools,
                                        std::vector<kv::BlockId>& freed);
  std::optional<ChunkKey> spill_done(const HostDiskCopy& move, TierPools& pools);
  std::optional<ChunkKey> restore_done(const HostDiskCopy& move, TierPools& pools);

  std::int32_t swap_outs() const { return std::int32_t(swap_outs_.size()); }
  std::int32_t spills() const { return std::int32_t(spills_.size()); }
  std::int32_t restores() const { return std::int32_t(restores_.size()); }
  bool disk_busy() const { return !spills_.empty() || !restores_.empty(); }
  bool empty() const { return swap_outs_.empty() && !disk_busy(); }

 private:
  struct InFlight {
    ChunkKey chunk;
    kv::BlockId device;  // a swap-out's
    HostSlot host;
    DiskSlot disk;       // a spill's or a restore's
  };
  std::map<std::uint32_t, InFlight> swap_outs_;  // by host slot
  std::map<std::uint32_t, InFlight> spills_;     // by disk slot
  std::map<std::uint32_t, InFlight> restores_;   // by host slot
};

}  // namespace pensieve::actors
