#pragma once
// The header at the start of every slot of the disk KV tier (the file is
// described in gpu/kv/disk_tier_file.hpp): how a write seals it and how a
// read checks what came back from disk before any of it is used. Pure: no
// I/O, any thread; the reader's half is fuzzed (tests/gpu/fuzz/fuzz_disk_chunk.cpp).
#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace pensieve::kv {

// Why a chunk could not be written or read back.
enum class ChunkFault : std::uint8_t {
  invalid,  // the caller's mistake: a slot out of range or never written, spans of the wrong size
  io,       // the read or write itself failed (errno); the chunk may be fine
  corrupt,  // torn, flipped or zeroed: a checksum, the magic or the length did not match
  stale,    // a well-formed chunk from an earlier write of the slot (or another run)
  wrong_tokens,  // a well-formed, current chunk whose token digest differs from the caller's tokens
};
const char* chunk_fault_name(ChunkFault fault);

struct ChunkError {
  ChunkFault fault = ChunkFault::io;
  std::string message;
  // corrupt, stale and wrong_tokens: the data is unusable; recompute it.
  bool unusable_chunk() const {
    return fault == ChunkFault::corrupt || fault == ChunkFault::stale ||
           fault == ChunkFault::wrong_tokens;
  }
};

template <class T>
using ChunkResult = boost::system::result<T, ChunkError>;

[[noreturn]] void throw_exception_from_error(ChunkError const& e, boost::source_location const&);

// The header at the start of every slot. Fixed layout; `version` changes
// when it does.
struct ChunkHeader {
  static constexpr std::uint64_t magic_value = 0x314b43564b565350ull;  // "PSVKVCK1"
  static constexpr std::uint32_t current_version = 1;
  std::uint64_t magic = 0;
  std::uint32_t version = 0;
  std::uint32_t header_bytes = 0;  // sizeof(ChunkHeader)
  std::uint32_t slot = 0;
  std::uint32_t n_layers = 0;
  std::uint64_t layer_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t run_id = 0;      // random per open(): another run's chunk is stale
  std::uint64_t generation = 0;  // the slot's write number in this run (from 1)
  std::uint32_t payload_crc32 = 0;
  std::uint32_t token_count = 0;
  std::uint32_t tokens_crc32 = 0;
  std::uint32_t header_crc32 = 0;  // of every byte above
};
static_assert(sizeof(ChunkHeader) == 72, "ChunkHeader has no padding");

// The header sits in the slot's first 4 KiB block (zero padded); the payload follows.
inline constexpr std::size_t chunk_header_block_bytes = 4096;

// What a slot must hold for its chunk to be used: this store's layout,
// run and the slot's last completed write.
struct ChunkExpectation {
  std::uint32_t slot = 0;
  std::uint32_t n_layers = 0;
  std::uint64_t layer_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t run_id = 0;
  std::uint64_t generation = 0;
};

// The header of a write of `expected` (its generation being this write's)
// for `tokens`, its checksum filled in.
ChunkHeader seal_chunk_header(const ChunkExpectation& expected, std::uint32_t payload_crc32,
                              std::span<const std::int32_t> tokens);

// Checks what a read of a slot returned (`read`: as many bytes as the read
// got, from the slot's start) in the order that tells the faults apart:
// torn (too short), the header's own checksum, the layout, the write
// (stale), the tokens. The payload's checksum is the caller's, over the
// bytes it copies out. `name` starts every message.
ChunkResult<ChunkHeader> check_chunk_slot(std::span<const std::byte> read,
                                          const ChunkExpectation& expected,
                                          std::span<const std::int32_t> tokens,
                                          const std::string& name);

}  // namespace pensieve::kv
