#pragma once
// The restart comparison of engine-bench (--restart): time to first token
// of a restored conversation's next turn when its KV is read back from
// the disk tier a previous engine left, against recomputing it.
// Conversations play all but their last turn in one engine (history and
// disk tier on, a device tier of about one conversation, so idle KV goes
// out through the host to disk, and another tenant's copies of them follow,
// which push the last ones out too); the engine stops; then, from a copy of
// the folders each time, a fresh engine serves every conversation's last
// turn, one at a time, three ways: read (every chunk on disk read back),
// recompute (none read), rule (read unless the measured read is slower
// than the measured prefill: actors/disk_restore_rule.hpp). Modes are
// interleaved across repetitions. Runs on the calling thread.
#include "runtime/error.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::bench {

struct RestartBenchOptions {
  std::string model_path;
  std::string scratch_dir;  // the folders and their copies go under it
  int repetitions = 3;
  std::size_t threads = 2;
  std::int32_t batch_tokens = 512;
  std::int32_t block_tokens = 32;
  std::int32_t max_tokens = 16;
};

// The JSON report: sizing, per mode the repetitions (per-turn TTFT, cached
// tokens, disk hits, the measured read time and prefill cost) and their
// medians, and whether every mode produced the same greedy tokens.
Result<boost::json::object> run_restart_comparison(const std::vector<std::vector<std::string>>& conversations,
                                                   const RestartBenchOptions& options);

}  // namespace pensieve::bench
