#pragma once
// The KV moves one scheduler iteration asks for, between the tiers (device
// pool, host pool, disk), as plain data. The scheduler core decides them
// (pure bookkeeping: which chunk lives where); the swap engine executes them
// and reports back which ones finished, so the core never reuses a slot that
// a copy still reads or writes.
//
// A chunk (one KV block) is identified on each tier by its slot there: a
// device BlockId, a host slot in the host KvPool, a disk slot in the disk
// tier's file (the slot types: gpu/kv/tier_slots.hpp). Every transfer moves
// every layer of one chunk, K and V.
#include "gpu/kv/block_id.hpp"
#include "gpu/kv/chunk_header.hpp"
#include "gpu/kv/tier_slots.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::actors {

using kv::DiskSlot;
using kv::HostSlot;

// Device <-> host, one chunk.
struct DeviceHostCopy {
  kv::BlockId device;
  HostSlot host;
};

// Host <-> disk, one chunk. `tokens` is what the chunk's KV covers (a chunk
// file records a digest of them with its checksum, so a chunk read back for
// the wrong tokens is as detectable as a torn one). A spill's `label` says
// where the chunk sits in the prefix index, so a later run can put it back
// (gpu/kv/chunk_header.hpp).
struct HostDiskCopy {
  HostSlot host;
  DiskSlot disk;
  std::vector<std::int32_t> tokens;
  kv::ChunkLabel label;
};

// What one iteration asks the swap engine to do. Order of execution:
// swap_in before swap_out on the copy stream (host->device first, as in
// Pensieve), layer by layer; the forward pass of layer i waits for layer i
// of swap_in. spill and restore go through the disk queue and may finish in
// a later iteration; the core keeps the chunks involved out of reach until
// they are reported done.
struct KvTransfers {
  std::vector<DeviceHostCopy> swap_in;   // host -> device, needed by this iteration's batch
  std::vector<DeviceHostCopy> swap_out;  // device -> host, ahead of time; the device copy stays valid
  std::vector<HostDiskCopy> spill;       // host -> disk
  std::vector<HostDiskCopy> restore;     // disk -> host, for turns waiting to run
  bool empty() const { return swap_in.empty() && swap_out.empty() && spill.empty() && restore.empty(); }
};

// What finished, reported back to the core (SchedulerCore::transfers_done).
// swap_in needs no report: it completes before the batch that needs it.
struct TransfersDone {
  std::vector<DeviceHostCopy> swap_out;
  std::vector<HostDiskCopy> spill;       // written (or failed: listed in spill_failed)
  std::vector<HostDiskCopy> spill_failed;
  std::vector<HostDiskCopy> restored;    // read back and verified
  std::vector<HostDiskCopy> corrupt;     // read back but its checksum or tokens did not match
  // From the first restore's start to the last one's end (restored and
  // corrupt alike): the disk's read rate, for the disk-vs-recompute rule.
  std::int64_t restore_wall_ns = 0;
};

}  // namespace pensieve::actors
