// The prefix cache end to end: stateless requests (the whole history, no
// conversation id) through the engine on the CPU backend. Random
// multi-turn workloads with shared system prompts, regenerations and edits
// give the same greedy tokens with the cache as with --no-state, token for
// token; no namespace sees another's KV; and once every request has ended
// (one cancelled mid-prefill) and the cache is cleared, every block is free.
#include "tests/actors/engine_fixture.hpp"

#include <random>

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::unique_ptr<actors::Engine> make_engine(bool keep_kv, std::int32_t batch_tokens) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.scheduler.keep_kv = keep_kv;
  o.scheduler.max_batch_tokens = batch_tokens;
  o.kv_block_tokens = 8;
  o.kv_device_blocks = 512;
  o.kv_host_mb = 0;
  auto e = actors::Engine::create(stories_model(), o);
  REQUIRE(e.has_value());
  return std::move(*e);
}

struct Reply {
  std::vector<std::int32_t> tokens;
  std::string text;
  actors::TurnDone summary;
};

// A stateless request, or with `conversation` the whole history resent to
// that stored conversation (created by its first request), as an OpenAI
// client that names its conversation does.
asio::awaitable<Reply> ask(actors::Engine& engine, std::vector<model::ChatMessage> messages,
                           std::string tenant = "t", std::optional<std::string> salt = std::nullopt,
                           std::optional<std::string> conversation = std::nullopt, int max_tokens = 12) {
  actors::TurnRequest request = stateless_request(std::move(messages), greedy(max_tokens));
  request.tenant = std::move(tenant);
  request.cache_salt = std::move(salt);
  if (conversation) {
    request.conversation = std::move(conversation);
    request.compare_history = true;
  }
  request.sampling.ignore_eos = true;
  Reply reply;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    reply.text += d.text;
    for (const auto& t : d.tokens) reply.tokens.push_back(t.token);
    co_return true;
  };
  auto executor = co_await asio::this_coro::executor;
  auto stream = engine.start(executor, std::move(request));
  REQUIRE(stream.has_value());
  auto result = co_await actors::drain_turn(std::move(*stream), std::move(sink));
  REQUIRE(result.has_value());
  reply.summary = *result;
  co_return reply;
}

enum class Step { reply, regenerate, edit };

// One client's history, moved on by its replies and a seeded choice of
// step: answer and ask the next question, regenerate the last reply, or
// edit the last question.
struct Client {
  std::vector<model::ChatMessage> history;
  std::vector<std::string> questions;
  std::size_t next_question = 0;
};

struct Workload {
  std::vector<Client> clients;
  std::vector<std::vector<Step>> steps;  // per round, per client
};

Workload make_workload(std::uint32_t seed) {
  const auto convs = user_turns("oasst.jsonl", 6, 5, 80);
  const std::vector<std::string> systems = {
      "You are a helpful assistant who answers briefly and kindly, in plain words, without lists.",
      "You tell short stories about a cat named Tom, who lives in a small house by the sea."};
  std::mt19937 rng(seed);
  Workload w;
  for (std::size_t i = 0; i < convs.size(); ++i) {
    Client c;
    c.history.push_back({"system", systems[i % systems.size()]});
    c.questions = convs[i];
    c.history.push_back({"user", c.questions[0]});
    c.next_question = 1;
    w.clients.push_back(std::move(c));
  }
  for (int round = 0; round < 5; ++round) {
    std::vector<Step> r;
    for (std::size_t i = 0; i < w.clients.size(); ++i) {
      const auto pick = rng() % 10;
      r.push_back(pick < 6 ? Step::reply : pick < 8 ? Step::regenerate : Step::edit);
    }
    w.steps.push_back(std::move(r));
  }
  return w;
}

void advance(Client& c, Step step, const Reply& reply) {
  switch (step) {
    case Step::reply:
      c.history.push_back({"assistant", reply.text});
      c.history.push_back({"user", c.next_question < c.questions.size() ? c.questions[c.next_question++]
                                                                          : std::string("Tell me more.")});
      break;
    case Step::regenerate: break;  // the same history again
    case Step::edit: c.history.back().content += " Please."; break;
  }
}

