#pragma once
// pensieve-sim's command line.
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::sim {

struct CliOptions {
  std::string device = "a100-80gb";
  std::string model = "llama-2-13b";
  std::string data;
  std::int32_t tp = 1;
  std::vector<double> rates = {0.5, 1, 2, 4};
  std::vector<double> host_gbs = {128};  // --host-gb G or a sweep G1,G2 (--what-if)
  double disk_gb = 0;
  std::string policy = "all";
  std::uint64_t seed = 1;
  double think_s = 10;
  double latency_target_s = 0.2;
  double ttft_p99_target_s = 0;
  std::size_t max_conversations = 0;
  std::int32_t block_tokens = 16;
  std::int32_t max_batch_tokens = 2048;
  std::optional<std::string> out_json;
  std::optional<std::string> out_svg;
  // --calibrate-cpu MODEL.gguf: fit a CPU device file to the real engine
  // (cpu_calibration.hpp) and write it to --out; --data defaults to
  // ../shared/data/oasst.jsonl there.
  std::optional<std::string> calibrate_model;
  std::size_t threads = 1;          // the engine's forward threads when calibrating
  double replay_think_s = 0.05;     // and the replay's mean think time
  bool help = false;
};

Result<CliOptions> parse_cli(const std::vector<std::string>& args);
const char* usage();

}  // namespace pensieve::sim
