#pragma once
// Messages to the GPU worker: run one iteration's batch. The plan says which
// tokens to feed where in the KV pool (the scheduler's block decisions) and
// which samplers to create or release; the reply carries one sampled token
// per sequence that asked for one.
#include "actors/scheduler_core.hpp"
#include "runtime/event.hpp"
#include "runtime/reply.hpp"

#include <string>
#include <variant>
#include <vector>

namespace pensieve::actors {

struct BatchOutcome {
  std::vector<SampleResult> samples;  // in plan order, sequences with sample == true
  std::string error;                  // non-empty: the batch failed, nothing was sampled
  double compute_ms = 0.0;
  std::int64_t sampled_ns = 0;  // steady clock when the last sample was drawn: the tokens' computed time
};

struct RunBatch {
  IterationPlan plan;
  rt::Reply<BatchOutcome> reply;
  // The swap engine's per-layer events for plan.transfers.swap_in: layer l
  // of the pass starts once layer_ready[l] has completed (empty: no wait).
  std::vector<rt::Event> layer_ready;
};

using GpuWorkerMsg = std::variant<RunBatch>;

}  // namespace pensieve::actors