// Every round's requests, all clients' at once; the replies, round by round.
// With `named`, every second client names its conversation.
std::vector<std::vector<Reply>> play(actors::Engine& engine, asio::io_context& io, Workload w, bool named = false) {
  std::vector<std::vector<Reply>> out;
  for (const auto& round : w.steps) {
    std::vector<std::future<Reply>> futures;
    for (std::size_t i = 0; i < w.clients.size(); ++i) {
      std::optional<std::string> id;
      if (named && i % 2 == 1) id = "client-" + std::to_string(i);
      futures.push_back(asio::co_spawn(io, ask(engine, w.clients[i].history, "t", std::nullopt, id),
                                       asio::use_future));
    }
    io.restart();
    io.run();
    std::vector<Reply> replies;
    for (auto& f : futures) replies.push_back(f.get());
    for (std::size_t i = 0; i < w.clients.size(); ++i) advance(w.clients[i], round[i], replies[i]);
    out.push_back(std::move(replies));
  }
  return out;
}

}  // namespace

TEST_CASE("stateless requests with shared system prompts, regenerations and edits give --no-state's tokens",
          "[engine][prefix_cache]") {
  asio::io_context io;  // outlives the engines, which complete operations on it
  for (std::uint32_t seed : {1u, 2u}) {
    INFO("seed " << seed);
    const Workload w = make_workload(seed);
    auto cached = make_engine(true, 13);   // small iterations: prefills cut and mixed with decodes
    auto baseline = make_engine(false, 512);
    const auto a = play(*cached, io, w);
    const auto b = play(*baseline, io, w);
    REQUIRE(a.size() == b.size());
    std::int64_t cached_sum = 0, prompt_sum = 0;
    for (std::size_t r = 0; r < a.size(); ++r) {
      for (std::size_t i = 0; i < a[r].size(); ++i) {
        INFO("round " << r << " client " << i);
        CHECK(a[r][i].tokens == b[r][i].tokens);
        CHECK(a[r][i].text == b[r][i].text);
        CHECK(a[r][i].summary.prompt_tokens == b[r][i].summary.prompt_tokens);
        CHECK(b[r][i].summary.cached_tokens == 0);
        CHECK(a[r][i].summary.cached_tokens < a[r][i].summary.prompt_tokens);
        // After the first round every prompt starts with a cached one.
        if (r > 0) CHECK(a[r][i].summary.cached_tokens > 0);
        if (r > 0 && w.steps[r - 1][i] == Step::reply) {
          // It continues its own previous request: all of that prompt and
          // the reply's ids (remembered, not re-encoded) but the newest.
          INFO("previous reply: [" << a[r - 1][i].text << "]");
          CHECK(a[r][i].summary.cached_tokens >=
                a[r - 1][i].summary.prompt_tokens + a[r - 1][i].summary.completion_tokens - 1);
        }
        cached_sum += a[r][i].summary.cached_tokens;
        prompt_sum += a[r][i].summary.prompt_tokens;
      }
    }
    CHECK(cached_sum * 2 > prompt_sum);  // most of the prompts came from the cache
    const auto stats = run(io, cached->stats());
    CHECK(stats.tiers.prefix_matched_tokens > 0);
    CHECK(stats.tiers.unnamed_paths > 0);
  }
}

TEST_CASE("the same prompt in another tenant or with another cache_salt finds nothing cached",
          "[engine][prefix_cache]") {
  asio::io_context io;
  auto engine = make_engine(true, 512);
  const std::vector<model::ChatMessage> history = {
      {"system", "You are a helpful assistant who answers briefly and kindly, in plain words."},
      {"user", "Once upon a time there was a little girl who liked to play in the park."}};
  const Reply first = run(io, ask(*engine, history, "a"));
  CHECK(first.summary.cached_tokens == 0);
  const Reply again = run(io, ask(*engine, history, "a"));
  CHECK(again.summary.cached_tokens > 0);
  CHECK(again.tokens == first.tokens);
  const Reply other_tenant = run(io, ask(*engine, history, "b"));
  CHECK(other_tenant.summary.cached_tokens == 0);
  const Reply salted = run(io, ask(*engine, history, "a", "s1"));
  CHECK(salted.summary.cached_tokens == 0);
  const Reply salted_again = run(io, ask(*engine, history, "a", "s1"));
  CHECK(salted_again.summary.cached_tokens > 0);
  const Reply other_salt = run(io, ask(*engine, history, "a", "s2"));
  CHECK(other_salt.summary.cached_tokens == 0);
  CHECK(other_salt.tokens == first.tokens);
}

