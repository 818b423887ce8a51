#pragma once
// Messages to the swap engine: run one iteration's tier moves. The reply
// comes back as soon as the copies are enqueued (never after they ran): one
// event per model layer that completes when that layer of every swap_in
// chunk has landed on the device, so the forward pass of layer i waits only
// for layer i. What finishes later (swap_out, spill, restore) is reported to
// the scheduler by a TransfersFinished message.
#include "actors/kv_transfers.hpp"
#include "runtime/event.hpp"
#include "runtime/reply.hpp"

#include <cstdint>
#include <variant>
#include <vector>

namespace pensieve::actors {

struct SwapTicket {
  // layer_ready[l]: layer l of this iteration's swap_in is on the device.
  // Empty when the iteration swaps nothing in.
  std::vector<rt::Event> layer_ready;
};

struct SwapIteration {
  std::uint64_t iteration = 0;  // for the trace
  KvTransfers transfers;
  rt::Reply<SwapTicket> reply;
};

// Counters since start; times are busy time of the copy stream or the disk.
struct SwapStats {
  std::int64_t swap_in_chunks = 0, swap_in_bytes = 0;
  std::int64_t swap_out_chunks = 0, swap_out_bytes = 0;
  std::int64_t spill_chunks = 0, spill_bytes = 0, spill_failed = 0;
  std::int64_t restore_chunks = 0, restore_bytes = 0, restore_corrupt = 0;
  std::int64_t copy_runs = 0;  // memcpy / DMA transfers issued (gathering makes fewer)
  std::int64_t gather_launches = 0, gathered_runs = 0;  // the gather kernel's launches, the runs they carried
  std::int64_t swap_in_ns = 0, swap_out_ns = 0, spill_ns = 0, restore_ns = 0;
  std::int32_t host_slots = 0;  // host tier capacity, in chunks
  std::int64_t disk_slots = 0;  // disk tier capacity, in chunks (0: no disk tier)
};

struct GetSwapStats {
  rt::Reply<SwapStats> reply;
};

using SwapEngineMsg = std::variant<SwapIteration, GetSwapStats>;

}  // namespace pensieve::actors
