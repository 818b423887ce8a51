// A stored conversation whose client resends, edits or outgrows its history
// (an OpenAI client sends the whole history every turn): the conversation
// appends only what is new, continues an edited history from its first
// difference, and drops its oldest turns when history plus max_tokens passes
// the context. Each case gives the greedy tokens of a fresh conversation
// holding the history that results, and the cached and truncated token
// counts that follow from the two token histories.
#include "tests/actors/engine_fixture.hpp"

#include <algorithm>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

using Messages = std::vector<model::ChatMessage>;

std::unique_ptr<actors::Engine> make_engine(actors::ContextOverflow overflow = actors::ContextOverflow::truncate,
                                            const std::string& history_dir = "") {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.kv_cache_mb = 16;
  o.context_overflow = overflow;
  o.history_dir = history_dir;
  auto e = actors::Engine::create(stories_model(), o);
  if (!e) FAIL(e.error().message);
  return std::move(*e);
}

struct Reply {
  std::vector<std::int32_t> tokens;
  std::string text;
  actors::TurnResult result;
};

// One greedy turn on conversation `id` (created on first use); `compare`:
// the messages may resend the history, as the OpenAI front end says.
asio::awaitable<Reply> turn(actors::Engine& e, std::string id, Messages messages, bool compare,
                            std::int32_t max_tokens = 12) {
  Reply reply;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    reply.text += d.text;
    for (const auto& t : d.tokens) reply.tokens.push_back(t.token);
    co_return true;
  };
  actors::TurnRequest request;
  request.tenant = "t";
  request.conversation = std::move(id);
  request.compare_history = compare;
  request.messages = std::move(messages);
  request.sampling = greedy(max_tokens);
  auto executor = co_await asio::this_coro::executor;
  auto stream = e.start(executor, std::move(request));
  if (!stream) {
    reply.result = stream.error();
    co_return reply;
  }
  reply.result = co_await actors::drain_turn(std::move(*stream), std::move(sink));
  co_return reply;
}

Reply play_turn(asio::io_context& io, actors::Engine& e, const std::string& id, Messages messages, bool compare,
                std::int32_t max_tokens = 12) {
  Reply r = run(io, turn(e, id, std::move(messages), compare, max_tokens));
  if (!r.result) FAIL(r.result.error().message);
  return r;
}

actors::ConversationSnapshot snapshot_of(asio::io_context& io, actors::Engine& e, const std::string& id) {
  auto task = [](actors::Engine& e, std::string id) -> asio::awaitable<actors::ConversationSnapshot> {
    auto s = co_await e.snapshot("t", id);
    REQUIRE(s.has_value());
    co_return std::move(*s);
  };
  return run(io, task(e, id));
}

void check_same_messages(const Messages& got, const Messages& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].role == want[i].role);
    CHECK(got[i].content == want[i].content);
  }
}

// The prompt tokens whose KV a turn reuses from a conversation that held
// `cached`: their longest common prefix, less the newest prompt token (it is
// fed again: its logits pick the first reply token).
std::int32_t reusable(const std::vector<std::int32_t>& cached, const std::vector<std::int32_t>& prompt) {
  const auto mismatch = std::mismatch(cached.begin(), cached.end(), prompt.begin(), prompt.end());
  const auto common = std::int32_t(mismatch.first - cached.begin());
  return std::min(common, std::int32_t(prompt.size()) - 1);
}

std::vector<std::int32_t> first_tokens(const std::vector<std::int32_t>& tokens, std::int32_t n) {
  return {tokens.begin(), tokens.begin() + n};
}

const model::ChatMessage sys{"system", "You tell short stories about animals."};
const model::ChatMessage u1{"user", "Once upon a time there was a little cat."};
const model::ChatMessage u2{"user", "What did the cat eat?"};
const model::ChatMessage u3{"user", "And then the sun came out."};

}  // namespace

