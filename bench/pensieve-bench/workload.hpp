#pragma once
// The work a benchmark run replays, fixed by the seed before any request is
// sent, so that every target and every rate of a sweep gets the same
// conversations, the same arrival pattern, the same think times and the same
// output lengths. Pure: no clock, no I/O.
#include "bench/pensieve-bench/dataset.hpp"

#include <cstdint>
#include <vector>

namespace pensieve::bench {

// One request of a conversation: the messages it adds to the history (any
// system messages, then the user message) and its fixed output length.
struct PlannedTurn {
  std::vector<DatasetMessage> new_messages;
  std::int32_t max_tokens = 1;
  double think_s = 0.0;  // the user's pause after the previous answer (0 for the first turn)
};

struct PlannedConversation {
  std::size_t dataset_index = 0;  // into the dataset (conversations repeat when N > its size)
  std::string id;                 // the dataset's id
  double unit_arrival_s = 0.0;    // arrival time at rate 1/s; divide by the rate
  std::vector<PlannedTurn> turns;
};

struct WorkloadParams {
  std::size_t conversations = 0;  // 0: every conversation of the dataset once
  double think_time_mean_s = 0.0;
  std::int32_t max_tokens_cap = 128;
  std::uint64_t seed = 1;
};

struct Workload {
  std::vector<PlannedConversation> conversations;
  std::size_t requests() const;
};

// Conversation i is dataset entry i mod size, in file order. Arrivals are a
// Poisson process (exponential gaps of mean 1 s, scaled by 1/rate when run);
// think times are exponential with the given mean, drawn from a stream of
// their own per conversation; max_tokens = ceil(assistant chars / 4), at
// least 1, at most the cap (the cap when the dataset has no reply).
Workload make_workload(const std::vector<Conversation>& dataset, const WorkloadParams& params);

// Exponential(1) variate from 64 random bits, defined here rather than by
// std::exponential_distribution (whose algorithm differs between standard
// libraries) so that a seed means the same schedule everywhere.
double unit_exponential(std::uint64_t bits);

}  // namespace pensieve::bench
