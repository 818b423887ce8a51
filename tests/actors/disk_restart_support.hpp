#pragma once
// For the engine tests across a restart on one history folder and disk KV
// tier: conversation "c0"'s turns from an engine that recomputes everything,
// and c0's last turn in a fresh engine, with what it took from the tiers.
#include "tests/actors/engine_fixture.hpp"
#include "tests/tiny_model.hpp"

namespace pensieve::testing {

// The greedy tokens of every story turn of "c0" in an engine whose KV stays
// on the device: what a restarted engine must reproduce.
inline std::vector<std::vector<std::int32_t>> straight_turns(asio::io_context& io) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_block_tokens = 16;
  o.kv_cache_mb = 64;
  auto e = make_stories_engine(o);
  REQUIRE(e->create_conversation("t", "c0").has_value());
  std::vector<std::vector<std::int32_t>> out;
  for (const auto& text : story_turns()) out.push_back(run(io, greedy_turn_tokens(*e, "c0", text)));
  return out;
}

struct Restarted {
  std::vector<std::int32_t> tokens;
  actors::TurnDone done;
  actors::SchedulerStats stats;
};

// The last story turn of c0 in a fresh engine on `o`'s folders.
inline Restarted last_turn(asio::io_context& io, const actors::EngineOptions& o) {
  auto e = make_stories_engine(o);
  Restarted r;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    for (const auto& t : d.tokens) r.tokens.push_back(t.token);
    co_return true;
  };
  std::vector<model::ChatMessage> messages{{"user", story_turns()[2]}};
  auto done = run(io, send_turn(*e, "t", "c0", std::move(messages), greedy(16), sink));
  REQUIRE(done.has_value());
  r.done = *done;
  r.stats = run(io, e->stats());
  return r;
}

}  // namespace pensieve::testing
