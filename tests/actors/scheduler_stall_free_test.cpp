// SchedulerCore's stall-free batching, plan by plan: decodes first, then
// prefill chunks of at most max_prefill_tokens, first come first served, so
// a new turn's prefill runs in the very next iteration beside the running
// decodes and a long prompt never stops them.
#include "actors/scheduler_core.hpp"

#include <catch2/catch.hpp>

#include <functional>
#include <numeric>

using namespace pensieve;
using namespace pensieve::actors;

namespace {

std::vector<std::int32_t> iota_tokens(std::size_t n, std::int32_t first = 10) {
  std::vector<std::int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TurnSpec turn(std::uint64_t id, std::vector<std::int32_t> tokens, int max_tokens = 50) {
  TurnSpec s{TurnId{id}, ConversationId{id}, std::move(tokens), {}, true};
  s.sampling.max_tokens = max_tokens;
  return s;
}

SchedulerCore make_core(std::int32_t max_prefill_tokens) {
  return SchedulerCore({.max_batch_tokens = 64, .max_prefill_tokens = max_prefill_tokens, .max_running = 8},
                       {.num_blocks = 256, .block_tokens = 4});
}

// Samples token 5 for every sequence that asks, finishing none.
void complete_all(SchedulerCore& core, const IterationPlan& plan, std::int64_t now,
                  std::vector<TurnUpdate>& events) {
  std::vector<SampleResult> samples;
  for (const auto& p : plan.sequences) {
    if (p.sample) samples.push_back({p.turn, {5, 0.0f, {}}, model::FinishReason::none});
  }
  core.complete(plan, samples, now, events);
}

// One planned sequence, as (turn, start position, tokens fed, samples).
struct Share {
  std::uint64_t turn;
  std::int32_t start_pos;
  std::size_t tokens;
  bool sample;
  bool operator==(const Share&) const = default;
};

std::vector<Share> shares(const IterationPlan& plan) {
  std::vector<Share> out;
  for (const auto& p : plan.sequences) out.push_back({p.turn.value, p.start_pos, p.tokens.size(), p.sample});
  return out;
}

// Plans and completes `iterations` iterations, returning each plan's
// shares; after_each (if any) runs after iteration i completes.
std::vector<std::vector<Share>> run_iterations(SchedulerCore& core, std::int64_t& now,
                                               std::vector<TurnUpdate>& events, int iterations,
                                               const std::function<void(int)>& after_each = {}) {
  std::vector<std::vector<Share>> got;
  for (int i = 0; i < iterations; ++i) {
    auto plan = core.plan(++now, events);
    got.push_back(shares(plan));
    complete_all(core, plan, ++now, events);
    if (after_each) after_each(i);
  }
  return got;
}

}  // namespace

TEST_CASE("a new turn's prefill runs in the very next iteration beside the running decodes", "[scheduler]") {
  SchedulerCore core = make_core(16);
  std::vector<TurnUpdate> events;
  std::int64_t now = 1;
  REQUIRE(core.admit(turn(1, iota_tokens(3)), now) == AdmitStatus::admitted);
  REQUIRE(core.admit(turn(2, iota_tokens(5)), now) == AdmitStatus::admitted);
  auto first = core.plan(++now, events);
  CHECK(shares(first) == std::vector<Share>{{1, 0, 3, true}, {2, 0, 5, true}});
  complete_all(core, first, ++now, events);
  // Turn 3 arrives while 1 and 2 decode: its 10 tokens fit the chunk.
  REQUIRE(core.admit(turn(3, iota_tokens(10)), now) == AdmitStatus::admitted);
  auto second = core.plan(++now, events);
  CHECK(shares(second) == std::vector<Share>{{1, 3, 1, true}, {2, 5, 1, true}, {3, 0, 10, true}});
  CHECK(second.decode_tokens == 2);
  CHECK(second.prefill_tokens == 10);
}

TEST_CASE("a long prompt is chunked at max_prefill_tokens and the decodes run in every iteration meanwhile",
          "[scheduler]") {
  SchedulerCore core = make_core(16);
  std::vector<TurnUpdate> events;
  std::int64_t now = 1;
  REQUIRE(core.admit(turn(1, iota_tokens(3)), now) == AdmitStatus::admitted);
  run_iterations(core, now, events, 1);
  // 40 tokens would fit the 64-token batch whole; the chunk is 16.
  REQUIRE(core.admit(turn(2, iota_tokens(40)), now) == AdmitStatus::admitted);
  CHECK(run_iterations(core, now, events, 4) == std::vector<std::vector<Share>>{
                   {{1, 3, 1, true}, {2, 0, 16, false}},
                   {{1, 4, 1, true}, {2, 16, 16, false}},
                   {{1, 5, 1, true}, {2, 32, 8, true}},  // its first token: the third iteration
                   {{1, 6, 1, true}, {2, 40, 1, true}},
               });
}

TEST_CASE("without a prefill chunk a prompt takes whatever the batch leaves", "[scheduler]") {
  SchedulerCore core = make_core(0);
  std::vector<TurnUpdate> events;
  std::int64_t now = 1;
  REQUIRE(core.admit(turn(1, iota_tokens(3)), now) == AdmitStatus::admitted);
  run_iterations(core, now, events, 1);
  REQUIRE(core.admit(turn(2, iota_tokens(70)), now) == AdmitStatus::admitted);
  auto plan = core.plan(++now, events);
  CHECK(shares(plan) == std::vector<Share>{{1, 3, 1, true}, {2, 0, 63, false}});
}

TEST_CASE("waiting prefills are served first come first served: a short turn waits behind a long one",
          "[scheduler]") {
  SchedulerCore core = make_core(16);
  std::vector<TurnUpdate> events;
  std::int64_t now = 1;
  REQUIRE(core.admit(turn(1, iota_tokens(40)), now) == AdmitStatus::admitted);
  REQUIRE(core.admit(turn(2, iota_tokens(4)), now) == AdmitStatus::admitted);
  REQUIRE(core.admit(turn(3, iota_tokens(6)), now) == AdmitStatus::admitted);
  CHECK(run_iterations(core, now, events, 3) == std::vector<std::vector<Share>>{
                   {{1, 0, 16, false}},
                   {{1, 16, 16, false}},
                   // Turn 1's last 8, then 2 whole, then what is left of the chunk for 3.
                   {{1, 32, 8, true}, {2, 0, 4, true}, {3, 0, 4, false}},
               });
}

TEST_CASE("a stream of new turns does not starve a turn that is still prefilling", "[scheduler]") {
  SchedulerCore core = make_core(16);
  std::vector<TurnUpdate> events;
  std::int64_t now = 1;
  REQUIRE(core.admit(turn(1, iota_tokens(12)), now) == AdmitStatus::admitted);
  REQUIRE(core.admit(turn(2, iota_tokens(30)), now) == AdmitStatus::admitted);
  // A short new turn arrives after every iteration.
  const auto got = run_iterations(core, now, events, 3, [&](int i) {
    REQUIRE(core.admit(turn(10 + std::uint64_t(i), iota_tokens(6)), now) == AdmitStatus::admitted);
  });
  CHECK(got == std::vector<std::vector<Share>>{
                   {{1, 0, 12, true}, {2, 0, 4, false}},
                   // Turn 2 arrived before 10: its chunk comes first.
                   {{1, 12, 1, true}, {2, 4, 16, false}},
                   {{1, 13, 1, true}, {2, 20, 10, true}, {10, 0, 6, true}},
               });
}
