#pragma once
// pensieve-sim's discrete-event loop: the server's own SchedulerCore (its KV
// cache manager, eviction policy and swap decisions, not a copy of them) fed
// with a workload's turns at Poisson arrivals and think times, each planned
// iteration "run" on a device model (iteration_cost.hpp) that advances a
// manual clock, each tier move completed when its modelled copy would have.
// No threads; deterministic for a seed.
//
// Policies, all on the same device model and trace:
//   pensieve     cost-aware eviction (recompute cost over idle time, leading
//                chunks first), a host tier, ahead-of-time swap-out;
//   stateless    every turn recomputes its whole history (vLLM without
//                prefix caching: the paper's baseline);
//   prefix-lru   KV kept on the device between turns, LRU, no host tier
//                (vLLM-style prefix caching);
//   offload-lru  LRU with a host tier.
#include "actors/scheduler_core.hpp"
#include "bench/pensieve-sim/device_model.hpp"
#include "bench/pensieve-sim/model_shape.hpp"
#include "bench/pensieve-sim/sim_workload.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::sim {

enum class Policy : std::uint8_t { pensieve, stateless, prefix_lru, offload_lru };
const char* policy_name(Policy p);
// "pensieve", "stateless", "prefix-lru", "offload-lru" or "all".
Result<std::vector<Policy>> parse_policies(const std::string& text);

struct SimOptions {
  Policy policy = Policy::pensieve;
  double rate = 1.0;        // turns per second offered: conversations start at rate / (mean turns)
  double think_s = 10.0;    // mean (exponential) time between a reply and the next turn
  std::int32_t tp = 1;
  double host_gb = 128.0;   // the host tier (pensieve, offload-lru)
  double disk_gb = 0.0;     // a disk tier under it (pensieve); 0: none
  std::int32_t block_tokens = 16;
  std::int32_t max_batch_tokens = 2048;
  std::int32_t max_running = 256;
  std::uint64_t seed = 1;
  bool record_turns = false;  // SimResult::turn_timings
};

// One served turn's times, for a turn-by-turn comparison with a replay.
struct TurnTiming {
  std::size_t conversation = 0, turn = 0;
  double arrival_s = 0, ttft_s = 0, latency_s = 0;
};

struct SimResult {
  Policy policy = Policy::pensieve;
  double rate = 0;
  double host_gb = 0;
  std::size_t turns = 0;
  std::size_t failed_turns = 0;
  double makespan_s = 0;
  double throughput_turns_s = 0;
  double output_tokens_s = 0;
  double mean_normalized_latency_s = 0;  // per output token, mean over turns
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double ttft_mean_s = 0;
  std::int64_t prompt_tokens = 0;    // every turn's prompt (history included)
  std::int64_t reused_tokens = 0;    // served from cached KV
  std::int64_t prefill_tokens = 0;   // computed prompt tokens
  std::int64_t hit_device = 0, hit_host = 0, hit_disk = 0, recomputed = 0;
  double h2d_bytes = 0, d2h_bytes = 0, disk_bytes = 0;
  std::int32_t device_blocks = 0, host_slots = 0, disk_slots = 0;
  std::uint64_t iterations = 0;
  std::uint64_t scheduler_iterations = 0;  // what the SchedulerCore itself counted
  std::vector<TurnTiming> turn_timings;     // with SimOptions::record_turns, in completion order
};

// The device blocks and host slots a configuration gets.
struct SimCapacity {
  std::int32_t device_blocks = 0;
  std::int32_t host_slots = 0;
  std::int32_t disk_slots = 0;
};
Result<SimCapacity> capacity(const DeviceModel& device, const ModelShape& model, const SimOptions& options);

Result<SimResult> simulate(const Workload& workload, const DeviceModel& device, const ModelShape& model,
                           const SimOptions& options);

}  // namespace pensieve::sim
