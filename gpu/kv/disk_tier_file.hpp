#pragma once
// DiskTierFile: the disk tier of the KV cache, as a file. A fixed number
// of slots (kv::DiskSlot) in one file under a directory (--kv-disk-dir), as
// many as a byte budget (--kv-disk-gb) holds; each slot holds one chunk:
// every layer's K and V of one KV block, as one host KvPool block holds them. Written and read with
// io_uring (rt::UringFile), O_DIRECT where the filesystem allows it, through
// 4 KiB-aligned staging buffers (a host pool's blocks are not page aligned).
//
// On-disk format (header version 2, host byte order; only this machine's
// runs read the file): slot s starts at s * slot_bytes():
//   [0, 4096)        ChunkHeader (below), the chunk's token ids and its
//                    namespace, zero padded to one 4 KiB block
//   [4096, +payload) layer 0's chunk bytes, layer 1's, ... (layer_bytes each)
//   up to slot_bytes zero/garbage padding (whole 4 KiB blocks for O_DIRECT)
// The header (gpu/kv/chunk_header.hpp: its layout, and the check a read
// makes before using a chunk) carries a checksum of the payload (kv/chunk_checksum.hpp:
// hardware CRC-32C in lanes, at memory speed), a CRC-32 and count of
// the token ids the chunk covers, the run id and the slot's write
// generation, the model identity, the chunk's label (namespace, position,
// prefix chain keys) and a CRC-32 of itself. A read checks them in that
// order, so a chunk that is torn (short file, zeroed or half-written),
// flipped, stale (an earlier write of the slot, or another run's), of
// another model or for other tokens is told apart from an I/O error; every
// such chunk must be recomputed, never used.
//
// One store per folder: open() takes an exclusive lock on the folder
// (kv::DirLock), held until the store is destroyed; a second store on the
// folder, in this process or another, fails naming the holder's pid.
//
// Persistent (config.persistent): open() keeps the previous run's file and
// scans its slot headers (one 4 KiB read per slot, payloads unread: a
// payload is checked when it is read), so a slot whose header is intact,
// of this model and layout and labelled reads back as that chunk
// (scanned()); every other slot is free. Chunks are not fsynced: a crash
// of the machine may tear them, which the checks catch. Not persistent:
// open() deletes a previous run's file and the destructor removes its own.
//
// Ownership and threads: owns the file, the staging buffers and the slots'
// generations; shares the IoRing. Every call runs on the ring's executor
// (one thread), from coroutines; several reads and writes may be in flight.
// The spans passed in must stay alive until the awaited call returns.
#include "gpu/kv/block_id.hpp"
#include "gpu/kv/chunk_header.hpp"
#include "gpu/kv/dir_lock.hpp"
#include "gpu/kv/kv_pool.hpp"
#include "gpu/kv/tier_slots.hpp"
#include "runtime/aligned_buffer.hpp"
#include "runtime/error.hpp"
#include "runtime/io_ring.hpp"
#include "runtime/uring_file.hpp"

#include <boost/asio/awaitable.hpp>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pensieve::kv {

struct DiskTierFileConfig {
  std::filesystem::path dir;
  std::uint64_t budget_bytes = 0;  // slots: as many whole slots as this holds
  std::int32_t n_layers = 0;
  std::size_t layer_bytes = 0;     // one layer's K and V of one block
  rt::DirectIo direct = rt::DirectIo::prefer;
  std::size_t cached_staging_buffers = 16;  // kept for reuse; more are made while more are in flight
  std::uint64_t identity = 0;  // the model and KV layout: another's chunks are foreign
  bool persistent = false;     // keep and scan the previous run's file (above)
};


// The chunk geometry of a host pool: n_layers and one block's bytes per layer.
DiskTierFileConfig disk_layout_of(const KvPoolConfig& pool);
// One span per layer over block `block` of `pool` (K then V, contiguous).
std::vector<std::span<std::byte>> chunk_layers(const KvPool& pool, BlockId block);

class DiskTierFile {
 public:
  static constexpr std::size_t header_block_bytes = chunk_header_block_bytes;
  static constexpr const char* file_name = "kv-chunks.bin";

