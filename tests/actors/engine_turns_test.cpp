// Engine turns beyond the happy path: cancel at a random point keeps history
// and KV consistent and the next turn continues exactly; overload refuses
// clearly; bad input is refused without touching the conversation; deleted
// conversations and abandoned turns leave nothing behind.
#include "gpu/model/cpu_forward.hpp"
#include "tests/actors/engine_fixture.hpp"

#include <algorithm>
#include <random>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::unique_ptr<actors::Engine> make_engine(bool stateful, std::int32_t max_queued = 256) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.scheduler.keep_kv = stateful;
  o.scheduler.max_admitted = max_queued;
  o.kv_cache_mb = 16;
  // F32 KV: the oracle below is the contiguous F32 pass, matched bit for bit.
  o.kv_dtype = kv::KvDType::f32;
  auto e = actors::Engine::create(stories_model(), o);
  REQUIRE(e.has_value());
  return std::move(*e);
}

// Greedy continuation of `prefix` with the contiguous-cache forward pass: the
// oracle that knows nothing of the engine, its KV reuse or its batches.
std::vector<std::int32_t> greedy_oracle(const std::vector<std::int32_t>& prefix, std::size_t steps) {
  auto fwd = model::CpuForward::create(stories_model(), {.n_threads = 1});
  REQUIRE(fwd.has_value());
  auto kv = fwd->make_kv_cache(std::int32_t(prefix.size() + steps + 1));
  std::vector<std::int32_t> out;
  model::ForwardSequence seq{prefix, 0, &kv, false};
  auto r = fwd->forward(std::span(&seq, 1));
  REQUIRE(r.has_value());
  for (std::size_t i = 0; i < steps; ++i) {
    auto row = r->last(0);
    const auto next = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    out.push_back(next);
    model::ForwardSequence d{std::span(&next, 1), kv.size_tokens(), &kv, false};
    r = fwd->forward(std::span(&d, 1));
    REQUIRE(r.has_value());
  }
  return out;
}

asio::awaitable<actors::TurnResult> turn(actors::Engine& e, const std::string& id, std::string text,
                                         model::SamplingParams sampling, int stop_after_tokens = -1,
                                         std::vector<std::int32_t>* tokens = nullptr) {
  int seen = 0;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    if (tokens) {
      for (const auto& t : d.tokens) tokens->push_back(t.token);
    }
    seen += int(d.tokens.size());
    co_return stop_after_tokens < 0 || seen < stop_after_tokens;
  };
  std::vector<model::ChatMessage> messages{{"user", std::move(text)}};
  co_return co_await send_turn(e, "t", id, std::move(messages), std::move(sampling), sink);
}

}  // namespace

TEST_CASE("after a cancel at a random point, history and KV agree and the next turn continues exactly",
          "[engine][cancel]") {
  std::mt19937 rng(20261130);
  // The first turn cannot end before the cancel does: it ignores EOS and
  // asks for 400 tokens, while the client leaves after at most 24 of them.
  // Deltas carry as many tokens as were generated while the client read
  // the last one, so the point is counted in tokens, not deltas.
  constexpr std::int32_t kFirstTurnTokens = 400;
  for (int trial = 0; trial < 3; ++trial) {
    const int stop_after = std::uniform_int_distribution<int>(1, 24)(rng);
    INFO("cancel after " << stop_after << " tokens");
    asio::io_context io;
    auto engine = make_engine(true);
    REQUIRE(engine->create_conversation("t", "c").has_value());
    auto long_turn = greedy(kFirstTurnTokens);
    long_turn.ignore_eos = true;
    const auto first = run(io, turn(*engine, "c", "Once upon a time there was a", long_turn, stop_after));
    REQUIRE(first.has_value());
    CHECK(first->cancelled);
    CHECK(first->completion_tokens >= stop_after);
    CHECK(first->completion_tokens < kFirstTurnTokens);
    const auto h1 = run(io, engine->snapshot("t", "c"));
    REQUIRE(h1.has_value());
    CHECK(h1->turns == 1);
    std::vector<std::int32_t> t2;
    const auto second = run(io, turn(*engine, "c", "and then", greedy(12), -1, &t2));
    REQUIRE(second.has_value());
    CHECK_FALSE(second->cancelled);
    // The second turn reused the KV of the first (up to what it had fed)...
    CHECK(second->cached_tokens > 0);
    CHECK(second->cached_tokens <= std::int32_t(h1->tokens.size()));
    // ...and continued exactly as a fresh greedy run over the history does.
    const auto h2 = run(io, engine->snapshot("t", "c"));
    REQUIRE(h2.has_value());
    REQUIRE(std::equal(h1->tokens.begin(), h1->tokens.end(), h2->tokens.begin()));
    const std::vector<std::int32_t> prompt(h2->tokens.begin(), h2->tokens.begin() + second->prompt_tokens);
    REQUIRE(std::size_t(second->completion_tokens) == t2.size());
    const auto expected = greedy_oracle(prompt, t2.size());
    CHECK(t2 == expected);
  }
}

