// Bounded memory (--max-conversations, --conversation-idle-s): an idle
// conversation past a limit leaves memory, least recently used first; with
// a history journal it comes back on its next turn and continues exactly as
// if it had stayed, without one it is deleted and a later turn on it is not
// found. A conversation with a turn running never leaves.
#include "actors/conversation_lru.hpp"
#include "tests/actors/engine_fixture.hpp"
#include "tests/actors/iteration_gate.hpp"

#include <atomic>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

constexpr std::int64_t kSecondNs = 1'000'000'000;

struct Limits {
  std::string history_dir;
  std::int32_t max_conversations = 0;
  std::int32_t idle_s = 0;
  std::atomic<std::int64_t>* clock_ns = nullptr;
  IterationGate* gate = nullptr;
};

std::unique_ptr<actors::Engine> make_engine(const Limits& l) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_cache_mb = 16;
  o.history_dir = l.history_dir;
  o.max_conversations = l.max_conversations;
  o.conversation_idle_s = l.idle_s;
  if (l.clock_ns != nullptr) o.now_ns = [c = l.clock_ns] { return c->load(); };
  if (l.gate != nullptr) o.on_iteration = [g = l.gate](const actors::IterationRecord&) { g->on_iteration(); };
  return make_stories_engine(std::move(o));
}

// One greedy turn on a stored conversation; its sampled tokens.
asio::awaitable<std::vector<std::int32_t>> turn(actors::Engine& e, std::string id, std::string text) {
  auto tokens = co_await greedy_turn_tokens(e, id, std::move(text));
  // The turn's handler ends after its reply (it records the history): a
  // snapshot, queued behind it, answers once it has, so the conversation
  // is idle again when this returns.
  REQUIRE((co_await e.snapshot("t", id)).has_value());
  co_return tokens;
}

asio::awaitable<actors::TurnResult> failed_turn(actors::Engine& e, std::string id) {
  actors::TurnSink sink = [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; };
  std::vector<model::ChatMessage> messages{{"user", "Hello"}};
  co_return co_await send_turn(e, "t", id, std::move(messages), greedy(4), sink);
}

asio::awaitable<actors::SchedulerStats> stats(actors::Engine& e) { co_return co_await e.stats(); }

}  // namespace

TEST_CASE("the least recently used conversations leave first, and only idle ones", "[expiry]") {
  actors::ConversationLru lru;
  lru.touch("a", 0);
  lru.touch("b", 1);
  lru.touch("c", 2);
  lru.touch("a", 3);  // order now b, c, a
  const auto none_busy = [](const std::string&) { return false; };
  CHECK(lru.pick(4, {.max_loaded = 3}, none_busy).empty());
  CHECK(lru.pick(4, {.max_loaded = 1}, none_busy) == std::vector<std::string>{"b", "c"});
  // A busy one is passed over for the next least recent; the one in use too.
  const auto b_busy = [](const std::string& k) { return k == "b"; };
  const std::string keep = "c";
  CHECK(lru.pick(4, {.max_loaded = 2}, b_busy, &keep) == std::vector<std::string>{"a"});
  // Idle: everyone untouched for idle_ns; b's turn restarted its idle time.
  CHECK(lru.pick(4, {.idle_ns = 2}, b_busy) == std::vector<std::string>{"c"});
  CHECK(lru.pick(5, {.idle_ns = 2}, none_busy) == std::vector<std::string>{"c", "a"});
  lru.erase("c");
  CHECK(lru.size() == 2);
  CHECK_FALSE(lru.contains("c"));
}

TEST_CASE("expired ids are remembered up to their capacity, the oldest forgotten first", "[expiry]") {
  actors::ExpiredIds ids(2);
  ids.remember("a");
  ids.remember("b");
  ids.remember("b");
  CHECK(ids.size() == 2);
  ids.remember("c");
  CHECK_FALSE(ids.contains("a"));
  CHECK(ids.contains("b"));
  CHECK(ids.contains("c"));
  ids.forget("b");
  CHECK_FALSE(ids.contains("b"));
  CHECK(ids.size() == 1);
}

TEST_CASE("past --max-conversations an idle conversation is unloaded to the journal, and its next turn continues "
          "exactly",
          "[engine][expiry]") {
  asio::io_context io;
  std::vector<std::vector<std::int32_t>> straight;
  actors::ConversationSnapshot straight_end;
  {
    auto e = make_engine({});
    REQUIRE(e->create_conversation("t", "c0").has_value());
    for (const auto& text : story_turns()) straight.push_back(run(io, turn(*e, "c0", text)));
    straight_end = run(io, require_snapshot(*e, "c0"));
  }

  TempDir dir("engine-expiry");
  auto e = make_engine({.history_dir = (dir / "history").string(), .max_conversations = 2});
  REQUIRE(e->create_conversation("t", "c0").has_value());
  CHECK(run(io, turn(*e, "c0", story_turns()[0])) == straight[0]);
  REQUIRE(e->create_conversation("t", "c1").has_value());
  REQUIRE(e->create_conversation("t", "c2").has_value());  // c0, the least recent, leaves
  auto counts = e->conversation_counts();
  CHECK(counts.live == 2);
  CHECK(counts.journaled == 1);
  CHECK(counts.unloaded_total == 1);
  CHECK(e->find_conversation("t", "c0").has_value());  // still stored, still listed
  CHECK(e->list_conversations("t").size() == 3);
  // Its history left the journal's memory too (c1 and c2 have none yet).
  CHECK(run(io, e->journal_memory()).held_tokens == 0);
  CHECK(run(io, e->journal_memory()).held_messages == 0);

  CHECK(run(io, turn(*e, "c0", story_turns()[1])) == straight[1]);  // back from the journal; c1 leaves
  counts = e->conversation_counts();
  CHECK(counts.live == 2);
  CHECK(counts.journaled == 1);
  CHECK(counts.reloaded_total == 1);
  CHECK(counts.unloaded_total == 2);
  REQUIRE(e->create_conversation("t", "c3").has_value());  // c2 leaves (c0 was used since)
  CHECK(run(io, e->journal_memory()).held_tokens > 0);  // c0's, in memory again since its turn
  REQUIRE(e->create_conversation("t", "c4").has_value());  // c0 leaves again
  CHECK(e->conversation_counts().journaled == 3);
  CHECK(run(io, e->journal_memory()).held_tokens == 0);
  CHECK(run(io, turn(*e, "c0", story_turns()[2])) == straight[2]);
  const auto end = run(io, require_snapshot(*e, "c0"));
  CHECK(end.tokens == straight_end.tokens);
  CHECK(end.turns == 3);
  CHECK(e->conversation_counts().expired_total == 0);
  // What left memory left the KV cache too: two conversations at most hold KV.
  CHECK(run(io, stats(*e)).cached_conversations <= 2);
}

