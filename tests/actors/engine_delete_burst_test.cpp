// Deletes must never be lost to a full scheduler inbox. A conversation's
// delete tells the scheduler to forget its cached KV; when that message was
// sent with try_tell and the inbox was full, it vanished and the KV (and the
// token history beside it) outlived the conversation. Here the scheduler's
// inbox holds 2 messages and its thread is held inside an iteration (the
// on_iteration hook waits on a gate) while a dozen conversations holding KV
// are deleted: all but the first few meet a full inbox. Once the
// scheduler runs again, every conversation's KV must be gone.
#include "tests/actors/engine_fixture.hpp"
#include "tests/actors/iteration_gate.hpp"
#include "tests/tiny_model.hpp"

#include <chrono>
#include <string>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

model::SamplingParams six_tokens() {
  model::SamplingParams p = greedy(6);
  p.ignore_eos = true;  // the turn runs 6 iterations
  return p;
}

asio::awaitable<actors::TurnResult> turn(actors::Engine& engine, const std::string& id, std::string text) {
  actors::TurnSink sink = [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; };
  std::vector<model::ChatMessage> messages{{"user", std::move(text)}};
  co_return co_await send_turn(engine, "t", id, std::move(messages), six_tokens(), sink);
}

}  // namespace

TEST_CASE("a burst of deletes into a full scheduler inbox frees every conversation's KV", "[engine][store]") {
  const bool tiered = GENERATE(false, true);
  INFO((tiered ? "with a host tier (chunk-granular cache)" : "device only"));
  constexpr int kConversations = 12;
  IterationGate gate;
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_block_tokens = 16;
  o.kv_device_blocks = 256;  // every conversation's KV stays on the device: nothing is evicted
  o.kv_host_mb = 0;
  if (tiered) {
    o.kv_host_blocks = 16;
    o.kv_cache.swap_out_watermark = 0.0;  // no ahead-of-time moves: nothing in flight when the stats are read
  }
  o.scheduler_mailbox_messages = 2;
  o.on_iteration = [&gate](const actors::IterationRecord&) { gate.on_iteration(); };
  asio::io_context io;  // outlives the engine, which completes operations on it
  auto made = actors::Engine::create(tiny_model(), o);
  REQUIRE(made.has_value());
  actors::Engine& engine = **made;

  for (int i = 0; i < kConversations; ++i) {
    const std::string id = "c" + std::to_string(i);
    REQUIRE(engine.create_conversation("t", id).has_value());
    REQUIRE(run(io, turn(engine, id, "tell me a story number " + std::to_string(i))).has_value());
  }
  const actors::SchedulerStats before = run(io, engine.stats());
  REQUIRE(before.cached_conversations == kConversations);
  REQUIRE(before.num_blocks - before.free_blocks >= kConversations);  // at least a block each
  CHECK(before.evicted_conversations == 0);

  // One more turn, whose first iteration holds the scheduler's thread.
  REQUIRE(engine.create_conversation("t", "blocker").has_value());
  gate.arm();
  std::vector<model::ChatMessage> messages{{"user", "and one more"}};
  actors::TurnRequest request{.tenant = "t",
                              .conversation = "blocker",
                              .messages = std::move(messages),
                              .sampling = six_tokens()};
  auto stream = engine.start(io.get_executor(), std::move(request));
  REQUIRE(stream.has_value());
  REQUIRE(gate.wait_entered(std::chrono::seconds(60)));
  // The scheduler takes nothing from its inbox now: the first drops fill it
  // (2, and one its pending receive holds), the other 9 meet it full.
  for (int i = 0; i < kConversations; ++i) CHECK(engine.delete_conversation("t", "c" + std::to_string(i)));
  gate.open();

  actors::TurnSink ignore = [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; };
  const actors::TurnResult blocker = run(io, actors::drain_turn(std::move(*stream), ignore));
  REQUIRE(blocker.has_value());
  // The drops that waited for room were queued before this turn ended, so
  // they reach the scheduler before this query (its inbox is FIFO).
  const actors::SchedulerStats after_burst = run(io, engine.stats());
  CHECK(after_burst.cached_conversations == 1);  // the blocker's
  CHECK(engine.list_conversations("t").size() == 1);

  CHECK(engine.delete_conversation("t", "blocker"));
  const actors::SchedulerStats after = run(io, engine.stats());
  CHECK(after.cached_conversations == 0);
  CHECK(after.free_blocks == after.num_blocks);
  CHECK(after.evicted_conversations == 0);  // freed by the deletes, not by eviction
  CHECK(after.tiers.host_slots == (tiered ? 16 : 0));
  CHECK(after.tiers.free_host_slots == after.tiers.host_slots);
  CHECK(after.waiting == 0);
  CHECK(after.running == 0);
}