TEST_CASE("a resent history appends only its new messages, as a client that sends only those",
          "[engine][resend]") {
  asio::io_context io;
  auto e = make_engine();
  // The client that sends only the new messages.
  const Reply n1 = play_turn(io, *e, "native", {u1}, false);
  const Reply n2 = play_turn(io, *e, "native", {u2}, false);
  const auto native = snapshot_of(io, *e, "native");

  // The client that resends the history.
  const Reply r1 = play_turn(io, *e, "resent", {u1}, true);
  CHECK(r1.tokens == n1.tokens);
  const Reply r2 = play_turn(io, *e, "resent", {u1, {"assistant", r1.text}, u2}, true);
  CHECK(r2.tokens == n2.tokens);
  CHECK(r2.result->prompt_tokens == n2.result->prompt_tokens);
  CHECK(r2.result->cached_tokens == n2.result->cached_tokens);
  CHECK(r2.result->cached_tokens > 0);
  CHECK(r2.result->truncated_tokens == 0);
  const auto resent = snapshot_of(io, *e, "resent");
  CHECK(resent.tokens == native.tokens);
  check_same_messages(resent.messages, native.messages);  // no duplicate history
  CHECK(resent.messages.size() == 4);
  CHECK(resent.turns == 2);

  // Messages that share nothing with the history and hold no reply are new
  // ones, even with comparing on.
  const Reply n3 = play_turn(io, *e, "native", {u3}, false);
  const Reply r3 = play_turn(io, *e, "resent", {u3}, true);
  CHECK(r3.tokens == n3.tokens);
  CHECK(r3.result->cached_tokens == n3.result->cached_tokens);
  check_same_messages(snapshot_of(io, *e, "resent").messages, snapshot_of(io, *e, "native").messages);

  // The history resent with nothing new is refused, and changes nothing.
  const auto before = snapshot_of(io, *e, "resent");
  const Reply nothing = run(io, turn(*e, "resent", before.messages, true));
  REQUIRE_FALSE(nothing.result.has_value());
  CHECK(nothing.result.error().kind == actors::TurnErrorKind::invalid_request);
  CHECK(nothing.result.error().message ==
        "a turn needs at least one new message: the request resends the conversation's 6 messages and adds none");
  CHECK(snapshot_of(io, *e, "resent").tokens == before.tokens);
}

TEST_CASE("a regenerated reply reuses the whole prompt's KV and gives the same greedy reply", "[engine][resend]") {
  asio::io_context io;
  auto e = make_engine();
  const Reply a1 = play_turn(io, *e, "c", {u1}, true);
  const Messages asked{u1, {"assistant", a1.text}, u2};
  const Reply a2 = play_turn(io, *e, "c", asked, true);
  const auto before = snapshot_of(io, *e, "c");

  // Regenerate: the history without the last reply.
  const Reply again = play_turn(io, *e, "c", asked, true);
  CHECK(again.tokens == a2.tokens);
  CHECK(again.result->prompt_tokens == a2.result->prompt_tokens);
  CHECK(again.result->cached_tokens == a2.result->prompt_tokens - 1);
  const auto after = snapshot_of(io, *e, "c");
  CHECK(after.tokens == before.tokens);
  check_same_messages(after.messages, before.messages);
  CHECK(after.turns == 3);
}

TEST_CASE("an edited last message continues from the first divergent token", "[engine][resend]") {
  asio::io_context io;
  auto e = make_engine();
  const model::ChatMessage edited{"user", "What did the cat drink?"};
  const Reply a1 = play_turn(io, *e, "c", {u1}, true);
  (void)play_turn(io, *e, "c", {u1, {"assistant", a1.text}, u2}, true);
  const auto before = snapshot_of(io, *e, "c");

  const Reply got = play_turn(io, *e, "c", {u1, {"assistant", a1.text}, edited}, true);
  // A fresh conversation that was asked the edited question.
  (void)play_turn(io, *e, "fresh", {u1}, false);
  const Reply want = play_turn(io, *e, "fresh", {edited}, false);
  const auto fresh = snapshot_of(io, *e, "fresh");
  CHECK(got.tokens == want.tokens);
  CHECK(got.result->prompt_tokens == want.result->prompt_tokens);
  const auto prompt = first_tokens(fresh.tokens, want.result->prompt_tokens);
  CHECK(got.result->cached_tokens == reusable(before.tokens, prompt));
  // More than the first turn is reused: the divergence is inside the question.
  CHECK(got.result->cached_tokens > want.result->cached_tokens);
  const auto after = snapshot_of(io, *e, "c");
  CHECK(after.tokens == fresh.tokens);
  check_same_messages(after.messages, fresh.messages);
}

