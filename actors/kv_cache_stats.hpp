#pragma once
// TierStats: what the tiered KV cache reused, moved and evicted, per tier
// (SchedulerStats::tiers, the /metrics page, the benchmarks).
#include <cstdint>

namespace pensieve::actors {

struct TierStats {
  std::int64_t hit_tokens_device = 0;  // cached tokens reused from each tier
  std::int64_t hit_tokens_host = 0;
  std::int64_t hit_tokens_disk = 0;
  std::int64_t recomputed_tokens = 0;  // cached once, dropped, fed again
  std::uint64_t swap_in_chunks = 0;
  std::uint64_t swap_out_chunks = 0;   // ahead of time and under pressure
  std::uint64_t spill_chunks = 0;
  std::uint64_t restore_chunks = 0;
  // Evictions, by tier and reason.
  std::uint64_t device_reclaimed = 0;       // device copy reused; its clean host copy stays
  std::uint64_t device_evicted_to_host = 0; // under pressure: copied out, then reused
  std::uint64_t device_dropped = 0;         // nowhere to go
  // Why (their sum is device_dropped): every host slot pinned or in flight;
  // the chunk colder than every host chunk that could make room; a spill
  // started to free a host slot for it but not waited for.
  std::uint64_t device_dropped_host_busy = 0;
  std::uint64_t device_dropped_coldest = 0;
  std::uint64_t device_dropped_spilling = 0;
  std::uint64_t restores_given_up = 0;      // disk copy dropped: no host slot for its restore
  std::uint64_t host_reclaimed = 0;         // host copy reused; its clean disk copy stays
  std::uint64_t host_dropped = 0;
  std::uint64_t disk_dropped = 0;
  std::uint64_t corrupt_chunks = 0;         // restored but failed verification: dropped
  std::uint64_t found_disk_paths = 0;       // put back from a previous run's disk tier at start-up
  std::uint64_t found_disk_chunks = 0;       // their distinct chunks
  // Labelled chunks of this model no path could hold: a chunk whose earlier
  // chunks are gone (an orphan), a duplicate, a label that does not fit.
  std::uint64_t found_disk_discarded = 0;
  // Found paths whose first chunks were gone, placed behind that missing
  // front by a journaled history's tokens (the front is recomputed).
  std::uint64_t found_disk_front_missing = 0;
  // The start-up scan of the previous run's file (kv::DiskScanReport):
  // slots read, and what they held.
  std::uint64_t disk_scan_slots = 0;
  std::uint64_t disk_scan_labelled = 0;   // this model's labelled chunks
  std::uint64_t disk_scan_empty = 0;
  std::uint64_t disk_scan_corrupt = 0;
  std::uint64_t disk_scan_foreign = 0;    // another model or KV layout
  std::uint64_t disk_scan_unreadable = 0;
  std::uint64_t restores_recomputed = 0;    // on disk, but recomputed: reading was slower (or --kv-disk-restore)
  double disk_read_s_per_chunk = 0.0;       // measured (0: not yet)
  std::uint64_t spill_failures = 0;
  std::uint64_t evicted_conversations = 0;  // every chunk of a conversation gone
  // Stateless turns' lookups of an unnamed cached path: prompt tokens
  // looked up, and those a path matched (its tiers' share is in hit_tokens_*
  // and recomputed_tokens, with conversations'); unnamed paths cached now.
  std::int64_t prefix_queried_tokens = 0;
  std::int64_t prefix_matched_tokens = 0;
  std::int64_t unnamed_paths = 0;
  std::int64_t shared_device_blocks = 0;  // held by more than one path or turn
  std::int64_t pinned_chunks = 0;         // cached chunks a pin keeps where they are
  std::int32_t host_slots = 0;
  std::int32_t free_host_slots = 0;
  std::int32_t disk_slots = 0;
  std::int32_t free_disk_slots = 0;
};

}  // namespace pensieve::actors
