// SchedulerCore, step by step: admission control, unified batches with
// chunked prefill under the token budget, KV reuse across turns (longest
// common prefix), the stateless mode, eviction and preemption.
#include "actors/scheduler_core.hpp"

#include <catch2/catch.hpp>

#include <numeric>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

std::vector<std::int32_t> iota_tokens(std::size_t n, std::int32_t first = 10) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TurnSpec turn(std::uint64_t id, std::uint64_t conversation, std::vector<std::int32_t> tokens, int max_tokens = 4) {
  TurnSpec s{TurnId{id}, ConversationId{conversation}, std::move(tokens), {}, true};
  s.sampling.max_tokens = max_tokens;
  return s;
}

// Runs iterations, answering every sample with `token` (finishing at max
// tokens like a sampler would), until no work is left; returns all events.
std::vector<TurnUpdate> run_to_end(SchedulerCore& core, std::int64_t& now,
                                   std::vector<IterationPlan>* plans = nullptr,
                                   std::int32_t token = 7) {
  std::vector<TurnUpdate> events;
  std::map<TurnId, int> generated;
  std::map<TurnId, int> limit;
  for (int guard = 0; core.has_work() && guard < 10000; ++guard) {
    auto plan = core.plan(++now, events);
    if (plan.empty()) continue;
    std::vector<SampleResult> samples;
    for (const auto& p : plan.sequences) {
      if (p.new_sampler) limit[p.turn] = p.new_sampler->max_tokens;
      if (!p.sample) continue;
      const int n = ++generated[p.turn];
      samples.push_back({p.turn, {token, 0.0f, {}},
                         n >= limit[p.turn] ? model::FinishReason::length : model::FinishReason::none});
    }
    core.complete(plan, samples, ++now, events);
    if (plans) plans->push_back(std::move(plan));
  }
  return events;
}

template <class Kind>
int count(const std::vector<TurnUpdate>& events) {
  return int(std::count_if(events.begin(), events.end(), [&](const TurnUpdate& u) {
    return std::holds_alternative<Kind>(u.event);
  }));
}

}  // namespace

TEST_CASE("admission refuses turns beyond the limit and accepts the limit's worth", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 8, .max_admitted = 5}, {.num_blocks = 100, .block_tokens = 4});
  int admitted = 0, overloaded = 0;
  for (std::uint64_t i = 1; i <= 50; ++i) {
    switch (core.admit(turn(i, i, iota_tokens(6)), 0)) {
      case AdmitStatus::admitted: ++admitted; break;
      case AdmitStatus::overloaded: ++overloaded; break;
      case AdmitStatus::too_large: FAIL("too large");
      case AdmitStatus::pin_refused: FAIL("pin refused");
    }
  }
  CHECK(admitted == 5);
  CHECK(overloaded == 45);
  CHECK(core.stats().refused_overloaded == 45);
  std::int64_t now = 0;
  auto events = run_to_end(core, now);
  CHECK(count<TurnDone>(events) == 5);
  CHECK(core.admit(turn(99, 99, iota_tokens(6)), now) == AdmitStatus::admitted);  // room again
}

TEST_CASE("a turn that could never fit the KV pool is refused as too large", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64}, {.num_blocks = 4, .block_tokens = 4});
  CHECK(core.admit(turn(1, 1, iota_tokens(10), 7), 0) == AdmitStatus::too_large);  // 17 tokens > 16 slots
  CHECK(core.admit(turn(2, 2, iota_tokens(10), 6), 0) == AdmitStatus::admitted);
}

