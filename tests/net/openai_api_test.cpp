// The rest of the HTTP API over loopback with the real engine: API keys and
// tenants, the conversations resource, legacy text completions, /metrics and
// the request timeout.
#include "actors/engine.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "gpu/text/tokenizer.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/net/http_client.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <thread>

using namespace pensieve;
namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using pensieve::testing::http_call;

namespace {


struct Server {
  asio::io_context io;  // first in, last out: the engine completes operations on it
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  net::ServerMetrics metrics;
  std::unique_ptr<actors::Engine> engine;
  std::unique_ptr<net::EngineBackend> backend;
  std::unique_ptr<net::HttpServer> http;
  std::thread thread;

  explicit Server(std::shared_ptr<const net::ApiKeys> keys = nullptr,
                  std::chrono::milliseconds timeout = std::chrono::minutes(1)) {
    actors::EngineOptions eo;
    eo.n_threads = 1;
    eo.kv_cache_mb = 16;
    eo.on_iteration = [this](const actors::IterationRecord& r) {
      metrics.batch(r.sequences, r.decode_tokens + r.prefill_tokens);
    };
    auto e = actors::Engine::create(testing::tiny_model(), eo);
    REQUIRE(e.has_value());
    engine = std::move(*e);
    backend = std::make_unique<net::EngineBackend>(*engine, net::EngineBackendOptions{timeout, &metrics});
    net::RouteOptions ro;
    ro.keys = std::move(keys);
    ro.metrics = &metrics;
    http = std::make_unique<net::HttpServer>(io.get_executor(), net::make_openai_routes(*backend, ro),
                                             net::HttpServerOptions{});
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~Server() {
    asio::co_spawn(io, http->stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
  testing::HttpReply call(http::verb verb, const std::string& target, const std::string& body = {},
                          const std::string& key = {}) {
    return http_call(http->port(), verb, target, body, key.empty() ? std::string() : "Bearer " + key);
  }
};

std::string chat(const std::string& conversation, const std::string& text, int max_tokens = 6) {
  json::object body{{"model", "tiny"},
                    {"messages", json::array{json::object{{"role", "user"}, {"content", text}}}},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"max_tokens", max_tokens}};
  if (!conversation.empty()) body["conversation"] = conversation;
  return json::serialize(body);
}

std::shared_ptr<const net::ApiKeys> two_tenants() {
  auto keys = net::ApiKeys::parse("# key tenant\nkey-a alice\nkey-b bob\n", "test");
  REQUIRE(keys.has_value());
  return std::make_shared<const net::ApiKeys>(std::move(*keys));
}

}  // namespace

TEST_CASE("the API keys file is read strictly", "[net][auth]") {
  CHECK(net::ApiKeys::parse("k1 t1\n\nk2 t2 # comment\n", "f").has_value());
  CHECK_THAT(net::ApiKeys::parse("k1\n", "f").error().message, Catch::Contains("f:1: expected 'KEY TENANT'"));
  CHECK_THAT(net::ApiKeys::parse("k1 t1\nk1 t2\n", "f").error().message, Catch::Contains("twice"));
  CHECK_THAT(net::ApiKeys::parse("# nothing\n", "f").error().message, Catch::Contains("no keys"));
  const auto keys = net::ApiKeys::parse("k1 t1\n", "f").value();
  CHECK(keys.tenant_for("Bearer k1") == std::optional<std::string>("t1"));
  CHECK_FALSE(keys.tenant_for("Bearer k2"));
  CHECK_FALSE(keys.tenant_for("Bearer k"));
  CHECK_FALSE(keys.tenant_for("k1"));
  CHECK_FALSE(keys.tenant_for(""));
  CHECK(net::ApiKeys().tenant_for("") == std::optional<std::string>(""));  // open server
}

TEST_CASE("with API keys a request needs a valid key, and tenants never see each other's conversations",
          "[net][auth][e2e]") {
  Server s(two_tenants());
  auto none = s.call(http::verb::post, "/v1/chat/completions", chat("", "hi"));
  CHECK(none.status == 401);
  CHECK(json::parse(none.body).at("error").at("code").as_string() == "invalid_api_key");
  CHECK(s.call(http::verb::get, "/v1/models", {}, "wrong").status == 401);
  CHECK(s.call(http::verb::get, "/health").status == 200);  // probes need no key
  REQUIRE(s.call(http::verb::get, "/v1/models", {}, "key-a").status == 200);

  REQUIRE(s.call(http::verb::post, "/v1/chat/completions", chat("shared-name", "hello"), "key-a").status == 200);
  // Bob uses the same conversation id: his own, empty conversation.
  auto bob = s.call(http::verb::post, "/v1/chat/completions", chat("shared-name", "hello"), "key-b");
  REQUIRE(bob.status == 200);
  CHECK(json::parse(bob.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64() == 0);
  auto alice_view = json::parse(s.call(http::verb::get, "/v1/conversations/shared-name", {}, "key-a").body);
  CHECK(alice_view.at("messages").as_array().size() == 2);
  // Alice's private conversation is a 404 for Bob, not its data.
  REQUIRE(s.call(http::verb::post, "/v1/conversations", R"({"id":"alice-only"})", "key-a").status == 200);
  auto probe = s.call(http::verb::get, "/v1/conversations/alice-only", {}, "key-b");
  CHECK(probe.status == 404);
  CHECK(probe.body.find("messages") == std::string::npos);
  CHECK(s.call(http::verb::delete_, "/v1/conversations/alice-only", {}, "key-b").status == 404);
  CHECK(s.call(http::verb::get, "/v1/conversations/alice-only", {}, "key-a").status == 200);
}

TEST_CASE("conversations can be created, read, listed and deleted over HTTP", "[net][conversations][e2e]") {
  Server s;
  auto created = s.call(http::verb::post, "/v1/conversations");
  REQUIRE(created.status == 200);
  const auto id = std::string(json::parse(created.body).at("id").as_string());
  CHECK(id.starts_with("conv_"));
  CHECK(json::parse(created.body).at("object").as_string() == "conversation");
  REQUIRE(s.call(http::verb::post, "/v1/chat/completions", chat(id, "first")).status == 200);
  REQUIRE(s.call(http::verb::post, "/v1/chat/completions", chat(id, "second")).status == 200);
  auto view = json::parse(s.call(http::verb::get, "/v1/conversations/" + id).body).as_object();
  const auto& messages = view.at("messages").as_array();
  REQUIRE(messages.size() == 4);
  CHECK(messages[0].at("role").as_string() == "user");
  CHECK(messages[0].at("content").as_string() == "first");
  CHECK(messages[1].at("role").as_string() == "assistant");
  CHECK(messages[2].at("content").as_string() == "second");
  // Where its KV lives: every chunk of its history on the device (no
  // pressure here), none moving between tiers once the turn is done.
  const auto& kv = view.at("kv").as_object();
  CHECK(kv.at("block_tokens").as_int64() > 0);
  CHECK(kv.at("chunks").at("device").as_int64() > 0);
  CHECK(kv.at("chunks").at("host").as_int64() == 0);
  CHECK(kv.at("chunks").at("dropped").as_int64() == 0);
  auto list = json::parse(s.call(http::verb::get, "/v1/conversations").body);
  CHECK(list.at("data").as_array().size() == 1);
  // A chosen id, a duplicate, a bad one.
  CHECK(s.call(http::verb::post, "/v1/conversations", R"({"id":"mine"})").status == 200);
  CHECK(s.call(http::verb::post, "/v1/conversations", R"({"id":"mine"})").status == 400);
  CHECK(s.call(http::verb::post, "/v1/conversations", R"({"id":"a b"})").status == 400);
  CHECK(s.call(http::verb::post, "/v1/conversations", R"({"id":7})").status == 400);
  CHECK(s.call(http::verb::post, "/v1/conversations", "not json").status == 400);
  auto deleted = s.call(http::verb::delete_, "/v1/conversations/" + id);
  REQUIRE(deleted.status == 200);
  CHECK(json::parse(deleted.body).at("deleted").as_bool());
  CHECK(s.call(http::verb::get, "/v1/conversations/" + id).status == 404);
  CHECK(s.call(http::verb::delete_, "/v1/conversations/" + id).status == 404);
  CHECK(s.call(http::verb::put, "/v1/conversations/mine").status == 405);
}

TEST_CASE("legacy text completions answer in the OpenAI shape, whole and streamed", "[net][completions][e2e]") {
  Server s;
  const std::string body = R"({"model":"tiny","prompt":"Once upon a time","max_tokens":5,"temperature":0,"ignore_eos":true)";
  auto whole = s.call(http::verb::post, "/v1/completions", body + "}");
  REQUIRE(whole.status == 200);
  auto o = json::parse(whole.body).as_object();
  CHECK(o.at("object").as_string() == "text_completion");
  CHECK(o.at("id").as_string().starts_with("cmpl-"));
  CHECK(o.at("choices").at(0).at("finish_reason").as_string() == "length");
  CHECK(o.at("usage").at("completion_tokens").as_int64() == 5);
  const std::string text(o.at("choices").at(0).at("text").as_string());
  auto streamed = s.call(http::verb::post, "/v1/completions", body + R"(,"stream":true})");
  REQUIRE(streamed.status == 200);
  std::string joined;
  std::size_t pos = 0;
  while ((pos = streamed.body.find("data: {", pos)) != std::string::npos) {
    const auto end = streamed.body.find("\n\n", pos);
    auto chunk = json::parse(streamed.body.substr(pos + 6, end - pos - 6)).as_object();
    CHECK(chunk.at("object").as_string() == "text_completion");
    joined += chunk.at("choices").at(0).at("text").as_string();
    pos = end;
  }
  CHECK(joined == text);
  CHECK(streamed.body.ends_with("data: [DONE]\n\n"));
  // Errors: no prompt, echo, a conversation.
  CHECK(s.call(http::verb::post, "/v1/completions", R"({"model":"tiny"})").status == 400);
  CHECK(s.call(http::verb::post, "/v1/completions", R"({"model":"tiny","prompt":"x","echo":true})").status == 400);
  CHECK(s.call(http::verb::post, "/v1/completions", R"({"model":"tiny","prompt":"x","conversation":"c"})").status ==
        400);
}

TEST_CASE("a completion prompt of token ids completes as its text does, reuses its KV and names bad ids",
          "[net][completions][e2e]") {
  Server s;
  auto tokenizer = model::Tokenizer::from_data(model::builtin_vocab());
  REQUIRE(tokenizer.has_value());
  const std::string text = "Once upon a time there was a little girl who lived in a village near the forest";
  const auto ids = tokenizer->encode(text, tokenizer->adds_bos_by_default(), false);
  REQUIRE(ids.size() > std::size_t(actors::EngineOptions{}.kv_block_tokens));
  json::array id_array;
  for (auto id : ids) id_array.emplace_back(std::int64_t(id));
  const std::string options = R"(,"max_tokens":6,"temperature":0,"ignore_eos":true})";
  auto by_text = s.call(http::verb::post, "/v1/completions",
                        R"({"model":"tiny","prompt":")" + text + R"(","cache_salt":"text")" + options);
  REQUIRE(by_text.status == 200);
  const auto text_reply = json::parse(by_text.body).as_object();
  for (const std::string& prompt : {json::serialize(id_array), "[" + json::serialize(id_array) + "]"}) {
    INFO(prompt);
    auto by_ids = s.call(http::verb::post, "/v1/completions", R"({"model":"tiny","prompt":)" + prompt + options);
    REQUIRE(by_ids.status == 200);
    const auto o = json::parse(by_ids.body).as_object();
    CHECK(o.at("choices").at(0).at("text") == text_reply.at("choices").at(0).at("text"));
    CHECK(o.at("usage").at("prompt_tokens").as_int64() == std::int64_t(ids.size()));
  }
  // A third finds the first one's KV: its full blocks, never its newest token.
  auto again = s.call(http::verb::post, "/v1/completions", R"({"model":"tiny","prompt":)" +
                                                              json::serialize(id_array) + options);
  REQUIRE(again.status == 200);
  const std::int64_t cached =
      json::parse(again.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  CHECK(cached >= actors::EngineOptions{}.kv_block_tokens);
  CHECK(cached <= std::int64_t(ids.size()) - 1);
  const std::int64_t vocab = std::int64_t(tokenizer->vocab_size());
  for (const std::string& bad : {std::string("[]"), std::string("[1,-2]"), std::string("[1,2.5]"),
                                std::string(R"([1,"a"])"), std::string("[[1],[2]]"), std::string("{}"),
                                "[1," + std::to_string(vocab) + "]"}) {
    INFO(bad);
    auto r = s.call(http::verb::post, "/v1/completions", R"({"model":"tiny","prompt":)" + bad + options);
    CHECK(r.status == 400);
    const auto error = json::parse(r.body).at("error").as_object();
    CHECK(error.at("param").as_string() == "prompt");
    CHECK(error.at("type").as_string() == "invalid_request_error");
  }
  auto past = s.call(http::verb::post, "/v1/completions",
                     R"({"model":"tiny","prompt":[1,)" + std::to_string(vocab) + "]" + options);
  CHECK_THAT(std::string(json::parse(past.body).at("error").at("message").as_string()),
             Catch::Contains("prompt[1] = " + std::to_string(vocab) + " is not a token id of this model"));
}

TEST_CASE("GET /metrics reports requests, tokens, latencies, batches and KV blocks", "[net][metrics][e2e]") {
  Server s;
  REQUIRE(s.call(http::verb::post, "/v1/chat/completions", chat("m", "hello", 4)).status == 200);
  REQUIRE(s.call(http::verb::post, "/v1/chat/completions", chat("m", "again", 4)).status == 200);
  CHECK(s.call(http::verb::get, "/nowhere").status == 404);
  auto m = s.call(http::verb::get, "/metrics");
  REQUIRE(m.status == 200);
  CHECK(m.content_type.starts_with("text/plain"));
  const std::string& t = m.body;
  CHECK_THAT(t, Catch::Contains("pensieve_requests_total{route=\"/v1/chat/completions\",status=\"200\"} 2"));
  CHECK_THAT(t, Catch::Contains("pensieve_requests_total{route=\"other\",status=\"404\"} 1"));
  CHECK_THAT(t, Catch::Contains("pensieve_generated_tokens_total 8"));
  CHECK_THAT(t, Catch::Contains("pensieve_ttft_seconds_count 2"));
  CHECK_THAT(t, Catch::Contains("pensieve_inter_token_seconds_count"));
  // Each turn's queue, prefill and decode phases (both ran all three).
  CHECK_THAT(t, Catch::Contains("pensieve_turn_queue_seconds_count 2\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_turn_prefill_seconds_count 2\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_turn_decode_seconds_count 2\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_batch_sequences_count"));
  CHECK_THAT(t, Catch::Contains("pensieve_kv_blocks{tier=\"device\",state=\"free\"}"));
  // Drops by reason; nothing was evicted by two short turns.
  for (const char* reason : {"dropped_no_lower_tier", "dropped_host_busy", "dropped_coldest", "dropped_while_spilling"}) {
    CHECK_THAT(t, Catch::Contains(std::string("pensieve_kv_evictions_total{tier=\"device\",reason=\"") + reason + "\"} 0\n"));
  }
  CHECK_THAT(t, Catch::Contains("pensieve_kv_evictions_total{tier=\"disk\",reason=\"restore_given_up\"} 0\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_queue_running 0"));
  CHECK_THAT(t, Catch::Contains("pensieve_cached_conversations 1"));
  // The test engine keeps the fixed default cost model (1 per token, 1/1024 per pair).
  CHECK_THAT(t, Catch::Contains("pensieve_eviction_cost_per_token_seconds 1\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_eviction_cost_per_token_pair_seconds 0.0009765625\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_kv_pinned_chunks 0\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_kv_pinned_blocks 0\n"));
  CHECK_THAT(t, Catch::Contains("pensieve_kv_pins_refused_total 0\n"));
  const std::string cap_line = "\npensieve_kv_pin_cap_blocks ";
  const auto cap_at = t.find(cap_line);
  REQUIRE(cap_at != std::string::npos);
  CHECK(std::stoll(t.substr(cap_at + cap_line.size())) > 0);  // half the device's blocks
  // The second turn reused the first's KV: cached prompt tokens were counted.
  CHECK(t.find("pensieve_cached_prompt_tokens_total 0\n") == std::string::npos);
}

TEST_CASE("stateless requests reuse only their tenant's and cache_salt's cached prefix, and /metrics counts it",
          "[net][prefix_cache][e2e]") {
  Server s(two_tenants());
  const std::string system = "You are a careful assistant. Answer in one short sentence, in plain words, and never "
                             "use lists, tables or code unless the question asks for them.";
  auto body = [&](std::optional<std::string> salt) {
    json::object b{{"model", "tiny"},
                   {"messages", json::array{json::object{{"role", "system"}, {"content", system}},
                                            json::object{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
                   {"temperature", 0},
                   {"ignore_eos", true},
                   {"max_tokens", 4}};
    if (salt) b["cache_salt"] = *salt;
    return json::serialize(b);
  };
  auto cached = [](const testing::HttpReply& r) {
    REQUIRE(r.status == 200);
    return json::parse(r.body).at("usage").at("prompt_tokens_details").at("cached_tokens").as_int64();
  };
  CHECK(cached(s.call(http::verb::post, "/v1/chat/completions", body({}), "key-a")) == 0);
  CHECK(cached(s.call(http::verb::post, "/v1/chat/completions", body({}), "key-a")) > 0);
  CHECK(cached(s.call(http::verb::post, "/v1/chat/completions", body({}), "key-b")) == 0);  // another tenant
  CHECK(cached(s.call(http::verb::post, "/v1/chat/completions", body("s1"), "key-a")) == 0);
  CHECK(cached(s.call(http::verb::post, "/v1/chat/completions", body("s1"), "key-a")) > 0);
  CHECK(cached(s.call(http::verb::post, "/v1/chat/completions", body("s2"), "key-a")) == 0);
  auto bad = s.call(http::verb::post, "/v1/chat/completions",
                    R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"cache_salt":7})", "key-a");
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body).at("error").at("param").as_string() == "cache_salt");
  // Legacy completions look up the same way.
  const std::string prompt =
      R"({"model":"tiny","prompt":")" + system + R"(","max_tokens":3,"temperature":0,"ignore_eos":true})";
  CHECK(cached(s.call(http::verb::post, "/v1/completions", prompt, "key-a")) == 0);
  CHECK(cached(s.call(http::verb::post, "/v1/completions", prompt, "key-a")) > 0);
  const std::string m = s.call(http::verb::get, "/metrics", {}, "key-a").body;
  auto value = [&](const std::string& name) {
    const auto at = m.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stod(m.substr(at + name.size() + 2));
  };
  const double queried = value("pensieve_prefix_cache_queried_tokens_total");
  const double matched = value("pensieve_prefix_cache_matched_tokens_total");
  CHECK(matched > 0);
  CHECK(matched < queried);
  CHECK(value("pensieve_prefix_cache_paths") >= 4);
  CHECK(value("pensieve_kv_shared_blocks") >= 0);
}

TEST_CASE("a turn that outlives the request timeout is cancelled and answered with 504", "[net][timeout][e2e]") {
  Server s(nullptr, std::chrono::milliseconds(1));
  auto r = s.call(http::verb::post, "/v1/chat/completions", chat("", "hello", 200));
  CHECK(r.status == 504);
  CHECK(json::parse(r.body).at("error").at("code").as_string() == "timeout");
  s.engine->clear_prefix_cache();  // what the stateless turn computed stays cached until then
  auto stats = asio::co_spawn(s.io, s.engine->stats(), asio::use_future).get();
  CHECK(stats.running == 0);
  CHECK(stats.free_blocks == stats.num_blocks);
}
