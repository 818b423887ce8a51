#pragma once
// TierPool: the slots of one KV tier (device blocks, host slots or disk
// slots), each tier in its own id type, over kv::BlockAllocator's free list
// and reference counts: allocation takes the front of the free list and a
// slot whose last reference goes returns to its back, so the order is exact
// and testable. Running out is a normal outcome (nullopt). Owns no memory:
// the device and host KvPools and the disk tier's file do.
//
// Pure; used on its owner's thread (the KV cache's, the scheduler's).
#include "actors/kv_transfers.hpp"
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_id.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace pensieve::actors {

template <class Slot>
class TierPool {
 public:
  explicit TierPool(std::int32_t slots);

  std::optional<Slot> allocate();
  void retain(Slot slot);  // one more holder of an allocated slot
  // One holder fewer; true when that was the last and the slot is free.
  bool release(Slot slot);
  // The same, adding the slot to `freed` when it became free.
  void release(Slot slot, std::vector<Slot>& freed);

  std::int32_t ref_count(Slot slot) const;
  std::int32_t slots() const { return allocator_.num_blocks(); }
  std::int32_t free_slots() const { return allocator_.free_blocks(); }
  std::vector<Slot> free_list() const;  // in the order allocate() hands them out
  // Allocates exactly `slots` (each free), the rest of the free list
  // keeping its order: a disk tier's slots that a restart found in use.
  void claim(const std::vector<Slot>& slots);

  // Block tables are filled from the device pool's allocator directly.
  kv::BlockAllocator& allocator() { return allocator_; }
  const kv::BlockAllocator& allocator() const { return allocator_; }

 private:
  kv::BlockAllocator allocator_;
};

using DevicePool = TierPool<kv::BlockId>;
using HostPool = TierPool<HostSlot>;
using DiskPool = TierPool<DiskSlot>;

// The three tiers' pools, which the KV cache owns and its move ledger
// takes references in.
struct TierPools {
  DevicePool device;
  HostPool host;
  DiskPool disk;
};

extern template class TierPool<kv::BlockId>;
extern template class TierPool<HostSlot>;
extern template class TierPool<DiskSlot>;

}  // namespace pensieve::actors