TEST_CASE("a conversation's first turn shares only the cached prefixes of its tenant and cache_salt",
          "[engine][prefix_cache]") {
  asio::io_context io;
  auto engine = make_engine(true, 512);
  const std::string system = "You are a helpful assistant who answers briefly and kindly, in plain words.";
  const std::vector<model::ChatMessage> history = {
      {"system", system}, {"user", "Once upon a time there was a little girl who liked to play in the park."}};
  const Reply salted = run(io, ask(*engine, history, "a", "s1"));  // leaves s1's path cached
  CHECK(salted.summary.cached_tokens == 0);
  // The same system prompt, other salts: nothing shared, same tokens.
  const Reply unsalted = run(io, ask(*engine, history, "a", std::nullopt, "c-none"));
  CHECK(unsalted.summary.cached_tokens == 0);
  const Reply other = run(io, ask(*engine, history, "a", "s2", "c-s2"));
  CHECK(other.summary.cached_tokens == 0);
  CHECK(other.tokens == salted.tokens);
  // Its own salt: the first turn starts from the cached prefix.
  const Reply same = run(io, ask(*engine, history, "a", "s1", "c-s1"));
  CHECK(same.summary.cached_tokens > 0);
  CHECK(same.tokens == salted.tokens);
  // And a conversation's KV is shared in its salt's namespace only.
  const Reply second_s2 = run(io, ask(*engine, history, "a", "s2", "c2-s2"));
  CHECK(second_s2.summary.cached_tokens > 0);  // c-s2's path
  CHECK(second_s2.tokens == salted.tokens);
  const Reply other_tenant = run(io, ask(*engine, history, "b", "s2", "c-b-s2"));
  CHECK(other_tenant.summary.cached_tokens == 0);
}

