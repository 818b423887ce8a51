#pragma once
// The header at the start of every slot of the disk KV tier (the file is
// described in gpu/kv/disk_tier_file.hpp): how a write seals it, how a
// read checks what came back from disk before any of it is used, and how a
// start-up scan tells a chunk a later run may use (its label: which
// prefix of which namespace it is the KV of, under which model) from one
// it must discard. Pure: no I/O, any thread; the reader's half is fuzzed
// (tests/gpu/fuzz/fuzz_disk_chunk.cpp).
#include <boost/assert/source_location.hpp>
#include <boost/system/result.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace pensieve::kv {

// Why a chunk could not be written or read back.
enum class ChunkFault : std::uint8_t {
  invalid,  // the caller's mistake: a slot out of range or never written, spans of the wrong size
  io,       // the read or write itself failed (errno); the chunk may be fine
  corrupt,  // torn, flipped or zeroed: a checksum, the magic or the length did not match
  stale,    // a well-formed chunk from an earlier write of the slot (or another run)
  wrong_tokens,  // a well-formed, current chunk whose token digest differs from the caller's tokens
  foreign,  // a well-formed chunk of another model, KV layout or format version
  empty,    // a slot never written (all zeros), or a chunk without a label a restart could use
};
const char* chunk_fault_name(ChunkFault fault);

struct ChunkError {
  ChunkFault fault = ChunkFault::io;
  std::string message;
  // corrupt, stale and wrong_tokens: the data is unusable; recompute it.
  bool unusable_chunk() const {
    return fault == ChunkFault::corrupt || fault == ChunkFault::stale ||
           fault == ChunkFault::wrong_tokens || fault == ChunkFault::foreign;
  }
};

template <class T>
using ChunkResult = boost::system::result<T, ChunkError>;

[[noreturn]] void throw_exception_from_error(ChunkError const& e, boost::source_location const&);

// The header at the start of every slot. Fixed layout; `version` changes
// when it does (version 2 added the label fields, from `identity` on, and
// the token ids and namespace stored after the header: a chunk of version
// 1 is foreign).
struct ChunkHeader {
  static constexpr std::uint64_t magic_value = 0x314b43564b565350ull;  // "PSVKVCK1"
  static constexpr std::uint32_t current_version = 2;
  static constexpr std::uint32_t tokens_stored = 1;  // flags: the token ids follow the header
  std::uint64_t magic = 0;
  std::uint32_t version = 0;
  std::uint32_t header_bytes = 0;  // sizeof(ChunkHeader)
  std::uint32_t slot = 0;
  std::uint32_t n_layers = 0;
  std::uint64_t layer_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t run_id = 0;      // random per open(): tells this run's writes from another's
  std::uint64_t generation = 0;  // the slot's write number in its run (from 1)
  std::uint64_t identity = 0;    // the model and KV layout the payload was computed under
  std::uint64_t parent_chain = 0;  // the prefix index's key of blocks [0, block_index) (see ChunkLabel)
  std::uint64_t chain = 0;         // the key of blocks [0, block_index]; 0: a partial block
  std::uint32_t block_index = 0;
  std::uint32_t payload_crc32 = 0;
  std::uint32_t token_count = 0;
  std::uint32_t tokens_crc32 = 0;
  std::uint32_t ns_bytes = 0;  // the namespace's bytes after the token ids
  std::uint32_t ns_crc32 = 0;
  std::uint32_t flags = 0;
  std::uint32_t header_crc32 = 0;  // of every byte above
};
static_assert(sizeof(ChunkHeader) == 112, "ChunkHeader has no padding");

// The header sits in the slot's first 4 KiB block (zero padded); the payload follows.
inline constexpr std::size_t chunk_header_block_bytes = 4096;

// Which KV a chunk is, beyond its tokens, so that a later run can put it
// back in its place in the prefix index: the cache namespace (tenant and
// cache_salt), the block's position and the index's chain keys (the hash
// the index uses for the prefix before the block and through it). An empty
// namespace: a chunk no later run can place (it is written all the same).
struct ChunkLabel {
  std::string ns;
  std::uint32_t block_index = 0;
  std::uint64_t parent_chain = 0;
  std::uint64_t chain = 0;
};

// What a slot must hold for its chunk to be used: this store's layout and
// model, and the slot's last completed write (its run and generation).
struct ChunkExpectation {
  std::uint32_t slot = 0;
  std::uint32_t n_layers = 0;
  std::uint64_t layer_bytes = 0;
  std::uint64_t payload_bytes = 0;
  std::uint64_t run_id = 0;
  std::uint64_t generation = 0;
  std::uint64_t identity = 0;
};

// The header of a write of `expected` (its generation being this write's)
// for `tokens`, its checksum filled in. With a label whose token ids and
// namespace fit the header block after it (they do for blocks up to ~900
// tokens and namespaces of a few hundred bytes), the header says they are
// stored; otherwise it carries no label.
ChunkHeader seal_chunk_header(const ChunkExpectation& expected, std::uint32_t payload_crc32,
                              std::span<const std::int32_t> tokens, const ChunkLabel& label = {});
// Lays `h` out in `block` (chunk_header_block_bytes): the header, then the
// token ids and the namespace when h.flags says they are stored, zeros after.
void write_chunk_header_block(std::span<std::byte> block, const ChunkHeader& h,
                              std::span<const std::int32_t> tokens, const ChunkLabel& label);

// Checks what a read of a slot returned (`read`: as many bytes as the read
// got, from the slot's start) in the order that tells the faults apart:
// torn (too short), the header's own checksum, the layout and model, the
// write (stale), the tokens. The payload's checksum is the caller's, over
// the bytes it copies out. `name` starts every message.
ChunkResult<ChunkHeader> check_chunk_slot(std::span<const std::byte> read,
                                          const ChunkExpectation& expected,
                                          std::span<const std::int32_t> tokens,
                                          const std::string& name);

// A labelled chunk found by a start-up scan: its header (run and
// generation: what a read of it expects), token ids and label.
struct ScannedChunk {
  ChunkHeader header;
  std::vector<std::int32_t> tokens;
  ChunkLabel label;
};

// Checks a slot's header block at start-up (headers only: the payload is
// checked when the chunk is read): empty (never written, or no label),
// corrupt (checksums, magic), foreign (another version, layout or model:
// `expected`'s slot, layout and identity; its run and generation are not
// looked at). A scanned chunk is a candidate only: its payload may still
// be torn.
ChunkResult<ScannedChunk> scan_chunk_header(std::span<const std::byte> block, const ChunkExpectation& expected,
                                            const std::string& name);

// What DiskTierFile::open() found in a persistent store's previous file,
// slot by slot.
struct DiskScanReport {
  std::uint32_t scanned = 0;  // slots whose header was read
  std::uint32_t labelled = 0;  // kept: DiskTierFile::scanned()
  std::uint32_t empty = 0, corrupt = 0, foreign = 0, unreadable = 0;
};

}  // namespace pensieve::kv
