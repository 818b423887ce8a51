#pragma once
// A whole invocation: loads the data, fixes the workload once, runs every
// target at every load (loads outer, targets inner, so that slow drift of a
// shared machine hits the targets alike), writes one JSON per run and the
// two plots into the output folder.
#include "bench/pensieve-bench/options.hpp"
#include "runtime/error.hpp"

#include <cstdio>
#include <string>
#include <vector>

namespace pensieve::bench {

struct SweepOutput {
  std::vector<std::string> run_files;  // paths of the JSON files written
  std::string latency_plot;            // latency-vs-rate.svg
  std::string ttft_plot;               // ttft-cdf.svg
};

// `log` gets one line per finished run; `progress` (may be null) the live line.
Result<SweepOutput> run_bench(const BenchOptions& options, std::FILE* log, std::FILE* progress);

}  // namespace pensieve::bench
