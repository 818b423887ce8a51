// The reply memo's life (actors/reply_memo.hpp) end to end: a stateless
// client's resent reply maps back to the ids the model wrote whether or not
// the reply's KV is still cached, so a server with a cache answers a resent
// history as a --no-state server does (issue 21's first invariant), after
// its cache was cleared too.
#include "tests/actors/engine_fixture.hpp"
#include "gpu/model/builtin_vocab.hpp"

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::unique_ptr<actors::Engine> engine_with(bool keep_kv) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.scheduler.keep_kv = keep_kv;
  o.kv_block_tokens = 8;
  o.kv_device_blocks = 256;
  o.kv_host_mb = 0;
  return make_stories_engine(std::move(o));
}

struct Reply {
  std::vector<std::int32_t> tokens;
  std::string text;
  std::int32_t prompt_tokens = 0;
};

asio::awaitable<Reply> ask(actors::Engine& engine, std::vector<model::ChatMessage> messages) {
  actors::TurnRequest request = stateless_request(std::move(messages), greedy(16));
  request.tenant = "t";
  request.sampling.ignore_eos = true;
  Reply reply;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    reply.text += d.text;
    for (const auto& t : d.tokens) reply.tokens.push_back(t.token);
    co_return true;
  };
  auto stream = engine.start(co_await asio::this_coro::executor, std::move(request));
  REQUIRE(stream.has_value());
  auto result = co_await actors::drain_turn(std::move(*stream), std::move(sink));
  REQUIRE(result.has_value());
  reply.prompt_tokens = result->prompt_tokens;
  co_return reply;
}

}  // namespace

TEST_CASE("a resent reply keeps its generated ids after the cache is cleared: --no-state's tokens",
          "[engine][prefix_cache][reply_memo]") {
  auto tok = model::Tokenizer::from_data(model::builtin_vocab());
  REQUIRE(tok.has_value());
  asio::io_context io;
  auto cleared = engine_with(true), kept = engine_with(true), no_state = engine_with(false);
  const std::string system = "You tell short stories about a cat named Tom.";
  // A question whose reply's text encodes to a different number of ids than
  // the model wrote: forgetting the ids would change the next prompt's length.
  std::optional<std::pair<std::string, Reply>> found;
  for (const char* q : {"What is a cat?", "Where do cats sleep?", "Why is the sea blue?", "What is a park?",
                        "Who is Tom?", "Tell me about the sun."}) {
    const Reply r = run(io, ask(*no_state, {{"system", system}, {"user", q}}));
    if (tok->encode(r.text, false, false).size() != r.tokens.size()) {
      found.emplace(q, r);
      break;
    }
  }
  REQUIRE(found);
  const auto& [question, first] = *found;
  for (auto* e : {cleared.get(), kept.get()}) {
    const Reply r = run(io, ask(*e, {{"system", system}, {"user", question}}));
    REQUIRE(r.tokens == first.tokens);
    REQUIRE(r.text == first.text);
  }
  cleared->clear_prefix_cache();
  const auto stats = run(io, cleared->stats());
  REQUIRE(stats.free_blocks == stats.num_blocks);  // the reply's blocks are gone from every tier
  const std::vector<model::ChatMessage> resent = {
      {"system", system}, {"user", question}, {"assistant", first.text}, {"user", "And then?"}};
  const Reply want = run(io, ask(*no_state, resent));
  const Reply after_clear = run(io, ask(*cleared, resent));
  const Reply cached = run(io, ask(*kept, resent));
  CHECK(after_clear.prompt_tokens == want.prompt_tokens);
  CHECK(cached.prompt_tokens == want.prompt_tokens);
  CHECK(after_clear.tokens == want.tokens);
  CHECK(cached.tokens == want.tokens);
}