  // Makes the chunk file in config.dir (creating the directory if needed),
  // space reserved for every slot where the filesystem can (fallocate),
  // sparse otherwise: a fresh one, or (persistent) the previous run's, cut
  // or grown to this budget, its headers scanned.
  static Result<std::unique_ptr<DiskTierFile>> open(std::shared_ptr<rt::IoRing> ring,
                                                      DiskTierFileConfig config);
  ~DiskTierFile();
  DiskTierFile(const DiskTierFile&) = delete;
  DiskTierFile& operator=(const DiskTierFile&) = delete;

  std::uint32_t slot_count() const { return slot_count_; }
  std::uint64_t slot_bytes() const { return slot_bytes_; }
  std::uint64_t payload_bytes() const { return payload_bytes_; }
  std::uint64_t slot_offset_bytes(DiskSlot slot) const { return std::uint64_t(slot.value) * slot_bytes_; }
  const std::filesystem::path& path() const { return path_; }
  bool direct() const { return file_.direct(); }
  const std::string& direct_note() const { return file_.direct_note(); }
  const DiskScanReport& scan_report() const { return scan_report_; }
  // The labelled chunks the scan found, by slot (header.slot); each reads
  // back (with its own tokens) until the slot is written or released.
  const std::vector<ScannedChunk>& scanned() const { return scanned_; }

  // Writes `layers` (n_layers spans of layer_bytes each) and the digest of
  // `tokens` to `slot`. Until it returns, the slot reads as invalid.
  // `label`: what a later run needs to place the chunk (null: it cannot).
  // A pointer, not a defaulted reference: GCC destroys a default
  // argument's temporary wrongly across a co_await.
  boost::asio::awaitable<ChunkResult<void>> write(DiskSlot slot, std::span<const std::span<const std::byte>> layers,
                                                  std::span<const std::int32_t> tokens,
                                                  const ChunkLabel* label = nullptr);
  boost::asio::awaitable<ChunkResult<void>> write(DiskSlot slot, const KvPool& pool, BlockId block,
                                                  std::span<const std::int32_t> tokens,
                                                  const ChunkLabel* label = nullptr);
  // Reads `slot` back into `layers` after checking it is the chunk last
  // written there for `tokens`; on an error `layers` may hold garbage.
  boost::asio::awaitable<ChunkResult<void>> read(DiskSlot slot, std::span<const std::span<std::byte>> layers,
                                                 std::span<const std::int32_t> tokens);
  boost::asio::awaitable<ChunkResult<void>> read(DiskSlot slot, KvPool& pool, BlockId block,
                                                 std::span<const std::int32_t> tokens);
  // The same for a chunk packed layer after layer in one buffer of
  // payload_bytes().
  boost::asio::awaitable<ChunkResult<void>> write_packed(DiskSlot slot, std::span<const std::byte> chunk,
                                                         std::span<const std::int32_t> tokens);
  boost::asio::awaitable<ChunkResult<void>> read_packed(DiskSlot slot, std::span<std::byte> chunk,
                                                        std::span<const std::int32_t> tokens);
  // Forgets `slot` (a later read of it is invalid); no I/O.
  void release(DiskSlot slot);

 private:
  // A slot's last completed write: what a read of it expects.
  struct Stamp {
    std::uint64_t run_id = 0;
    std::uint64_t generation = 0;  // 0: none
  };
  void scan(std::uint32_t old_slots);
  DiskTierFile(DirLock lock, DiskTierFileConfig config, rt::UringFile file, std::filesystem::path path,
                 std::uint32_t slot_count, std::uint64_t slot_bytes, std::uint64_t run_id);
  ChunkResult<void> check_request(DiskSlot slot, std::size_t n_layers, std::size_t each_bytes, bool reading) const;
  ChunkExpectation expectation(DiskSlot slot) const;
  rt::AlignedBuffer take_staging();
  void give_back(rt::AlignedBuffer buffer);

  DirLock lock_;  // first: held until the file is closed (and, not persistent, removed)
  DiskTierFileConfig config_;
  rt::UringFile file_;
  std::filesystem::path path_;
  std::uint32_t slot_count_ = 0;
  std::uint64_t slot_bytes_ = 0;
  std::uint64_t payload_bytes_ = 0;
  std::uint64_t run_id_ = 0;
  std::uint64_t next_generation_ = 1;
  std::vector<Stamp> written_;  // per slot
  DiskScanReport scan_report_;
  std::vector<ScannedChunk> scanned_;
  std::vector<rt::AlignedBuffer> staging_;  // free staging buffers of slot_bytes_
};

}  // namespace pensieve::kv
