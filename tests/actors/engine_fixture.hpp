#pragma once
// Shared by the engine tests: models, real conversations from ../shared/data
// and a runner that plays conversations through an Engine and records what
// came out, turn by turn.
#include "actors/engine.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/llama2c_loader.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "tests/actors/engine_calls.hpp"
#include "tests/shared_data.hpp"
#include "tests/temp_dir.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace pensieve::testing {

namespace asio = boost::asio;

// stories260K (a real trained llama2.c model, vocab 512, context 512) with
// the built-in vocabulary (452 tokens, byte fallback) as its tokenizer: the
// text means nothing to the model, but every token is real work.
inline model::ModelWeights stories_model() {
  auto w = model::load_llama2c(shared_file("models/stories260K.bin"));
  REQUIRE(w.has_value());
  w->tokenizer = model::builtin_vocab();
  return std::move(*w);
}

// A generated Llama GGUF (random weights) with the real Llama 2 vocabulary.
inline model::ModelWeights generated_model(const TempDir& dir, std::int32_t max_context = 1024,
                                           std::uint64_t seed = 11) {
  model::TestModelOptions o;
  o.n_layers = 2;
  o.dim = 64;
  o.n_heads = 4;
  o.n_kv_heads = 2;
  o.ff_dim = 160;
  o.max_context = max_context;
  o.dtype = model::DType::f32;
  o.seed = seed;
  o.vocab_from = shared_file("vocab/ggml-vocab-llama-spm.gguf");
  const auto path = dir / "generated.gguf";
  REQUIRE(model::make_test_model(o, path).has_value());
  auto w = model::load_model(path);
  REQUIRE(w.has_value());
  return std::move(*w);
}

// Cuts a UTF-8 string to at most n bytes without splitting a character.
inline std::string cut_utf8(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// The user messages of the first `count` conversations of a data file,
// each cut to `max_bytes` and at most `max_turns` turns.
inline std::vector<std::vector<std::string>> user_turns(const std::string& file, std::size_t count,
                                                        std::size_t max_turns, std::size_t max_bytes) {
  std::ifstream in(shared_file("data/" + file));
  std::vector<std::vector<std::string>> out;
  for (std::string line; out.size() < count && std::getline(in, line);) {
    const auto obj = boost::json::parse(line).as_object();
    std::vector<std::string> turns;
    for (const auto& t : obj.at("turns").as_array()) {
      const auto& m = t.as_object();
      if (m.at("role").as_string() == "user" && turns.size() < max_turns) {
        turns.push_back(cut_utf8(std::string(m.at("content").as_string()), max_bytes));
      }
    }
    out.push_back(std::move(turns));
  }
  return out;
}

struct TurnRecord {
  std::vector<std::int32_t> tokens;  // sampled, in order
  std::string text;
  actors::TurnDone summary;
};

struct ConversationRecord {
  std::vector<TurnRecord> turns;
  std::vector<std::int32_t> history;  // the conversation's tokens at the end
};

// Runs `task` on `io` (on this thread) to its end; its result.
template <class T>
T run(asio::io_context& io, asio::awaitable<T> task) {
  auto f = asio::co_spawn(io, std::move(task), asio::use_future);
  io.restart();
  io.run();
  return f.get();
}

inline model::SamplingParams greedy(std::int32_t max_tokens) {
  model::SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  p.logprobs = true;  // deltas carry their token ids
  return p;
}

// An engine on stories_model() with `o`; an engine that cannot start fails
// the test with its reason.
inline std::unique_ptr<actors::Engine> make_stories_engine(actors::EngineOptions o) {
  auto e = actors::Engine::create(stories_model(), std::move(o));
  if (!e) FAIL(e.error().message);
  return std::move(*e);
}

// Three user turns that continue one story.
inline std::vector<std::string> story_turns() {
  return {"Once upon a time there was a little cat.", "What did the cat eat?", "And then the sun came out."};
}

// One greedy turn of at most `max_tokens` on tenant "t"'s stored
// conversation `id`; its sampled tokens.
inline asio::awaitable<std::vector<std::int32_t>> greedy_turn_tokens(actors::Engine& e, std::string id,
                                                                     std::string text, std::int32_t max_tokens = 16) {
  std::vector<std::int32_t> tokens;
  actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
    for (const auto& t : d.tokens) tokens.push_back(t.token);
    co_return true;
  };
  std::vector<model::ChatMessage> messages{{"user", std::move(text)}};
  auto result = co_await send_turn(e, "t", id, std::move(messages), greedy(max_tokens), sink);
  REQUIRE(result.has_value());
  co_return tokens;
}

// Tenant "t"'s conversation `id`, which must exist.
inline asio::awaitable<actors::ConversationSnapshot> require_snapshot(actors::Engine& e, std::string id) {
  auto s = co_await e.snapshot("t", id);
  REQUIRE(s.has_value());
  co_return std::move(*s);
}

// Plays one conversation, turn after turn, each turn sampled with `params`
// (logprobs on, so the deltas carry their token ids).
inline asio::awaitable<ConversationRecord> play_sampled(actors::Engine& engine, std::string id,
                                                        std::vector<std::string> turns, model::SamplingParams params) {
  params.logprobs = true;
  ConversationRecord record;
  auto created = engine.create_conversation("t", id);
  REQUIRE(created.has_value());
  for (const auto& text : turns) {
    TurnRecord turn;
    actors::TurnSink sink = [&](const actors::TurnDelta& d) -> asio::awaitable<bool> {
      turn.text += d.text;
      for (const auto& t : d.tokens) turn.tokens.push_back(t.token);
      co_return true;
    };
    std::vector<model::ChatMessage> messages{{"user", text}};
    auto result = co_await send_turn(engine, "t", id, std::move(messages), params, sink);
    REQUIRE(result.has_value());
    turn.summary = *result;
    record.turns.push_back(std::move(turn));
  }
  auto snapshot = co_await engine.snapshot("t", id);
  REQUIRE(snapshot.has_value());
  record.history = snapshot->tokens;
  co_return record;
}

// The same, greedy.
inline asio::awaitable<ConversationRecord> play(actors::Engine& engine, std::string id,
                                                std::vector<std::string> turns, std::int32_t max_tokens) {
  return play_sampled(engine, std::move(id), std::move(turns), greedy(max_tokens));
}

// Plays every conversation, one after another or all at once.
inline std::map<std::string, ConversationRecord> play_all(actors::Engine& engine, asio::io_context& io,
                                                          const std::vector<std::vector<std::string>>& convs,
                                                          std::int32_t max_tokens, bool concurrent) {
  std::map<std::string, ConversationRecord> out;
  if (!concurrent) {
    for (std::size_t i = 0; i < convs.size(); ++i) {
      auto f = asio::co_spawn(io, play(engine, "c" + std::to_string(i), convs[i], max_tokens), asio::use_future);
      io.restart();
      io.run();
      out["c" + std::to_string(i)] = f.get();
    }
    return out;
  }
  std::vector<std::future<ConversationRecord>> futures;
  for (std::size_t i = 0; i < convs.size(); ++i) {
    futures.push_back(
        asio::co_spawn(io, play(engine, "c" + std::to_string(i), convs[i], max_tokens), asio::use_future));
  }
  io.restart();
  io.run();
  for (std::size_t i = 0; i < convs.size(); ++i) out["c" + std::to_string(i)] = futures[i].get();
  return out;
}

}  // namespace pensieve::testing
