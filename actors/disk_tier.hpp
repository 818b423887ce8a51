#pragma once
// The disk tier behind the swap engine's ChunkStore interface: the io_uring
// DiskChunkStore (gpu/kv/disk_chunk_store.hpp), one file of checksummed
// chunk slots under a folder, O_DIRECT where the filesystem allows.
//
// Threads: the ring and every call live on `executor` (the swap engine's).
#include "actors/chunk_store.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace pensieve::actors {

// A store of as many chunks of `host`'s layout as `budget_bytes` holds, in
// a fresh file under `dir` (a previous run's file is removed).
Result<std::shared_ptr<ChunkStore>> open_disk_tier(const boost::asio::any_io_executor& executor,
                                                   const std::string& dir, std::uint64_t budget_bytes,
                                                   const kv::KvPoolConfig& host);

}  // namespace pensieve::actors
