#pragma once
// What one fe-latency run measured, and how it is printed and written as
// JSON (one object per run plus one per compute-nice setting over all its
// rounds, so settings measured side by side compare in one file).
#include "bench/common/quantiles.hpp"
#include "bench/common/stream_load.hpp"

#include <boost/json/object.hpp>

#include <string>
#include <vector>

namespace pensieve::bench {

struct FeRun {
  int compute_nice = 0;
  int round = 0;
  StreamLoad load;
  std::int64_t completion_tokens = 0;  // of the requests that completed
  std::vector<double> samples_s;       // front-end latency of every delta
  std::vector<double> taken_s;         // its part until the writer took the delta
  std::vector<double> wakeup_late_s;   // the noise-floor probe's lateness
  double cpu_s = 0, wall_s = 0;        // cpu_s: the server's process
  double client_cpu_s = 0;             // the clients' process
  std::string model_name;              // the served model's
  std::string load_before, load_after;
};

// Prints one line per run, then one per setting (every round pooled).
void print_runs(std::vector<FeRun>& runs, const std::vector<int>& settings);

// The runs and the per-setting summary as JSON.
boost::json::object runs_json(std::vector<FeRun>& runs, const std::vector<int>& settings);

}  // namespace pensieve::bench
