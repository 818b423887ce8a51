#pragma once
// The JSON document of one run (one target at one load) and its file name.
#include "bench/pensieve-bench/options.hpp"
#include "bench/pensieve-bench/runner.hpp"
#include "bench/pensieve-bench/stats.hpp"

#include <string>

namespace pensieve::bench {

struct RunReport {
  const BenchOptions* options = nullptr;
  const Target* target = nullptr;
  std::string model;
  LoadSpec load;
  std::string timestamp_utc;  // ISO 8601
  std::size_t workload_conversations = 0;
  std::size_t workload_requests = 0;
  const RunRecords* records = nullptr;
  RunSummary summary;
};

// "<label>-rate<R>.json", or "<label>-concurrency<C>.json" for a closed loop.
std::string run_file_name(const std::string& label, const LoadSpec& load);

std::string format_run_json(const RunReport& report);

// One line for the terminal.
std::string format_run_line(const RunReport& report);

std::string utc_timestamp_now();

}  // namespace pensieve::bench
