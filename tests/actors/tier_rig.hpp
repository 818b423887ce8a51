#pragma once
// Drives a SchedulerCore step by step against FakeSwapEngine: plan, execute
// the transfers and the forward pass (checking every KV read), sample, and
// report the transfers (at once, or when the test says).
#include "actors/scheduler_core.hpp"
#include "tests/actors/fake_swap_engine.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <numeric>
#include <vector>

namespace pensieve::testing {

using namespace pensieve::actors;

inline std::vector<std::int32_t> token_run(std::size_t n, std::int32_t first) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// What a rig's core is built from: the scheduler's options and the KV
// cache's sizes and options.
struct TierSetup {
  SchedulerOptions scheduler;
  KvCacheSizes sizes;
  KvCacheOptions kv_cache;
};

struct TierRig {
  explicit TierRig(TierSetup l)
      : limits(l),
        core(l.scheduler, l.sizes, l.kv_cache),
        swap(l.sizes.num_blocks, l.sizes.host_slots, l.sizes.host_slots > 0 ? l.sizes.disk_slots : 0,
             l.sizes.block_tokens) {}

  TurnId admit(std::uint64_t conversation, std::vector<std::int32_t> tokens, int max_tokens) {
    const TurnId turn{next_turn++};
    TurnSpec spec{turn, ConversationId{conversation}, tokens, {}, true};
    spec.sampling.max_tokens = max_tokens;
    REQUIRE(core.admit(std::move(spec), now) == AdmitStatus::admitted);
    history[turn] = std::move(tokens);
    return turn;
  }

  // The history after `turn` plus a new message of `n` tokens.
  std::vector<std::int32_t> next_message(TurnId turn, std::size_t n, std::int32_t first) const {
    auto t = history.at(turn);
    auto more = token_run(n, first);
    t.insert(t.end(), more.begin(), more.end());
    return t;
  }

  IterationPlan step() {
    auto plan = core.plan(++now, events);
    swap.execute(plan, history);
    std::vector<SampleResult> samples;
    for (const auto& p : plan.sequences) {
      fed[p.turn] += std::int64_t(p.tokens.size());
      if (p.new_sampler) limit[p.turn] = p.new_sampler->max_tokens;
      if (!p.sample) continue;
      const int n = ++generated[p.turn];
      const std::int32_t token = std::int32_t(500 + 10 * p.turn.value + std::uint64_t(n));
      samples.push_back({p.turn, {token, 0.0f, {}},
                         n >= limit[p.turn] ? model::FinishReason::length : model::FinishReason::none});
      history[p.turn].push_back(token);
    }
    core.complete(plan, samples, ++now, events);
    if (auto_report) core.transfers_done(swap.report_all());
    return plan;
  }

  // Steps until no turn is left (and, reporting, no transfer is in flight).
  std::vector<IterationPlan> run_to_end(int max_steps = 1000) {
    std::vector<IterationPlan> plans;
    for (int i = 0; i < max_steps && (core.has_work() || (auto_report && !swap.idle())); ++i) {
      plans.push_back(step());
    }
    REQUIRE_FALSE(core.has_work());
    return plans;
  }

  // Runs one turn of `conversation` to its end.
  TurnId run_turn(std::uint64_t conversation, std::vector<std::int32_t> tokens, int max_tokens) {
    const TurnId t = admit(conversation, std::move(tokens), max_tokens);
    run_to_end();
    return t;
  }

  std::vector<ChunkTier> tiers(std::uint64_t conversation) const {
    std::vector<ChunkTier> out;
    for (const ChunkView& c : core.cached_chunks(ConversationId{conversation})) out.push_back(c.tier);
    return out;
  }

  TierSetup limits;
  SchedulerCore core;
  FakeSwapEngine swap;
  std::int64_t now = 0;
  std::uint64_t next_turn = 1;
  bool auto_report = true;
  std::map<TurnId, std::vector<std::int32_t>> history;
  std::map<TurnId, int> generated, limit;
  std::map<TurnId, std::int64_t> fed;
  std::vector<TurnUpdate> events;
};

// Tiny tiers: blocks of 4 tokens.
inline TierSetup tiny_tiers(std::int32_t device, std::int32_t host, std::int32_t disk,
                            EvictionPolicyKind policy = EvictionPolicyKind::cost_aware) {
  TierSetup l;
  l.scheduler.max_batch_tokens = 64;
  l.scheduler.max_running = 4;
  l.scheduler.max_admitted = 16;
  l.sizes.num_blocks = device;
  l.sizes.block_tokens = 4;
  l.sizes.host_slots = host;
  l.sizes.disk_slots = disk;
  l.kv_cache.eviction_policy = policy;
  return l;
}

}  // namespace pensieve::testing
