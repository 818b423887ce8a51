#pragma once
// DiskTier: the disk tier of the KV cache as the swap engine sees it. One
// chunk (every layer's K and V of one KV block, packed layer after layer)
// per disk slot, written with the tokens it covers so that a read can tell
// a good chunk from a torn, corrupted or mismatched one.
//
// ADAPTER: the swap engine depends only on this interface. open_disk_tier()
// gives the io_uring one, over kv::DiskTierFile (gpu/kv/disk_tier_file.hpp:
// one file of checksummed chunk slots under a folder, O_DIRECT where the
// filesystem allows); tests may plug in fakes.
//
// Threads: called from coroutines on the swap engine's executor, one
// operation per slot at a time (the KV cache never moves a chunk that is in
// flight). Buffers stay alive until the awaited call returns.
#include "actors/disk_chunk_paths.hpp"
#include "actors/kv_transfers.hpp"
#include "gpu/kv/disk_tier_file.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "runtime/error.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace pensieve::actors {

enum class ChunkReadStatus : std::uint8_t { ok, corrupt };

class DiskTier {
 public:
  virtual ~DiskTier() = default;

  // Chunks the tier holds (slots [0, slots())).
  virtual std::int64_t slots() const = 0;
  // Writes host slot `from` of `host` (every layer) into `slot`, with a
  // digest of `tokens` and `label` (what a later run needs to place it).
  virtual boost::asio::awaitable<Result<void>> write(DiskSlot slot, const kv::KvPool& host, HostSlot from,
                                                     std::span<const std::int32_t> tokens,
                                                     const kv::ChunkLabel& label) = 0;
  // Reads `slot` into host slot `to`; corrupt when the chunk is torn,
  // flipped, stale or for other tokens (then `to` may hold garbage). An
  // Error is an I/O failure.
  virtual boost::asio::awaitable<Result<ChunkReadStatus>> read(DiskSlot slot, kv::KvPool& host, HostSlot to,
                                                               std::span<const std::int32_t> tokens) = 0;
};

// What open_disk_tier() found of a previous run: the labelled chunks of
// this model and layout (empty unless persistent), and the scan's counts.
struct DiskTierFound {
  std::vector<DiskChunk> chunks;
  kv::DiskScanReport report;
};

// A disk tier of as many chunks of `host`'s layout as `budget_bytes` holds,
// in a file under `dir`. Persistent: the previous run's file is kept and
// its chunks of model `identity` (model_identity.hpp: kv_identity) are
// found, into `found`; otherwise a previous file is removed. The ring and
// every call live on `executor` (the swap engine's).
Result<std::shared_ptr<DiskTier>> open_disk_tier(const boost::asio::any_io_executor& executor,
                                                 const std::string& dir, std::uint64_t budget_bytes,
                                                 const kv::KvPoolConfig& host, std::uint64_t identity = 0,
                                                 bool persistent = false, DiskTierFound* found = nullptr);

}  // namespace pensieve::actors
