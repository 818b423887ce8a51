// A conversation actor answers a request whose asker is gone. ASan caught
// this on 2026-12-01 (test_actors '[sampling]', 1 run in 4): a GetSnapshot
// reply, sent on the engine's control thread, destroyed its reply channel
// after the asking io_context had been destroyed; the channel unregisters
// itself from that context, so the destroy wrote into freed memory. Here the
// order is forced: the control thread is held inside an iteration while a
// snapshot is asked, given up and its context destroyed; only then does the
// actor get to answer. It must touch nothing of the gone context.
#include "tests/actors/engine_fixture.hpp"
#include "tests/actors/iteration_gate.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/detached.hpp>

#include <chrono>
#include <optional>

using namespace pensieve;
using namespace pensieve::testing;

TEST_CASE("a snapshot answered after its asker's io_context is gone touches nothing of that context",
          "[engine][cancel]") {
  IterationGate gate;
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.on_iteration = [&gate](const actors::IterationRecord&) { gate.on_iteration(); };
  asio::io_context io;  // outlives the engine, whose threads complete operations on it
  auto made = actors::Engine::create(tiny_model(), o);
  REQUIRE(made.has_value());
  actors::Engine& engine = **made;
  REQUIRE(engine.create_conversation("t", "c").has_value());

  model::SamplingParams six = greedy(6);
  six.ignore_eos = true;
  gate.arm();
  actors::TurnRequest request;
  request.tenant = "t";
  request.conversation = "c";
  request.create_conversation = false;
  request.messages = {{"user", "tell me a story"}};
  request.sampling = six;
  auto stream = engine.start(io.get_executor(), std::move(request));
  REQUIRE(stream.has_value());
  REQUIRE(gate.wait_entered(std::chrono::seconds(60)));  // the control thread is held
  {
    asio::io_context asker;
    asio::cancellation_signal cancel;
    std::optional<actors::EngineResult<actors::ConversationSnapshot>> got;
    asio::co_spawn(
        asker, [&]() -> asio::awaitable<void> { got = co_await engine.snapshot("t", "c"); },
        asio::bind_cancellation_slot(cancel.slot(), asio::detached));
    asker.poll();  // the request waits in the conversation's mailbox
    REQUIRE_FALSE(got.has_value());
    cancel.emit(asio::cancellation_type::terminal);
    asker.poll();
    REQUIRE(got.has_value());
    CHECK_FALSE(got->has_value());  // given up
  }  // the asker's context is destroyed; its request is still queued
  gate.open();

  actors::TurnSink ignore = [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; };
  const actors::TurnResult turn = run(io, actors::drain_turn(std::move(*stream), ignore));
  REQUIRE(turn.has_value());
  // Asked after the abandoned one (the mailbox is FIFO), so that one has been answered by now.
  const auto snapshot = run(io, engine.snapshot("t", "c"));
  REQUIRE(snapshot.has_value());
  CHECK(snapshot->turns == 1);
}
