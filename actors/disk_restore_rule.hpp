#pragma once
// Whether a waiting turn reads a chunk back from the disk tier or
// recomputes it: the measured time to read a chunk against the prefill
// time of its tokens. A disk can be slower than a fast device's prefill
// (a network volume under a GPU): then reading costs the turn more time to
// first token than recomputing, and the chunk is recomputed.
//
// The read time is measured as the swap engine reads (DiskReadMeter: wall
// time of each batch of restores over its chunks, so reads in flight
// together count at the rate they achieve together); the prefill time is
// the cost model's, which is in seconds only when it was measured or
// loaded from a profile. Until both are known, a chunk is read.
//
// Pure; used on the scheduler's thread (KvCacheManager owns one).
#include "actors/eviction_policy.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace pensieve::actors {

// How chunks that are on disk only come back (KvCacheOptions::disk_restore).
enum class DiskRestoreMode : std::uint8_t {
  rule,       // read unless the measured read is slower than the prefill (above)
  read,       // always read
  recompute,  // never read: recompute from the token history
};

// The modes as --kv-disk-restore names them: auto (rule), always (read),
// never (recompute).
const char* disk_restore_mode_name(DiskRestoreMode mode);
std::optional<DiskRestoreMode> disk_restore_mode_from_name(std::string_view name);

class DiskReadMeter {
 public:
  // `chunks` restores took `wall_ns` from the first read's start to the last one's end.
  void observe(std::int64_t chunks, std::int64_t wall_ns);
  // Seconds per chunk: a moving average (weight 1/4 on the newest batch).
  std::optional<double> seconds_per_chunk() const { return seconds_per_chunk_; }

 private:
  std::optional<double> seconds_per_chunk_;
};

// True: read the chunk covering tokens [begin_token, end_token) (the ones
// before it cached); false: recompute it. `cost_in_seconds`: `cost` is
// measured or a profile's (the default model's units are relative).
bool read_from_disk(DiskRestoreMode mode, const DiskReadMeter& meter, const CostModel& cost, bool cost_in_seconds,
                    std::int64_t begin_token, std::int64_t end_token);

}  // namespace pensieve::actors
