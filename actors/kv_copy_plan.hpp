#pragma once
// How the chunk copies of one tier move become memory transfers: a chunk's
// slice of one layer is contiguous in every tier's pool, so chunks whose
// source slots and destination slots are both consecutive can move as one
// larger transfer (Pensieve gathers small copies: a 32-token chunk of one
// layer is ~100 KiB on an 8B model and PCIe reaches its bandwidth near 2 MB).
// Pure: no memory is touched here.
#include <cstdint>
#include <span>
#include <vector>

namespace pensieve::actors {

struct SlotCopy {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
};

// `count` consecutive chunks from slot src.. to slot dst..
struct ChunkRun {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint32_t count = 1;
  bool operator==(const ChunkRun&) const = default;
};

// One run per copy, in order, without `gather`; with it, the copies sorted
// by source and merged wherever source and destination both continue, at
// most `max_count` chunks a run. The destinations must be distinct (the runs
// then commute).
std::vector<ChunkRun> plan_chunk_runs(std::span<const SlotCopy> copies, bool gather,
                                      std::uint32_t max_count = UINT32_MAX);

}  // namespace pensieve::actors
