#pragma once
// One benchmark run: replays a workload against one target at one load
// (Poisson arrivals at a rate, or a fixed number of conversations in flight)
// and returns every request's measurements. Runs its own io_context on the
// calling thread; one coroutine per conversation, each with its own
// keep-alive connection.
#include "bench/pensieve-bench/request_body.hpp"
#include "bench/pensieve-bench/stats.hpp"
#include "bench/pensieve-bench/target.hpp"
#include "bench/pensieve-bench/workload.hpp"
#include "runtime/error.hpp"

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::bench {

struct LoadSpec {
  std::optional<double> rate_per_s;        // Poisson arrivals of conversations
  std::optional<std::size_t> concurrency;  // else: this many conversations in flight
};

struct RunConfig {
  Target target;
  std::string model;
  ClientMode mode = ClientMode::stateless;
  LoadSpec load;
  double duration_s = 0.0;  // > 0: start no conversation or turn after this
  double request_timeout_s = 600.0;
  std::string conversation_prefix;  // makes stateful conversation ids unique per run
  std::FILE* progress = nullptr;    // a live progress line goes here when set
};

struct RunRecords {
  std::vector<RequestRecord> requests;
  double duration_s = 0.0;
  std::size_t conversations_started = 0;
};

Result<RunRecords> run_load(const RunConfig& config, const Workload& workload);

// GET {api_base}/models and return the first model id.
Result<std::string> discover_model(const Target& target, double timeout_s);

}  // namespace pensieve::bench
