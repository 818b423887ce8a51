#pragma once
// pensieve-sim's output: a table (its first line says the figures are
// simulated and names the device file), a JSON document of every run, an
// SVG plot of throughput against mean normalized latency per policy, and
// the capacity answer: the highest swept rate whose runs meet a latency
// target, per policy, and each policy's throughput there against the
// stateless baseline's. Pure.
#include "bench/pensieve-sim/simulator.hpp"

#include <string>
#include <vector>

namespace pensieve::sim {

struct SimRun {
  std::string device;      // name
  std::string device_file;
  std::string model;
  std::string data;
  std::int32_t tp = 1;
  double host_gb = 0;
  double think_s = 0;
  std::uint64_t seed = 0;
  double latency_target_s = 0;  // mean normalized latency (s per output token)
  double ttft_p99_target_s = 0; // 0: none
  std::vector<SimResult> results;
};

// The best result of `policy` meeting the targets (highest throughput), or null.
const SimResult* at_target(const SimRun& run, Policy policy);

std::string render_table(const SimRun& run);
std::string render_json(const SimRun& run);
std::string render_plot(const SimRun& run);

}  // namespace pensieve::sim
