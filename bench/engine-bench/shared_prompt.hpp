#pragma once
// The shared-system-prompt comparison of engine-bench (issue 21): N
// conversations through the conversation API, each opening with the same
// long system prompt and its own question, served three ways by engines of
// one model: (shared) one tenant, so every conversation's first turn shares
// the cached system prompt's blocks; (separate) a tenant per conversation,
// so nothing is shared (each conversation keeps its own KV, as before the
// one prefix index); (no-state) --no-state. Conversation 0 runs first and
// alone (the prompt is cached by earlier traffic in a real server), then
// the others start together, at most `in_flight` at a time; `cold` starts
// every one that way (the first ones share what running turns have written). Runs on the calling thread; each engine brings its
// own threads.
#include "runtime/error.hpp"

#include <boost/json/object.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::bench {

struct SharedPromptOptions {
  std::string model_path;
  std::size_t conversations = 100;
  std::size_t system_tokens = 1000;  // about this many (4 bytes a token)
  std::size_t in_flight = 8;
  std::int32_t max_tokens = 16;
  std::size_t threads = 2;
  std::int32_t batch_tokens = 512;
  std::int64_t kv_mb = 1024;
  // Which of "shared", "separate", "no-state" to run, in that order (the
  // last two compute the prompt once per conversation: minutes at 100).
  std::vector<std::string> modes = {"shared", "separate", "no-state"};
  // Every conversation from the start, `in_flight` at a time (no
  // conversation 0 alone first): the prompt is not cached yet when the
  // first ones run, so only sharing with running turns saves its compute.
  bool cold = false;
  bool share_running_prefixes = true;  // SchedulerOptions::share_running_prefixes
};

// The JSON report: per mode, prompt tokens sent, computed and reported
// cached, output tokens per second, TTFT percentiles, the makespan; and
// whether the modes run produced the same greedy tokens; the ratios of
// separate to shared when both ran.
Result<boost::json::object> run_shared_prompt(const SharedPromptOptions& options);

}  // namespace pensieve::bench