TEST_CASE("each iteration decodes every running sequence and fills the rest with prefill chunks", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 8, .max_running = 8, .max_admitted = 8}, {.num_blocks = 64, .block_tokens = 4});
  REQUIRE(core.admit(turn(1, 1, iota_tokens(3), 10), 0) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  std::int64_t now = 1;
  auto first = core.plan(now, events);
  REQUIRE(first.sequences.size() == 1);
  CHECK(first.sequences[0].tokens.size() == 3);
  CHECK(first.sequences[0].sample);
  core.complete(first, std::vector<SampleResult>{{TurnId{1}, {5, 0, {}}, model::FinishReason::none}}, now, events);
  // A long prompt arrives: turn 1 decodes one token, the prompt takes the other 7.
  REQUIRE(core.admit(turn(2, 2, iota_tokens(20), 4), now) == AdmitStatus::admitted);
  auto second = core.plan(now, events);
  REQUIRE(second.sequences.size() == 2);
  CHECK(second.sequences[0].turn == TurnId{1});
  CHECK(second.sequences[0].tokens == std::vector<std::int32_t>{5});
  CHECK(second.sequences[0].start_pos == 3);
  CHECK(second.sequences[1].turn == TurnId{2});
  CHECK(second.sequences[1].tokens.size() == 7);
  CHECK_FALSE(second.sequences[1].sample);  // mid-prompt chunk
  CHECK(second.decode_tokens == 1);
  CHECK(second.prefill_tokens == 7);
  core.complete(second, std::vector<SampleResult>{{TurnId{1}, {6, 0, {}}, model::FinishReason::none}}, now, events);
  auto third = core.plan(now, events);
  REQUIRE(third.sequences.size() == 2);
  CHECK(third.sequences[1].start_pos == 7);
  CHECK(third.sequences[1].tokens.size() == 7);
}

TEST_CASE("the next turn of a conversation computes only what its cached KV does not cover", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4}, {.num_blocks = 64, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 7, iota_tokens(10), 3), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  // The history: 10 prompt tokens and 3 generated (the last never fed).
  auto cached = core.cached_tokens(ConversationId{7});
  REQUIRE(cached);
  std::vector<std::int32_t> history = iota_tokens(10);
  history.insert(history.end(), {7, 7});
  CHECK(*cached == history);
  // Turn 2 resends the history plus the last generated token and a new message.
  std::vector<std::int32_t> next = history;
  next.insert(next.end(), {7, 100, 101, 102});
  REQUIRE(core.admit(turn(2, 7, next, 2), now) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  auto plan = core.plan(++now, events);
  REQUIRE(plan.sequences.size() == 1);
  CHECK(plan.sequences[0].start_pos == 12);
  CHECK(plan.sequences[0].tokens == std::vector<std::int32_t>{7, 100, 101, 102});
  REQUIRE(count<TurnStarted>(events) == 1);
  REQUIRE(std::holds_alternative<TurnStarted>(events[0].event));
  CHECK(std::get<TurnStarted>(events[0].event).cached_tokens == 12);
}

TEST_CASE("an edited history reuses only the common prefix, never stale KV", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4}, {.num_blocks = 64, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 7, iota_tokens(10), 2), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  auto edited = iota_tokens(10);
  edited[6] = 999;
  REQUIRE(core.admit(turn(2, 7, edited, 2), now) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  auto plan = core.plan(++now, events);
  REQUIRE(plan.sequences.size() == 1);
  CHECK(plan.sequences[0].start_pos == 6);
  CHECK(plan.sequences[0].tokens.front() == 999);
}

TEST_CASE("the stateless mode keeps no KV after a turn", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4, .keep_kv = false},
                     {.num_blocks = 64, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 7, iota_tokens(10), 3), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  CHECK_FALSE(core.cached_tokens(ConversationId{7}));
  CHECK(core.allocator().free_blocks() == 64);
}

TEST_CASE("idle conversations lose their KV before a running sequence is preempted", "[scheduler]") {
  // 6 blocks of 4 tokens. Conversation 1 finishes and keeps 3 blocks; turn 2
  // needs 5 blocks: conversation 1's KV is evicted, nothing is preempted.
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4}, {.num_blocks = 6, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 1, iota_tokens(10), 2), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  REQUIRE(core.cached_tokens(ConversationId{1}));
  REQUIRE(core.admit(turn(2, 2, iota_tokens(17), 2), now) == AdmitStatus::admitted);
  run_to_end(core, now);
  CHECK_FALSE(core.cached_tokens(ConversationId{1}));
  CHECK(core.stats().evicted_conversations == 1);
  CHECK(core.stats().preemptions == 0);
}

