// Engine::start, the one way a turn enters: a stored conversation's turn
// (created on first use), or the one turn of an anonymous conversation that
// takes the same path (a conversation actor, then the scheduler) and leaves
// nothing behind. And the scheduler's loop, which sleeps until a message
// comes.
#include "runtime/trace.hpp"
#include "runtime/trace_names.hpp"
#include "tests/actors/engine_fixture.hpp"

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <set>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::unique_ptr<actors::Engine> small_engine(rt::Tracer* tracer = nullptr,
                                             std::int64_t kv_host_mb = actors::kAutoKvHostMb) {
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.kv_host_mb = kv_host_mb;
  o.tracer = tracer;
  auto engine = actors::Engine::create(stories_model(), o);
  REQUIRE(engine.has_value());
  return std::move(*engine);
}

actors::TurnSink collect(std::string& text) {
  return [&text](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    text += d.text;
    co_return true;
  };
}

asio::awaitable<actors::TurnResult> drain(actors::Engine& engine, actors::TurnRequest request,
                                          std::string& text) {
  auto executor = co_await asio::this_coro::executor;
  auto stream = engine.start(executor, std::move(request));
  if (!stream) co_return stream.error();
  co_return co_await actors::drain_turn(std::move(*stream), collect(text));
}

}  // namespace

TEST_CASE("a stateless turn goes through a conversation actor and leaves nothing behind",
          "[engine][start][trace]") {
  rt::Tracer tracer;
  tracer.enable();
  asio::io_context io;
  auto engine = small_engine(&tracer);
  const bool completion = GENERATE(false, true);
  INFO((completion ? "a raw prompt" : "a chat history"));
  actors::TurnRequest request = stateless_request(
      {{"user", "Hello there"}, {"assistant", "Hi"}, {"user", "More"}}, greedy(6));
  if (completion) request.prompt = "Once upon a time";
  request.sampling.ignore_eos = true;
  std::string text;
  const auto result = run(io, drain(*engine, std::move(request), text));
  REQUIRE(result.has_value());
  CHECK(result->completion_tokens == 6);
  CHECK_FALSE(text.empty());

  // A round trip through the control thread, where the conversation actor
  // runs: its turn handler, whose span closes after the turn's last event
  // has been sent, has finished by the time this is answered.
  engine->clear_prefix_cache();  // the stateless turn's KV stays cached until then
  const auto stats = run(io, engine->stats());

  // In the trace: the turn's span in a conversation actor, under the same
  // flow id as the scheduler's phases of that turn.
  std::set<std::uint64_t> conversation_turns, scheduled_turns;
  for (const auto& s : tracer.drain()) {
    if (s.kind == rt::SpanKind::message && s.actor == "conversation" && s.name == "turn") {
      conversation_turns.insert(s.flow_id);
    }
    if (s.kind == rt::SpanKind::request && s.name == rt::trace_names::request_done)
      scheduled_turns.insert(s.flow_id);
  }
  REQUIRE(conversation_turns.size() == 1);
  CHECK(*conversation_turns.begin() != 0);
  CHECK(scheduled_turns == conversation_turns);

  // Nothing left: no conversation, no cached KV once cleared, every block free.
  CHECK(engine->list_conversations("t").empty());
  CHECK(stats.cached_conversations == 0);
  CHECK(stats.running == 0);
  CHECK(stats.waiting == 0);
  CHECK(stats.free_blocks == stats.num_blocks);
}

TEST_CASE("a turn naming a missing conversation creates it, unless the request says it must exist",
          "[engine][start]") {
  asio::io_context io;
  auto engine = small_engine();
  actors::TurnRequest request{.tenant = "t",
                              .conversation = "fresh",
                              .messages = {{"user", "Hello"}},
                              .sampling = greedy(4)};
  SECTION("created on first use, then continued") {
    std::string text;
    REQUIRE(run(io, drain(*engine, request, text)).has_value());
    REQUIRE(engine->find_conversation("t", "fresh").has_value());
    REQUIRE(run(io, drain(*engine, request, text)).has_value());
    const auto snapshot = run(io, engine->snapshot("t", "fresh"));
    REQUIRE(snapshot.has_value());
    CHECK(snapshot->turns == 2);
    CHECK(engine->list_conversations("t").size() == 1);
  }
  SECTION("must exist: not found, and nothing is created") {
    request.create_conversation = false;
    auto stream = engine->start(io.get_executor(), request);
    REQUIRE_FALSE(stream.has_value());
    CHECK(stream.error().kind == actors::TurnErrorKind::not_found);
    CHECK_FALSE(engine->find_conversation("t", "fresh").has_value());
  }
  SECTION("a raw prompt cannot continue a conversation") {
    request.prompt = "Once";
    auto stream = engine->start(io.get_executor(), request);
    REQUIRE_FALSE(stream.has_value());
    CHECK(stream.error().kind == actors::TurnErrorKind::invalid_request);
    CHECK(stream.error().param == "prompt");
  }
}

TEST_CASE("an idle scheduler sleeps until a message comes: no periodic wake-up",
          "[engine][scheduler][idle]") {
  asio::io_context io;
  auto engine = small_engine(nullptr, 0);  // no host tier: no transfer reports come late
  std::string text;
  REQUIRE(
      run(io, drain(*engine, stateless_request({{"user", "Hello"}}, greedy(4)), text)).has_value());
  const std::uint64_t before = run(io, engine->stats()).loop_passes;
  CHECK(before > 0);
  // Nothing runs for 50 ms: a loop woken by a timer (a 1 ms tick) would
  // pass dozens of times. The one timed wait here, since what it checks is
  // that nothing happens meanwhile.
  asio::steady_timer idle(io, std::chrono::milliseconds(50));
  run(io, [&]() -> asio::awaitable<void> { co_await idle.async_wait(asio::use_awaitable); }());
  const std::uint64_t after = run(io, engine->stats()).loop_passes;
  CHECK(after == before);
  // And a turn wakes it.
  REQUIRE(
      run(io, drain(*engine, stateless_request({{"user", "Again"}}, greedy(4)), text)).has_value());
  CHECK(run(io, engine->stats()).loop_passes > after);
}

TEST_CASE("a tenant's conversations are capped, deleting one makes room, other tenants have their own",
          "[engine][limits]") {
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.max_conversations_per_tenant = 2;
  auto engine = actors::Engine::create(stories_model(), o).value();
  REQUIRE(engine->create_conversation("a", "one").has_value());
  REQUIRE(engine->create_conversation("a").has_value());
  auto third = engine->create_conversation("a", "three");
  REQUIRE_FALSE(third.has_value());
  CHECK(third.error().kind == actors::TurnErrorKind::rate_limited);
  CHECK_THAT(third.error().message, Catch::Contains("2 conversations"));
  // A turn that would create one is refused the same way, before it runs.
  asio::io_context io;
  auto refused = engine->start(io.get_executor(), actors::TurnRequest{.tenant = "a", .conversation = "four",
                                                                      .messages = {{"user", "hi"}}});
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().kind == actors::TurnErrorKind::rate_limited);
  CHECK(engine->create_conversation("b", "one").has_value());
  CHECK(engine->delete_conversation("a", "one"));
  CHECK(engine->create_conversation("a", "three").has_value());
  CHECK(engine->list_conversations("a").size() == 2);
}
