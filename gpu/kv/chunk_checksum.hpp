#pragma once
// The payload checksum of a disk KV chunk: fast enough that verifying a
// restored chunk costs little next to reading it (zlib's crc32 runs at about
// 2.6 GB/s here, slower than the disk's O_DIRECT reads; this runs at memory
// speed). Each call covers `bytes` in 64 KiB blocks; a block is checksummed
// as four interleaved CRC-32C lanes (one 16 KiB quarter each, so the
// hardware crc32 instruction's latency is hidden), and the four lane values
// are folded into the running state with CRC-32C. A tail shorter than a
// block is one lane. Every byte is under a CRC, and a change to one lane's
// value is a burst of at most 32 bits in the fold, so any single corrupted
// region of a lane is always detected.
//
// Not a standard CRC of the whole buffer and not stable across machines:
// without SSE4.2 the lanes use zlib's CRC-32. Chunks never leave the run
// that wrote them, so that is enough. Pure; any thread.
#include <cstddef>
#include <cstdint>

namespace pensieve::kv {

std::uint32_t chunk_checksum(std::uint32_t state, const void* data, std::size_t bytes);

}  // namespace pensieve::kv
