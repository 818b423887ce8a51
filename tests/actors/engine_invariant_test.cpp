// The stateful engine's central invariant: a conversation's tokens are the
// same whether its KV cache was kept between turns (stateful), recomputed
// every turn (--no-state), or computed in batches shared with other
// conversations and chunked differently. Real conversations from
// ../shared/data, greedy, fixed max tokens, on a trained model
// (stories260K) and a generated one.
#include "tests/actors/engine_fixture.hpp"

using namespace pensieve;
using namespace pensieve::testing;

namespace {

std::unique_ptr<actors::Engine> make_engine(model::ModelWeights weights, bool stateful, std::int32_t batch_tokens) {
  actors::EngineOptions o;
  o.n_threads = 2;
  o.scheduler.keep_kv = stateful;
  o.scheduler.max_batch_tokens = batch_tokens;
  o.kv_cache_mb = 64;
  auto e = actors::Engine::create(std::move(weights), o);
  REQUIRE(e.has_value());
  return std::move(*e);
}

void check_same(const std::map<std::string, ConversationRecord>& a, const std::map<std::string, ConversationRecord>& b,
                const char* what) {
  INFO(what);
  REQUIRE(a.size() == b.size());
  for (const auto& [id, rec] : a) {
    const ConversationRecord& other = b.at(id);
    INFO("conversation " << id);
    REQUIRE(rec.turns.size() == other.turns.size());
    for (std::size_t t = 0; t < rec.turns.size(); ++t) {
      INFO("turn " << t);
      CHECK(rec.turns[t].tokens == other.turns[t].tokens);
      CHECK(rec.turns[t].text == other.turns[t].text);
      CHECK(rec.turns[t].summary.prompt_tokens == other.turns[t].summary.prompt_tokens);
      CHECK(rec.turns[t].summary.completion_tokens == other.turns[t].summary.completion_tokens);
    }
    CHECK(rec.history == other.history);
  }
}

void check_invariant(const std::function<model::ModelWeights()>& weights,
                     const std::vector<std::vector<std::string>>& convs, std::int32_t max_tokens) {
  asio::io_context io;  // outlives the engines, which complete operations on it
  auto stateful = make_engine(weights(), true, 512);
  const auto a = play_all(*stateful, io, convs, max_tokens, false);
  auto stateless = make_engine(weights(), false, 512);
  const auto b = play_all(*stateless, io, convs, max_tokens, false);
  // Small iterations: every batch mixes decodes and prefill chunks of
  // several conversations, cut at other places than above.
  auto mixed = make_engine(weights(), true, 13);
  const auto c = play_all(*mixed, io, convs, max_tokens, true);
  auto mixed_stateless = make_engine(weights(), false, 7);
  const auto d = play_all(*mixed_stateless, io, convs, max_tokens, true);
  check_same(a, b, "stateful vs --no-state");
  check_same(a, c, "stateful vs stateful interleaved");
  check_same(a, d, "stateful vs --no-state interleaved");
  // The modes did different work: stateful turns after the first reused
  // their conversation's KV; stateless ones never did.
  for (const auto& [id, rec] : a) {
    CHECK(rec.turns.front().summary.cached_tokens == 0);
    for (std::size_t t = 1; t < rec.turns.size(); ++t) {
      CHECK(rec.turns[t].summary.cached_tokens > 0);
      CHECK(rec.turns[t].summary.cached_tokens < rec.turns[t].summary.prompt_tokens);
    }
    for (const auto& turn : b.at(id).turns) CHECK(turn.summary.cached_tokens == 0);
    std::int32_t generated = 0;
    for (const auto& turn : rec.turns) {
      CHECK(turn.summary.completion_tokens == std::int32_t(turn.tokens.size()));
      generated += turn.summary.completion_tokens;
    }
    CHECK(generated > 0);
    // Each turn's prompt is the whole history so far: it grows by at least
    // the previous reply.
    for (std::size_t t = 1; t < rec.turns.size(); ++t) {
      CHECK(rec.turns[t].summary.prompt_tokens >
            rec.turns[t - 1].summary.prompt_tokens + rec.turns[t - 1].summary.completion_tokens);
    }
    CHECK(rec.history.size() > std::size_t(rec.turns.back().summary.prompt_tokens));
  }
}

}  // namespace

TEST_CASE("stories260K: stateful, --no-state and interleaved runs give the same tokens", "[engine][invariant]") {
  // Context 512: short turns so three of them fit.
  const auto convs = user_turns("oasst.jsonl", 4, 3, 60);
  check_invariant([] { return stories_model(); }, convs, 16);
}

TEST_CASE("generated model: stateful, --no-state and interleaved runs give the same tokens", "[engine][invariant]") {
  TempDir dir("invariant");
  const auto convs = user_turns("sharegpt.jsonl", 3, 3, 160);
  check_invariant([&] { return generated_model(dir); }, convs, 12);
}
