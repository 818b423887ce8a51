#include "bench/pensieve-bench/workload.hpp"

#include <algorithm>
#include <cmath>
#include <random>

namespace pensieve::bench {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::int32_t reply_tokens(std::size_t chars, std::int32_t cap) {
  const auto tokens = std::int64_t((chars + 3) / 4);
  return std::int32_t(std::clamp<std::int64_t>(tokens, 1, cap));
}

std::vector<PlannedTurn> plan_turns(const Conversation& c, std::int32_t cap, double think_mean_s,
                                    std::mt19937_64& think_rng) {
  std::vector<PlannedTurn> turns;
  std::vector<DatasetMessage> pending;
  for (std::size_t i = 0; i < c.turns.size(); ++i) {
    const DatasetMessage& m = c.turns[i];
    if (m.role == "assistant") continue;  // replaced by the server's own reply
    pending.push_back(m);
    if (m.role != "user") continue;
    PlannedTurn t;
    t.new_messages = std::move(pending);
    pending.clear();
    const bool has_reply = i + 1 < c.turns.size() && c.turns[i + 1].role == "assistant";
    t.max_tokens = has_reply ? reply_tokens(utf8_chars(c.turns[i + 1].content), cap) : cap;
    if (!turns.empty() && think_mean_s > 0) t.think_s = think_mean_s * unit_exponential(think_rng());
    turns.push_back(std::move(t));
  }
  return turns;
}

}  // namespace

double unit_exponential(std::uint64_t bits) {
  // u in (0, 1): 53 random bits, centred in their interval, so log(u) is finite.
  const double u = (double(bits >> 11) + 0.5) * 0x1p-53;
  return -std::log(u);
}

std::size_t Workload::requests() const {
  std::size_t n = 0;
  for (const auto& c : conversations) n += c.turns.size();
  return n;
}

Workload make_workload(const std::vector<Conversation>& dataset, const WorkloadParams& params) {
  Workload w;
  if (dataset.empty()) return w;
  const std::size_t n = params.conversations ? params.conversations : dataset.size();
  std::mt19937_64 arrivals(splitmix64(params.seed));
  double t = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    PlannedConversation pc;
    pc.dataset_index = i % dataset.size();
    pc.id = dataset[pc.dataset_index].id;
    // The first conversation arrives at time 0; then exponential gaps.
    if (i > 0) t += unit_exponential(arrivals());
    pc.unit_arrival_s = t;
    std::mt19937_64 think(splitmix64(params.seed ^ splitmix64(i + 1)));
    pc.turns = plan_turns(dataset[pc.dataset_index], params.max_tokens_cap, params.think_time_mean_s, think);
    w.conversations.push_back(std::move(pc));
  }
  return w;
}

}  // namespace pensieve::bench
