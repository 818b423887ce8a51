#pragma once
// ChunkStore: the disk tier as the swap engine sees it. One chunk (every
// layer's K and V of one KV block, packed layer after layer) per disk slot,
// written with the tokens it covers so that a read can tell a good chunk
// from a torn, corrupted or mismatched one.
//
// ADAPTER: the swap engine depends only on this interface. The io_uring
// store (gpu/kv/disk_chunk_store.*) plugs in behind it (disk_tier.hpp);
// tests plug in fakes.
//
// Threads: called from coroutines on the swap engine's executor, one
// operation per slot at a time (the scheduler core never moves a chunk that
// is in flight). Buffers stay alive until the awaited call returns.
#include "actors/kv_transfers.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "runtime/error.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace pensieve::actors {

enum class ChunkReadStatus : std::uint8_t { ok, corrupt };

class ChunkStore {
 public:
  virtual ~ChunkStore() = default;

  // Chunks the store holds (slots [0, slots())).
  virtual std::int64_t slots() const = 0;
  // Writes host slot `from` of `host` (every layer) into `slot`, with a
  // digest of `tokens`.
  virtual boost::asio::awaitable<Result<void>> write(DiskSlot slot, const kv::KvPool& host, HostSlot from,
                                                     std::span<const std::int32_t> tokens) = 0;
  // Reads `slot` into host slot `to`; corrupt when the chunk is torn,
  // flipped, stale or for other tokens (then `to` may hold garbage). An
  // Error is an I/O failure.
  virtual boost::asio::awaitable<Result<ChunkReadStatus>> read(DiskSlot slot, kv::KvPool& host, HostSlot to,
                                                               std::span<const std::int32_t> tokens) = 0;
};

}  // namespace pensieve::actors