TEST_CASE("an edited first message and dropped old turns give a fresh conversation's tokens", "[engine][resend]") {
  asio::io_context io;
  auto e = make_engine();
  const model::ChatMessage edited{"user", "Once upon a time there was a big dog."};

  SECTION("the first message edited") {
    const Reply a1 = play_turn(io, *e, "c", {u1}, true);
    (void)play_turn(io, *e, "c", {u1, {"assistant", a1.text}, u2}, true);
    const auto before = snapshot_of(io, *e, "c");
    const Messages history{edited, {"assistant", a1.text}, u2};
    const Reply got = play_turn(io, *e, "c", history, true);
    const Reply want = play_turn(io, *e, "fresh", history, false);
    const auto fresh = snapshot_of(io, *e, "fresh");
    CHECK(got.tokens == want.tokens);
    CHECK(got.result->prompt_tokens == want.result->prompt_tokens);
    CHECK(got.result->cached_tokens ==
          reusable(before.tokens, first_tokens(fresh.tokens, want.result->prompt_tokens)));
    CHECK(snapshot_of(io, *e, "c").tokens == fresh.tokens);
    check_same_messages(snapshot_of(io, *e, "c").messages, fresh.messages);
  }
  SECTION("the oldest turn dropped, the system prompt kept") {
    const Reply a1 = play_turn(io, *e, "c", {sys, u1}, true);
    const Reply a2 = play_turn(io, *e, "c", {sys, u1, {"assistant", a1.text}, u2}, true);
    const auto before = snapshot_of(io, *e, "c");
    const Messages history{sys, u2, {"assistant", a2.text}, u3};
    const Reply got = play_turn(io, *e, "c", history, true);
    const Reply want = play_turn(io, *e, "fresh", history, false);
    const auto fresh = snapshot_of(io, *e, "fresh");
    CHECK(got.tokens == want.tokens);
    const auto prompt = first_tokens(fresh.tokens, want.result->prompt_tokens);
    CHECK(got.result->cached_tokens == reusable(before.tokens, prompt));
    CHECK(got.result->cached_tokens > 0);  // the system prompt's KV
    CHECK(snapshot_of(io, *e, "c").tokens == fresh.tokens);
    check_same_messages(snapshot_of(io, *e, "c").messages, fresh.messages);
  }
}

TEST_CASE("an edited history is what the journal brings back", "[engine][resend][history]") {
  asio::io_context io;
  TempDir dir("engine-resend");
  const std::string history = (dir / "history").string();
  const model::ChatMessage edited{"user", "What did the cat drink?"};
  actors::ConversationSnapshot before;
  {
    auto e = make_engine(actors::ContextOverflow::truncate, history);
    const Reply a1 = play_turn(io, *e, "c", {u1}, true);
    (void)play_turn(io, *e, "c", {u1, {"assistant", a1.text}, u2}, true);
    (void)play_turn(io, *e, "c", {u1, {"assistant", a1.text}, edited}, true);
    before = snapshot_of(io, *e, "c");
  }
  auto e = make_engine(actors::ContextOverflow::truncate, history);
  const auto after = snapshot_of(io, *e, "c");
  CHECK(after.tokens == before.tokens);
  check_same_messages(after.messages, before.messages);
  CHECK(after.messages.size() == 4);
  CHECK(after.turns == 3);
}

namespace {

// Long user messages: three turns fill most of stories260K's 512 tokens.
model::ChatMessage long_user(int i) {
  std::string text = "Turn " + std::to_string(i) + ":";
  for (int k = 0; k < 3; ++k) text += " the little cat ran to the big tree";
  return {"user", text};
}

}  // namespace

