#pragma once
// The command line of pensieve-bench. A bad flag or value is a one-line Error.
#include "bench/pensieve-bench/request_body.hpp"
#include "bench/pensieve-bench/stats.hpp"
#include "bench/pensieve-bench/target.hpp"
#include "runtime/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::bench {

struct BenchOptions {
  std::vector<Target> targets;
  std::string data_path;
  std::size_t conversations = 0;  // 0: every conversation in the file
  std::vector<std::size_t> concurrency;  // conversations in flight; a list sweeps; empty with rates
  std::vector<double> rates;  // conversations per second; empty with concurrency
  double think_time_s = 0.0;
  std::int32_t max_tokens = 128;
  ClientMode mode = ClientMode::stateless;
  std::uint64_t seed = 1;
  double duration_s = 0.0;  // 0: until every conversation is done
  Slo slo;
  std::optional<std::string> model;  // default: the first id of GET /v1/models
  double request_timeout_s = 600.0;
  std::string out_dir;
  std::string command_line;  // as typed, for the reports
  bool help = false;
};

std::string bench_usage();

// Without --rate or --concurrency the load is 4 conversations in flight.
Result<BenchOptions> parse_bench_options(const std::vector<std::string>& args);

// The shortest decimal that reads back as `v` ("0.5", "2"), for file names.
std::string format_number(double v);

}  // namespace pensieve::bench