TEST_CASE("without a journal a conversation past --max-conversations is deleted, and a turn on it is not found",
          "[engine][expiry]") {
  asio::io_context io;
  auto e = make_engine({.max_conversations = 1});
  REQUIRE(e->create_conversation("t", "old").has_value());
  (void)run(io, turn(*e, "old", story_turns()[0]));
  REQUIRE(e->create_conversation("t", "new").has_value());
  CHECK_FALSE(e->find_conversation("t", "old").has_value());
  const auto counts = e->conversation_counts();
  CHECK(counts.live == 1);
  CHECK(counts.journaled == 0);
  CHECK(counts.expired_total == 1);
  const actors::TurnResult r = run(io, failed_turn(*e, "old"));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().kind == actors::TurnErrorKind::not_found);
  CHECK(r.error().message ==
        "conversation 'old' expired (idle conversations are deleted beyond the 1 most recently used); create it "
        "again to reuse its id");
  // Also where a turn would create a conversation on first use (HTTP): the client is told, not given an empty one.
  actors::TurnRequest request;
  request.tenant = "t";
  request.conversation = "old";
  request.messages = {{"user", "Hello"}};
  request.sampling = greedy(4);
  auto refused = e->start(io.get_executor(), std::move(request));
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().kind == actors::TurnErrorKind::not_found);
  CHECK(e->list_conversations("t").size() == 1);
  auto s = run(io, [&]() -> asio::awaitable<actors::EngineResult<actors::ConversationSnapshot>> {
    co_return co_await e->snapshot("t", "old");
  }());
  REQUIRE_FALSE(s.has_value());
  CHECK(s.error().kind == actors::TurnErrorKind::not_found);
  CHECK_THAT(s.error().message, Catch::StartsWith("conversation 'old' expired"));
  // The id is free again.
  CHECK(e->create_conversation("t", "old").has_value());
  CHECK_FALSE(e->find_conversation("t", "new").has_value());
}

TEST_CASE("a conversation idle past --conversation-idle-s leaves memory, one with a turn running stays",
          "[engine][expiry]") {
  asio::io_context io;
  std::atomic<std::int64_t> clock{100 * kSecondNs};
  IterationGate gate;
  auto e = make_engine({.idle_s = 5, .clock_ns = &clock, .gate = &gate});
  REQUIRE(e->create_conversation("t", "idle").has_value());
  REQUIRE(e->create_conversation("t", "busy").has_value());
  clock += 4 * kSecondNs;
  CHECK(e->expire_conversations() == 0);

  // A turn on "busy" held inside a scheduler iteration while time passes.
  gate.arm();
  actors::TurnRequest request;
  request.tenant = "t";
  request.conversation = "busy";
  request.create_conversation = false;
  request.messages = {{"user", story_turns()[0]}};
  request.sampling = greedy(8);
  auto stream = e->start(io.get_executor(), std::move(request));
  REQUIRE(stream.has_value());
  REQUIRE(gate.wait_entered(std::chrono::seconds(30)));
  clock += 2 * kSecondNs;  // "idle" unused for 6 s, "busy" for 6 s but with a turn in flight
  CHECK(e->expire_conversations() == 1);
  CHECK_FALSE(e->find_conversation("t", "idle").has_value());
  CHECK(e->find_conversation("t", "busy").has_value());
  gate.open();
  auto result = run(io, actors::drain_turn(std::move(*stream), [](const actors::TurnDelta&) -> asio::awaitable<bool> {
    co_return true;
  }));
  REQUIRE(result.has_value());
  CHECK(result->completion_tokens == 8);
  (void)run(io, require_snapshot(*e, "busy"));  // answered once the turn's handler has ended: idle from now
  // Its idle time restarted with the turn: 4 s later it is still there, 6 s later it is gone.
  clock += 4 * kSecondNs;
  CHECK(e->expire_conversations() == 0);
  clock += 2 * kSecondNs;
  CHECK(e->expire_conversations() == 1);
  const auto counts = e->conversation_counts();
  CHECK(counts.live == 0);
  CHECK(counts.expired_total == 2);
  e->clear_prefix_cache();
  const auto s = run(io, stats(*e));
  CHECK(s.free_blocks == s.num_blocks);
}