TEST_CASE("when KV runs out the latest running sequence is preempted and recomputed", "[scheduler]") {
  // 4 blocks of 4 tokens; two turns of 6 prompt tokens and 6 generated each
  // need 3 blocks apiece at the end: one must make room for the other.
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4, .keep_kv = false},
                     {.num_blocks = 4, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 1, iota_tokens(6), 6), now) == AdmitStatus::admitted);
  REQUIRE(core.admit(turn(2, 2, iota_tokens(6, 50), 6), now) == AdmitStatus::admitted);
  std::vector<IterationPlan> plans;
  auto events = run_to_end(core, now, &plans);
  CHECK(count<TurnDone>(events) == 2);
  CHECK(core.stats().preemptions >= 1);
  // Turn 2 was recomputed: some later plan feeds it from position 0 again,
  // with its generated tokens, without a new sampler.
  bool recomputed = false;
  for (std::size_t i = 1; i < plans.size(); ++i) {
    for (const auto& p : plans[i].sequences) {
      if (p.turn == TurnId{2} && p.start_pos == 0 && p.tokens.size() > 6) {
        recomputed = true;
        CHECK_FALSE(p.new_sampler);
      }
    }
  }
  CHECK(recomputed);
  // Every turn got its 6 tokens, each exactly once.
  std::map<TurnId, int> tokens;
  for (const auto& e : events) {
    if (std::holds_alternative<TurnDelta>(e.event)) ++tokens[e.turn];
  }
  CHECK(tokens[TurnId{1}] == 6);
  CHECK(tokens[TurnId{2}] == 6);
  CHECK(core.allocator().free_blocks() == 4);
}

TEST_CASE("a cancelled turn ends at the next plan and keeps the KV of what it fed", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4}, {.num_blocks = 64, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 3, iota_tokens(5), 50), now) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  for (int step = 0; step < 3; ++step) {
    auto plan = core.plan(++now, events);
    core.complete(plan, std::vector<SampleResult>{{TurnId{1}, {8, 0, {}}, model::FinishReason::none}}, now, events);
  }
  core.cancel(TurnId{1});
  auto plan = core.plan(++now, events);
  CHECK(plan.empty());
  CHECK(plan.released_samplers == std::vector<TurnId>{TurnId{1}});
  const auto* done = std::get_if<TurnDone>(&events.back().event);
  REQUIRE(done != nullptr);
  CHECK(done->finish == model::FinishReason::none);
  // 5 prompt tokens and 2 of the 3 generated were fed; the third was not.
  auto cached = core.cached_tokens(ConversationId{3});
  REQUIRE(cached);
  CHECK(cached->size() == 7);
  CHECK_FALSE(core.has_work());
  // That plan runs nothing, so the worker never sees it: the release goes with the next plan.
  core.carry_over(plan);
  CHECK(plan.released_samplers.empty());
  REQUIRE(core.admit(turn(2, 4, iota_tokens(5), 2), now) == AdmitStatus::admitted);
  auto next = core.plan(++now, events);
  CHECK_FALSE(next.empty());
  CHECK(next.released_samplers == std::vector<TurnId>{TurnId{1}});
}

TEST_CASE("dropping a conversation frees its KV, also when its turn is still running", "[scheduler]") {
  SchedulerCore core({.max_batch_tokens = 64, .max_running = 4, .max_admitted = 4}, {.num_blocks = 16, .block_tokens = 4});
  std::int64_t now = 0;
  REQUIRE(core.admit(turn(1, 3, iota_tokens(5), 3), now) == AdmitStatus::admitted);
  std::vector<TurnUpdate> events;
  auto plan = core.plan(++now, events);
  core.drop_conversation(ConversationId{3});
  core.complete(plan, std::vector<SampleResult>{{TurnId{1}, {8, 0, {}}, model::FinishReason::none}}, now, events);
  run_to_end(core, now);
  CHECK_FALSE(core.cached_tokens(ConversationId{3}));
  CHECK(core.allocator().free_blocks() == 16);
}