TEST_CASE("ten times the queue limit at once: the limit is admitted, the rest refused, the admitted finish",
          "[engine][overload]") {
  asio::io_context io;
  auto engine = make_engine(false, 4);
  std::vector<actors::TurnStream> streams;
  for (int i = 0; i < 40; ++i) {
    actors::TurnRequest r =
        stateless_request({{"user", "Tell me a story number " + std::to_string(i)}}, greedy(48));
    r.sampling.ignore_eos = true;  // every admitted turn runs its 48 tokens
    auto s = engine->start(io.get_executor(), std::move(r));
    REQUIRE(s.has_value());
    streams.push_back(std::move(*s));
  }
  auto drain = [&]() -> asio::awaitable<std::pair<int, int>> {
    int finished = 0, overloaded = 0;
    for (auto& s : streams) {
      for (;;) {
        auto d = co_await s.next();
        if (!d) break;
      }
      if (s.result().has_value()) {
        ++finished;
        CHECK(s.result()->completion_tokens == 48);
      } else if (s.result().error().kind == actors::TurnErrorKind::overloaded) {
        ++overloaded;
        CHECK_THAT(s.result().error().message, Catch::Contains("overloaded"));
      }
    }
    co_return std::pair{finished, overloaded};
  };
  const auto [finished, overloaded] = run(io, drain());
  CHECK(finished == 4);
  CHECK(overloaded == 36);
  const auto stats = run(io, engine->stats());
  CHECK(stats.refused_overloaded == 36);
  CHECK(stats.running == 0);
  CHECK(stats.free_blocks == stats.num_blocks);
}

TEST_CASE("bad turns are refused with a clear error and leave the conversation unchanged", "[engine][errors]") {
  asio::io_context io;
  auto engine = make_engine(true);
  REQUIRE(engine->create_conversation("t", "c").has_value());
  SECTION("unknown conversation") {
    const auto r = run(io, turn(*engine, "nope", "hi", greedy(4)));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == actors::TurnErrorKind::not_found);
    // Tenants are separate namespaces.
    CHECK_FALSE(engine->find_conversation("other", "c").has_value());
  }
  SECTION("invalid sampling") {
    auto bad = greedy(4);
    bad.temperature = -1.0f;
    actors::TurnSink sink = [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; };
    const auto r = run(io, send_turn(*engine, "t", "c", {{"user", "hi"}}, bad, sink));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == actors::TurnErrorKind::invalid_request);
    CHECK_THAT(r.error().message, Catch::Contains("temperature"));
  }
  SECTION("longer than the model's context") {
    const auto r = run(io, turn(*engine, "c", std::string(600, 'a'), greedy(4)));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().kind == actors::TurnErrorKind::invalid_request);
    CHECK_THAT(r.error().message, Catch::Contains("context is 512 tokens"));
  }
  SECTION("bad and duplicate conversation ids") {
    CHECK(engine->create_conversation("t", "has space").error().kind == actors::TurnErrorKind::invalid_request);
    CHECK(engine->create_conversation("t", "c").error().kind == actors::TurnErrorKind::invalid_request);
    CHECK(engine->create_conversation("other", "c").has_value());  // another tenant's namespace
  }
  const auto snap = run(io, engine->snapshot("t", "c"));
  REQUIRE(snap.has_value());
  CHECK(snap->turns == 0);
  CHECK(snap->tokens.empty());
  // And the conversation still works.
  const auto ok = run(io, turn(*engine, "c", "hello", greedy(4)));
  CHECK(ok.has_value());
}

TEST_CASE("deleting a conversation frees its KV and forgets it", "[engine][store]") {
  asio::io_context io;
  auto engine = make_engine(true);
  REQUIRE(engine->create_conversation("t", "a").has_value());
  REQUIRE(engine->create_conversation("t", "b").has_value());
  REQUIRE(run(io, turn(*engine, "a", "hello there", greedy(8))).has_value());
  auto before = run(io, engine->stats());
  CHECK(before.cached_conversations == 1);
  CHECK(before.free_blocks < before.num_blocks);
  CHECK(engine->list_conversations("t").size() == 2);
  CHECK(engine->delete_conversation("t", "a"));
  CHECK_FALSE(engine->delete_conversation("t", "a"));
  auto after = run(io, engine->stats());
  CHECK(after.cached_conversations == 0);
  CHECK(after.free_blocks == after.num_blocks);
  CHECK(engine->list_conversations("t").size() == 1);
  const auto gone = run(io, turn(*engine, "a", "hi", greedy(4)));
  REQUIRE_FALSE(gone.has_value());
  CHECK(gone.error().kind == actors::TurnErrorKind::not_found);
}

TEST_CASE("hundreds of abandoned turns free their work and reservations", "[engine][leak]") {
  asio::io_context io;
  auto engine = make_engine(false, 1000);
  std::vector<actors::TurnStream> streams;
  for (int i = 0; i < 300; ++i) {
    actors::TurnRequest r =
        stateless_request({{"user", "story " + std::to_string(i)}}, greedy(200));
    r.sampling.ignore_eos = true;
    auto s = engine->start(io.get_executor(), std::move(r));
    REQUIRE(s.has_value());
    s->cancel();  // the client left at once
    streams.push_back(std::move(*s));
  }
  auto drain = [&]() -> asio::awaitable<int> {
    int generated = 0;
    for (auto& s : streams) {
      for (;;) {
        auto d = co_await s.next();  // not in a while condition: GCC 12
        if (!d) break;
      }
      REQUIRE(s.result().has_value());
      CHECK(s.result()->cancelled);
      generated += s.result()->completion_tokens;
    }
    co_return generated;
  };
  const int generated = run(io, drain());
  CHECK(generated < 300 * 200 / 10);  // cancelled long before their 200 tokens
  const auto stats = run(io, engine->stats());
  CHECK(stats.running == 0);
  CHECK(stats.waiting == 0);
  CHECK(stats.free_blocks == stats.num_blocks);
}
