#pragma once
// What pensieve-sim replays: conversations as token counts per turn (the
// user's new tokens and the reply's length), from a JSONL dataset
// (../shared/data/*.jsonl, bench::load_dataset) with chars/4 token estimates,
// as bench/pensieve-bench does. A system message joins the first turn; a
// conversation is cut before the turn that would pass the model's context.
#include "runtime/error.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace pensieve::sim {

struct SimTurn {
  std::int32_t user_tokens = 0;    // new prompt tokens of this turn (its template included)
  std::int32_t output_tokens = 0;  // the reply's length
  // The think time before this turn (a replayed schedule); negative: drawn
  // from the simulation's exponential think time.
  double think_before_s = -1;
};

struct SimConversation {
  std::vector<SimTurn> turns;
  double start_s = -1;  // a replayed schedule's start; negative: Poisson arrivals
};

struct Workload {
  std::string source;
  std::vector<SimConversation> conversations;
  std::size_t turns() const;
};

struct WorkloadOptions {
  std::int32_t max_context = 2048;
  std::int32_t max_output_tokens = 1024;  // longer replies are cut (as a max_tokens would)
  std::int32_t template_tokens = 8;       // role markers a chat template adds per turn
  std::size_t max_conversations = 0;      // 0: all; more than the data: the data repeated
};

Result<Workload> load_workload(const std::string& jsonl_path, const WorkloadOptions& options);

}  // namespace pensieve::sim