TEST_CASE("a conversation past the context drops its oldest turns, never the system prompt",
          "[engine][resend][context]") {
  asio::io_context io;
  auto e = make_engine();
  const Messages turns{long_user(1), long_user(2), long_user(3)};
  std::vector<std::string> replies;
  for (const auto& u : turns) {
    CHECK(play_turn(io, *e, "copy", {u}, false).result->truncated_tokens == 0);
    const Reply r = play_turn(io, *e, "long", {u}, false);
    REQUIRE(r.result->truncated_tokens == 0);
    replies.push_back(r.text);
  }
  REQUIRE(snapshot_of(io, *e, "long").tokens == snapshot_of(io, *e, "copy").tokens);
  // The fourth turn as asked: with one token to generate it fits.
  const model::ChatMessage u4{"user", "And then?"};
  const Reply fits = play_turn(io, *e, "copy", {u4}, false, 1);
  const std::int32_t asked = fits.result->prompt_tokens;
  const std::int32_t max_tokens = 512 - asked + 40;  // 40 tokens too many
  REQUIRE(max_tokens > 0);

  const Reply got = play_turn(io, *e, "long", {u4}, false, max_tokens);
  // What is left: the second and third turns and the question.
  const Messages kept{long_user(2), {"assistant", replies[1]}, long_user(3), {"assistant", replies[2]}, u4};
  const Reply want = play_turn(io, *e, "fresh", kept, false, max_tokens);
  CHECK(got.tokens == want.tokens);
  CHECK(got.result->prompt_tokens == want.result->prompt_tokens);
  CHECK(got.result->truncated_tokens == asked - want.result->prompt_tokens);
  CHECK(got.result->truncated_tokens >= 40);
  CHECK(want.result->truncated_tokens == 0);
  const auto after = snapshot_of(io, *e, "long");
  CHECK(after.tokens == snapshot_of(io, *e, "fresh").tokens);
  REQUIRE(after.messages.size() == 6);
  CHECK(after.messages[0].content == long_user(2).content);

  // With a system prompt, it stays; the oldest turn after it goes.
  (void)play_turn(io, *e, "sys", {sys, turns[0]}, false);
  (void)play_turn(io, *e, "sys", {turns[1]}, false);
  (void)play_turn(io, *e, "sys", {turns[2]}, false);
  const Reply cut = play_turn(io, *e, "sys", {u4}, false, max_tokens);
  CHECK(cut.result->truncated_tokens > 0);
  const auto s = snapshot_of(io, *e, "sys");
  REQUIRE(s.messages.size() == 7);
  CHECK(s.messages[0].role == "system");
  CHECK(s.messages[0].content == sys.content);
  CHECK(s.messages[1].content == turns[1].content);
}

TEST_CASE("with --context-overflow error, and for a stateless turn, a turn past the context is refused with the numbers",
          "[engine][resend][context]") {
  asio::io_context io;
  auto e = make_engine(actors::ContextOverflow::error);
  (void)play_turn(io, *e, "c", {long_user(1)}, false);
  const auto before = snapshot_of(io, *e, "c");
  const Reply refused = run(io, turn(*e, "c", {u2}, false, 500));
  REQUIRE_FALSE(refused.result.has_value());
  CHECK(refused.result.error().kind == actors::TurnErrorKind::invalid_request);
  const Reply fits = play_turn(io, *e, "c", {u2}, false, 1);
  CHECK(refused.result.error().message == "this model's context is 512 tokens; the conversation has " +
                                              std::to_string(fits.result->prompt_tokens) +
                                              " and max_tokens asks for 500");
  CHECK(snapshot_of(io, *e, "c").messages.size() == before.messages.size() + 2);  // only the turn that fit

  // A stateless turn is never truncated, whatever the policy.
  auto t = make_engine(actors::ContextOverflow::truncate);
  auto stateless = [](actors::Engine& e, Messages messages) -> asio::awaitable<actors::TurnResult> {
    auto executor = co_await asio::this_coro::executor;
    auto stream = e.start(executor, stateless_request(std::move(messages), greedy(500)));
    if (!stream) co_return stream.error();
    actors::TurnSink sink = [](const actors::TurnDelta&) -> asio::awaitable<bool> { co_return true; };
    co_return co_await actors::drain_turn(std::move(*stream), std::move(sink));
  };
  const auto r = run(io, stateless(*t, {long_user(1), {"assistant", "It ran."}, u2}));
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().kind == actors::TurnErrorKind::invalid_request);
  CHECK_THAT(r.error().message, Catch::StartsWith("this model's context is 512 tokens; the conversation has "));
}