TEST_CASE("after stateless requests end, one cancelled at once, clearing the cache frees every block",
          "[engine][prefix_cache]") {
  asio::io_context io;
  auto engine = make_engine(true, 8);  // 8-token iterations: a prefill takes many
  const auto idle = run(io, engine->stats());
  REQUIRE(idle.free_blocks == idle.num_blocks);
  const std::string system = "You are a helpful assistant who answers briefly and kindly, in plain words.";
  const Reply first = run(io, ask(*engine, {{"system", system}, {"user", "What is a cat?"}}));
  CHECK(first.summary.cached_tokens == 0);
  std::vector<std::future<Reply>> done;
  for (const char* q : {"Where do cats sleep?", "Why is the sea blue?", "What is a park?"}) {
    done.push_back(asio::co_spawn(io, ask(*engine, {{"system", system}, {"user", q}}), asio::use_future));
  }
  // One more, cancelled as soon as it is queued: it ends before it has a reply.
  auto cancelled = [&]() -> asio::awaitable<actors::TurnResult> {
    actors::TurnRequest request = stateless_request({{"system", system}, {"user", "A long question, cancelled."}},
                                                    greedy(12));
    auto stream = engine->start(co_await asio::this_coro::executor, std::move(request));
    REQUIRE(stream.has_value());
    stream->cancel();
    co_return co_await actors::drain_turn(std::move(*stream), [](const actors::TurnDelta&) -> asio::awaitable<bool> {
      co_return true;
    });
  };
  auto cancel_future = asio::co_spawn(io, cancelled(), asio::use_future);
  io.restart();
  io.run();
  for (auto& f : done) {
    const Reply r = f.get();
    CHECK(r.summary.completion_tokens == 12);
    CHECK(r.summary.cached_tokens > 0);  // the first one's system prompt
  }
  const auto cancel_result = cancel_future.get();
  REQUIRE(cancel_result.has_value());
  CHECK(cancel_result->completion_tokens == 0);
  const auto busy = run(io, engine->stats());
  CHECK(busy.running == 0);
  CHECK(busy.free_blocks < busy.num_blocks);  // the requests' KV stayed cached
  CHECK(busy.tiers.shared_device_blocks > 0);  // the system prompt's, computed once
  engine->clear_prefix_cache();
  const auto cleared = run(io, engine->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
  CHECK(cleared.tiers.unnamed_paths == 0);
  CHECK(cleared.tiers.shared_device_blocks == 0);
}

TEST_CASE("stateless and conversation requests mixed, sharing system prompts, give --no-state's tokens",
          "[engine][prefix_cache]") {
  asio::io_context io;
  for (std::uint32_t seed : {3u, 4u}) {
    INFO("seed " << seed);
    const Workload w = make_workload(seed);
    auto cached = make_engine(true, 13);
    auto baseline = make_engine(false, 512);
    // Earlier traffic of the other kind: a conversation with the stateless
    // clients' system prompt, a stateless request with the conversations'.
    // Every first turn below then finds its system prompt cached.
    for (actors::Engine* e : {cached.get(), baseline.get()}) {
      run(io, ask(*e, {w.clients[0].history[0], {"user", "Hello?"}}, "t", std::nullopt, "earlier"));
      run(io, ask(*e, {w.clients[1].history[0], {"user", "Hello?"}}));
    }
    const auto a = play(*cached, io, w, true);
    const auto b = play(*baseline, io, w, true);
    REQUIRE(a.size() == b.size());
    for (std::size_t r = 0; r < a.size(); ++r) {
      for (std::size_t i = 0; i < a[r].size(); ++i) {
        INFO("round " << r << " client " << i << (i % 2 == 1 ? " (conversation)" : " (stateless)"));
        CHECK(a[r][i].tokens == b[r][i].tokens);
        CHECK(a[r][i].text == b[r][i].text);
        CHECK(b[r][i].summary.cached_tokens == 0);
        // Round 0 too: the system prompt the other kind of request left.
        CHECK(a[r][i].summary.cached_tokens >= 16);
      }
    }
    const auto stats = run(io, cached->stats());
    CHECK(stats.tiers.prefix_matched_tokens > 0);
  }
}


TEST_CASE("100 conversations with one 1,000-token system prompt compute it once", "[engine][prefix_cache]") {
  TempDir dir;
  auto weights = generated_model(dir, 2048, 21);  // room for a 1,000-token system prompt
  auto make = [&](bool keep_kv) {
    actors::EngineOptions o;
    o.n_threads = 2;
    o.scheduler.keep_kv = keep_kv;
    o.scheduler.max_batch_tokens = 512;
    o.kv_block_tokens = 16;
    o.kv_device_blocks = 1024;
    o.kv_host_mb = 0;
    auto e = actors::Engine::create(weights, o);
    REQUIRE(e.has_value());
    return std::move(*e);
  };
  std::string system = "You are the assistant of a small bookshop by the sea.";
  for (int i = 0; system.size() < 4300; ++i) {
    system += " Rule " + std::to_string(i) + ": answer briefly, kindly and in plain words about books.";
  }
  constexpr int kConversations = 100;
  asio::io_context io;
  auto play_all = [&](actors::Engine& engine) {
    std::vector<Reply> replies;
    // The first conversation caches the system prompt; the other 99 start together.
    replies.push_back(run(io, ask(engine, {{"system", system}, {"user", "Question 0?"}}, "t", std::nullopt,
                                  "conv-0", 4)));
    std::vector<std::future<Reply>> futures;
    for (int i = 1; i < kConversations; ++i) {
      futures.push_back(asio::co_spawn(
          io, ask(engine, {{"system", system}, {"user", "Question " + std::to_string(i) + "?"}}, "t", std::nullopt,
                  "conv-" + std::to_string(i), 4),
          asio::use_future));
    }
    io.restart();
    io.run();
    for (auto& f : futures) replies.push_back(f.get());
    return replies;
  };
  auto shared = make(true);
  const auto with = play_all(*shared);
  const auto with_stats = run(io, shared->stats());
  auto none = make(false);
  const auto without = play_all(*none);
  const auto without_stats = run(io, none->stats());

  const std::int32_t prompt = with[0].summary.prompt_tokens;
  REQUIRE(prompt > 1000);
  CHECK(with[0].summary.cached_tokens == 0);
  std::int64_t computed = 0;
  for (int i = 0; i < kConversations; ++i) {
    INFO("conversation " << i);
    CHECK(with[std::size_t(i)].tokens == without[std::size_t(i)].tokens);
    CHECK(without[std::size_t(i)].summary.cached_tokens == 0);
    // The system prompt's full blocks (the rest and the question are computed).
    if (i > 0) CHECK(with[std::size_t(i)].summary.cached_tokens >= 1000);
    computed += with[std::size_t(i)].summary.prompt_tokens - with[std::size_t(i)].summary.cached_tokens;
  }
  // Prompt tokens processed: the system prompt once and each question, not 100 system prompts.
  CHECK(with_stats.prefill_tokens == computed);
  CHECK(with_stats.prefill_tokens < prompt + std::int64_t(kConversations) * 40);
  CHECK(without_stats.prefill_tokens >= std::int64_t(kConversations) * prompt);
  CHECK(with_stats.tiers.shared_device_blocks >= prompt / 16 - 1);
  // Once the conversations go and the cache is cleared, every block is free.
  for (int i = 0; i < kConversations; ++i) {
    REQUIRE(shared->delete_conversation("t", "conv-" + std::to_string(i)));
  }
  shared->clear_prefix_cache();
  const auto cleared = run(io, shared->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
  CHECK(cleared.tiers.shared_device_blocks == 0);
}

TEST_CASE("requests arriving together with one uncached system prompt share it as it is computed, "
          "with --no-state's tokens",
          "[engine][prefix_cache]") {
  // Nothing cached yet and a 48-token budget: the first request's prompt
  // takes several iterations; the others, admitted while it runs, share the
  // blocks it has written instead of computing them again.
  auto make = [](bool keep_kv, bool share_running) {
    actors::EngineOptions o;
    o.n_threads = 2;
    o.scheduler.keep_kv = keep_kv;
    o.scheduler.max_batch_tokens = 48;
    o.scheduler.share_running_prefixes = share_running;
    o.kv_block_tokens = 8;
    o.kv_device_blocks = 512;
    o.kv_host_mb = 0;
    auto e = actors::Engine::create(stories_model(), o);
    REQUIRE(e.has_value());
    return std::move(*e);
  };
  std::string system = "You tell short stories about a cat named Tom.";
  while (system.size() < 260) system += " Tom lives in a small house by the sea and likes fish.";
  constexpr int kRequests = 8;
  asio::io_context io;
  auto play_all = [&](actors::Engine& engine) {
    std::vector<std::future<Reply>> futures;
    for (int i = 0; i < kRequests; ++i) {
      futures.push_back(asio::co_spawn(
          io, ask(engine, {{"system", system}, {"user", "Story " + std::to_string(i) + "?"}}, "t", std::nullopt,
                  std::nullopt, 6),
          asio::use_future));
    }
    io.restart();
    io.run();
    std::vector<Reply> replies;
    for (auto& f : futures) replies.push_back(f.get());
    return replies;
  };
  auto sharing = make(true, true);
  const auto with = play_all(*sharing);
  const auto with_stats = run(io, sharing->stats());
  auto apart = make(true, false);
  (void)play_all(*apart);
  const auto apart_stats = run(io, apart->stats());
  auto none = make(false, true);
  const auto without = play_all(*none);
  std::int32_t shared_requests = 0;
  for (int i = 0; i < kRequests; ++i) {
    INFO("request " << i);
    CHECK(with[std::size_t(i)].tokens == without[std::size_t(i)].tokens);
    shared_requests += with[std::size_t(i)].summary.cached_tokens > 0 ? 1 : 0;
  }
  CHECK(shared_requests >= kRequests / 2);
  // Fewer prompt tokens computed than when a request shares only what
  // finished requests left cached.
  INFO("prefill tokens: sharing running turns " << with_stats.prefill_tokens << ", not "
                                                << apart_stats.prefill_tokens);
  CHECK(with_stats.prefill_tokens < apart_stats.prefill_tokens);
  sharing->clear_prefix_cache();
  const auto cleared = run(io, sharing->stats());
  CHECK(cleared.free_blocks == cleared.num_blocks);
}
