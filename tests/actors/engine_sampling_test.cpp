// The GPU worker draws a batch's tokens on the host threads in parallel
// (PagedForward::for_each_host), each sequence with its own sampler and the
// drawing thread's scratch: a seeded request must get the same tokens alone
// and inside a batch, whatever thread drew them.
#include "tests/actors/engine_fixture.hpp"

#include <future>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

model::SamplingParams seeded(std::uint64_t seed) {
  model::SamplingParams p;
  p.temperature = 0.9f;
  p.top_p = 0.95f;
  p.top_k = 200;
  p.seed = seed;
  p.max_tokens = 12;
  p.ignore_eos = true;
  return p;
}

// Plays six conversations at once, then each alone, with seeded sampling;
// every turn must get the same tokens both ways.
void check_alone_equals_batched(const actors::EngineOptions& o) {
  asio::io_context io;  // outlives the engine, whose threads complete operations on it
  TempDir dir("sampling");
  auto engine = actors::Engine::create(generated_model(dir), o);
  REQUIRE(engine.has_value());
  const auto convs = user_turns("sharegpt.jsonl", 6, 2, 120);
  // All at once: one batch per iteration.
  std::vector<std::future<ConversationRecord>> futures;
  for (std::size_t i = 0; i < convs.size(); ++i)
    futures.push_back(asio::co_spawn(io, play_sampled(**engine, "b" + std::to_string(i), convs[i], seeded(100 + i)),
                                     asio::use_future));
  io.run();
  std::vector<ConversationRecord> batched;
  for (auto& f : futures) batched.push_back(f.get());
  // Then each alone.
  for (std::size_t i = 0; i < convs.size(); ++i) {
    INFO("conversation " << i);
    const ConversationRecord alone = run(io, play_sampled(**engine, "a" + std::to_string(i), convs[i], seeded(100 + i)));
    REQUIRE(alone.turns.size() == batched[i].turns.size());
    for (std::size_t t = 0; t < alone.turns.size(); ++t) {
      CHECK(alone.turns[t].tokens.size() == 12);
      CHECK(alone.turns[t].tokens == batched[i].turns[t].tokens);
    }
  }
  // Different seeds drew different replies (the draws are not greedy in disguise).
  CHECK(batched[0].turns[0].tokens != batched[1].turns[0].tokens);
}

}  // namespace

TEST_CASE("seeded sampling gives a request the same tokens alone and in a batch drawn on several threads",
          "[engine][sampling]") {
  actors::EngineOptions o;
  o.n_threads = 2;  // the draws split over the pass's two threads (32k vocabulary: above a fork's cost)
  check_alone_equals_batched(o);
}

TEST_CASE("with tensor-parallel ranks the worker's own sampling pool draws the same tokens alone and in a batch",
          "[engine][sampling][tp]") {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.tp = 2;  // no host threads of the backend's own: the GPU worker's pool draws
  check_alone_equals_batched(o);
}
