#pragma once
// Per-request measurements and what a run reports from them. Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::bench {

struct RequestRecord {
  std::size_t conversation = 0;  // index in the workload
  std::size_t turn = 0;
  double start_s = 0.0;  // since the run started
  std::optional<double> ttft_s;
  std::vector<double> inter_token_s;
  double e2e_s = 0.0;
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;  // from usage; else the events that carried text
  std::int64_t cached_tokens = 0;
  std::int32_t max_tokens = 0;
  bool usage_reported = false;
  std::string error;  // empty when the request succeeded
};

// The p-th percentile (0..100) by linear interpolation between closest ranks
// (numpy's default); nullopt for no values.
std::optional<double> percentile(std::vector<double> values, double p);
std::optional<double> mean(const std::vector<double>& values);

struct Distribution {
  std::optional<double> mean, p50, p90, p99, max;
  std::size_t count = 0;
};
Distribution distribution(const std::vector<double>& values);

struct Slo {
  double ttft_ms = 2000.0;
  double tpot_ms = 200.0;  // time per output token after the first
};

struct RunSummary {
  double duration_s = 0.0;  // first request sent to last answer
  std::size_t requests = 0;
  std::size_t errors = 0;
  std::size_t good_requests = 0;  // within the SLO
  std::int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  double requests_per_s = 0.0;
  double output_tokens_per_s = 0.0;
  double goodput_requests_per_s = 0.0;
  Distribution ttft_s, inter_token_s, tpot_s, e2e_s, normalized_s_per_token;
  std::vector<std::string> error_examples;  // the first few, for the report
};

// Over successful requests; a request is good when its TTFT and its mean time
// per output token after the first are within the SLO.
RunSummary summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo);

}  // namespace pensieve::bench
