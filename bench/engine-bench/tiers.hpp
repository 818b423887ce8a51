#pragma once
// The KV-tier comparison of engine-bench (issue 7): one replay schedule
// served by four engines whose device KV holds a quarter of the
// conversations' total KV: (a) cost-aware eviction with host + disk tiers,
// (b) LRU with the same tiers, (c) device only (dropped KV is recomputed),
// (d) --no-state. Modes are interleaved across repetitions (a b c d a b c d)
// so a noisy, shared machine slows each of them alike. Runs on the calling
// thread; each engine brings its own threads.
#include "bench/engine-bench/replay.hpp"
#include "gpu/kv/paged_kv_view.hpp"
#include "runtime/error.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::bench {

struct TierBenchOptions {
  std::string model_path;
  // Same tokenizer and chat template as model_path (token counts do not
  // depend on the weights), small enough to size the tiers quickly.
  std::string calibration_model_path;
  std::string scratch_dir;  // the disk tier's folders go under it
  int repetitions = 2;
  double total_over_device = 4.0;  // conversations' total KV / device KV
  double host_over_device = 1.0;   // host tier of (a) and (b), relative to the device tier
  // Disk tier of (a) and (b), relative to the conversations' total KV: 2
  // holds everything (nothing needs dropping), below 1 - device - host
  // forces drops, 0 is no disk tier.
  double disk_over_total = 2.0;
  // Pensieve's settings (issue 7), flags so that a change is measured first.
  double swap_out_watermark = 0.25;
  double decode_reserve = 0.10;
  std::string modes = "abcd";  // which of the four to run (letters), for diagnosis
  std::size_t threads = 2;
  std::int32_t batch_tokens = 512;
  std::int32_t block_tokens = 32;
  kv::KvDType kv_dtype = kv::KvDType::f16;  // every mode's (the engine's default)
};

// The JSON report: sizing, per mode the repetitions and their medians, the
// ratios against the targets, and whether every mode produced the
// same greedy tokens.
Result<boost::json::object> run_tier_comparison(const std::vector<std::vector<std::string>>& conversations,
                                                const ReplayOptions& replay_options,
                                                const TierBenchOptions& options);

}  // namespace pensieve::bench
