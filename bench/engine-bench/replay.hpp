#pragma once
// Multi-turn replay through the embedded Engine API: N conversations start
// together (staggered by a fixed gap), each sends its user turns one after
// another with an exponential think time between a reply and the next turn
// (seeded, so every mode sees the same schedule). Measures each turn's time
// to first token, latency and output tokens. Runs on the calling thread's
// io_context; the engine brings its own threads.
#include "actors/engine.hpp"

#include <boost/asio/io_context.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::bench {

struct ReplayOptions {
  double think_time_s = 1.0;     // mean of the exponential think time
  double stagger_s = 0.25;       // conversation i starts at i * stagger_s
  std::int32_t max_tokens = 32;  // per turn; the model writes exactly this many (ignore_eos)
  std::uint64_t seed = 1;
  // An ordinary OpenAI client: no conversation id, the whole history
  // (its earlier questions and the replies as text) resent every turn.
  bool stateless = false;
};

struct TurnSample {
  std::size_t conversation = 0;
  std::size_t turn = 0;
  double ttft_s = 0;
  double latency_s = 0;
  std::int32_t prompt_tokens = 0;
  std::int32_t cached_tokens = 0;
  std::int32_t completion_tokens = 0;
  std::string text;  // what the model wrote, to compare modes
  bool ok = false;
  std::string error;
};

struct ReplayResult {
  std::vector<TurnSample> turns;
  double makespan_s = 0;  // first send to last reply
  actors::SchedulerStats scheduler;
};

// The think times of one conversation (element t precedes turn t; the first
// is unused), fixed by the seed and its index only: what replay waits, and
// what a simulation of the same replay is given.
std::vector<double> think_times(std::size_t conversation, std::size_t turns, const ReplayOptions& options);

// `io` runs the users; the engine completes operations on it, so it must
// outlive the engine.
ReplayResult replay(boost::asio::io_context& io, actors::Engine& engine,
                    const std::vector<std::vector<std::string>>& conversations, const ReplayOptions& options);

struct ReplaySummary {
  std::size_t turns = 0, failed = 0;
  double output_tokens_per_s = 0;
  double turns_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0;
  double latency_p50_s = 0;
  double mean_normalized_latency_s = 0;  // per output token
  std::int64_t prefill_tokens = 0;       // computed by the engine
  std::int64_t reused_tokens = 0;        // served from cached KV
};

ReplaySummary summarize(const ReplayResult& result);

}  // namespace pensieve::bench
