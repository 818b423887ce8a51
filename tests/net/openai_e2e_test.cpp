// The OpenAI-compatible API end to end over loopback, with a real (small,
// generated) model behind it.
#include "actors/engine.hpp"
#include "gpu/model/builtin_vocab.hpp"
#include "gpu/model/model_loader.hpp"
#include "gpu/model/test_model.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/net/http_client.hpp"
#include "tests/net/invalid_turns.hpp"
#include "tests/net/server_fixture.hpp"
#include "tests/tiny_model.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>
#include <unistd.h>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using namespace pensieve;
using pensieve::testing::http_call;

namespace {


struct Server : testing::TestServer {
  Server() : TestServer(testing::tiny_model()) {}
  testing::HttpReply post(const std::string& body) {
    return http_call(http->port(), http::verb::post, "/v1/chat/completions", body);
  }
};

std::string chat_body(const std::string& extra, int max_tokens = 12) {
  return R"({"model":"tiny","messages":[{"role":"user","content":"Hello there"}],"temperature":0,)"
         R"("ignore_eos":true,"max_tokens":)" + std::to_string(max_tokens) + extra + "}";
}

// The data: payloads of an SSE body, in order.
std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> events;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const std::size_t end = body.find("\n\n", pos);
    events.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return events;
}

}  // namespace

TEST_CASE("GET /v1/models lists the served model", "[net][e2e]") {
  Server s;
  auto r = http_call(s.http->port(), http::verb::get, "/v1/models");
  REQUIRE(r.status == 200);
  auto body = json::parse(r.body);
  CHECK(body.at("object").as_string() == "list");
  CHECK(body.at("data").at(0).at("id").as_string() == "tiny");
}

TEST_CASE("a chat completion answers in the OpenAI shape with exact usage", "[net][e2e]") {
  Server s;
  auto r = s.post(chat_body(""));
  REQUIRE(r.status == 200);
  auto body = json::parse(r.body).as_object();
  CHECK(body.at("object").as_string() == "chat.completion");
  CHECK(body.at("id").as_string().starts_with("chatcmpl-"));
  CHECK(body.at("model").as_string() == "tiny");
  const auto& choice = body.at("choices").at(0).as_object();
  CHECK(choice.at("message").at("role").as_string() == "assistant");
  CHECK(choice.at("finish_reason").as_string() == "length");
  CHECK(body.at("usage").at("completion_tokens").as_int64() == 12);
  CHECK(body.at("usage").at("prompt_tokens").as_int64() > 5);
  // Greedy decoding is deterministic: the same request gives the same text.
  auto again = json::parse(s.post(chat_body("")).body);
  CHECK(again.at("choices").at(0).at("message").at("content") == choice.at("message").at("content"));
}

TEST_CASE("a streamed chat completion carries the same text as the whole one", "[net][e2e]") {
  Server s;
  auto whole = json::parse(s.post(chat_body("")).body);
  auto r = s.post(chat_body(R"(,"stream":true,"stream_options":{"include_usage":true})"));
  REQUIRE(r.status == 200);
  CHECK(r.content_type == "text/event-stream");
  auto events = sse_events(r.body);
  REQUIRE(events.size() >= 4);
  CHECK(events.back() == "[DONE]");
  std::string text;
  std::string finish;
  for (std::size_t i = 0; i + 2 < events.size(); ++i) {
    auto chunk = json::parse(events[i]).as_object();
    CHECK(chunk.at("object").as_string() == "chat.completion.chunk");
    const auto& choice = chunk.at("choices").at(0).as_object();
    if (auto* c = choice.at("delta").as_object().if_contains("content")) text += c->as_string();
    if (!choice.at("finish_reason").is_null()) finish = choice.at("finish_reason").as_string();
  }
  CHECK(finish == "length");
  CHECK(text == whole.at("choices").at(0).at("message").at("content").as_string());
  auto usage = json::parse(events[events.size() - 2]);
  CHECK(usage.at("choices").as_array().empty());
  CHECK(usage.at("usage").at("completion_tokens").as_int64() == 12);
}

TEST_CASE("logprobs report the chosen token and its alternatives", "[net][e2e]") {
  Server s;
  auto r = s.post(chat_body(R"(,"logprobs":true,"top_logprobs":3)"));
  REQUIRE(r.status == 200);
  auto content = json::parse(r.body).at("choices").at(0).at("logprobs").at("content").as_array();
  REQUIRE(content.size() == 12);
  for (const auto& lp : content) {
    const auto& top = lp.at("top_logprobs").as_array();
    REQUIRE(top.size() == 3);
    // Greedy: the chosen token is the most likely one.
    CHECK(lp.at("logprob").to_number<double>() == Approx(top[0].at("logprob").to_number<double>()));
    CHECK(lp.at("logprob").to_number<double>() <= 0.0);
  }
}

TEST_CASE("request errors answer with the right status and an OpenAI error body", "[net][e2e]") {
  Server s;
  auto unknown = s.post(R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})");
  CHECK(unknown.status == 404);
  CHECK(json::parse(unknown.body).at("error").at("code").as_string() == "model_not_found");
  auto bad = s.post("{\"model\":");
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body).at("error").at("type").as_string() == "invalid_request_error");
  auto too_long = s.post(chat_body("", 4000));  // over the model's 256-token context
  CHECK(too_long.status == 400);
  CHECK(json::parse(too_long.body).at("error").at("message").as_string().find("context") != std::string::npos);
  CHECK(http_call(s.http->port(), http::verb::get, "/v1/chat/completions").status == 405);
  CHECK(http_call(s.http->port(), http::verb::get, "/nowhere").status == 404);
}

TEST_CASE("a conversation id makes requests turns of one stored conversation that reuse its KV",
          "[net][e2e][stateful]") {
  Server s;
  auto first = s.post(chat_body(R"(,"conversation":"chat-1")"));
  REQUIRE(first.status == 200);
  const auto u1 = json::parse(first.body).at("usage").as_object();
  CHECK(u1.at("prompt_tokens_details").at("cached_tokens").as_int64() == 0);
  // Only the new message is sent; the server holds the history.
  auto second = s.post(chat_body(R"(,"conversation":"chat-1")"));
  REQUIRE(second.status == 200);
  const auto u2 = json::parse(second.body).at("usage").as_object();
  const auto prompt1 = u1.at("prompt_tokens").as_int64();
  const auto prompt2 = u2.at("prompt_tokens").as_int64();
  CHECK(prompt2 > prompt1 + 12);  // history: first prompt, its 12-token reply, the new message
  CHECK(u2.at("prompt_tokens_details").at("cached_tokens").as_int64() >= prompt1);
  // Another conversation id starts from nothing.
  auto other = s.post(chat_body(R"(,"conversation":"chat-2")"));
  REQUIRE(other.status == 200);
  CHECK(json::parse(other.body).at("usage").at("prompt_tokens").as_int64() == prompt1);
  // A malformed id is a 400 with an OpenAI error body.
  auto bad = s.post(chat_body(R"(,"conversation":"no spaces allowed")"));
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body).at("error").at("type").as_string() == "invalid_request_error");
}

namespace {

// A chat body with these messages (JSON array text) for conversation `id`.
std::string history_body(const std::string& id, const std::string& messages, int max_tokens) {
  return R"({"model":"tiny","conversation":")" + id + R"(","messages":)" + messages +
         R"(,"temperature":0,"ignore_eos":true,"max_tokens":)" + std::to_string(max_tokens) + "}";
}

std::string message_json(const std::string& role, const std::string& content) {
  return json::serialize(json::object{{"role", role}, {"content", content}});
}

std::string reply_text(const testing::HttpReply& r) {
  return std::string(json::parse(r.body).at("choices").at(0).at("message").at("content").as_string());
}

}  // namespace

TEST_CASE("an OpenAI client that resends the history with a conversation id gets no duplicate history",
          "[net][e2e][stateful]") {
  Server s;
  const std::string u1 = message_json("user", "Hello there");
  const std::string u2 = message_json("user", "Tell me more");
  auto first = s.post(history_body("h", "[" + u1 + "]", 12));
  REQUIRE(first.status == 200);
  const std::string a1 = message_json("assistant", reply_text(first));
  auto second = s.post(history_body("h", "[" + u1 + "," + a1 + "," + u2 + "]", 12));
  REQUIRE(second.status == 200);
  // The same turn from a client that sends only its new message.
  REQUIRE(s.post(history_body("n", "[" + u1 + "]", 12)).status == 200);
  auto native = s.post(history_body("n", "[" + u2 + "]", 12));
  REQUIRE(native.status == 200);
  const auto resent_usage = json::parse(second.body).at("usage");
  const auto native_usage = json::parse(native.body).at("usage");
  CHECK(reply_text(second) == reply_text(native));
  CHECK(resent_usage.at("prompt_tokens") == native_usage.at("prompt_tokens"));
  CHECK(resent_usage.at("prompt_tokens_details").at("cached_tokens") ==
        native_usage.at("prompt_tokens_details").at("cached_tokens"));
  CHECK(resent_usage.at("prompt_tokens_details").at("cached_tokens").as_int64() > 0);
  CHECK_FALSE(json::parse(second.body).as_object().contains("pensieve"));
  auto stored = http_call(s.http->port(), http::verb::get, "/v1/conversations/h");
  REQUIRE(stored.status == 200);
  CHECK(json::parse(stored.body).at("messages").as_array().size() == 4);

  // The history resent with nothing new is a 400.
  const std::string a2 = message_json("assistant", reply_text(second));
  auto nothing = s.post(history_body("h", "[" + u1 + "," + a1 + "," + u2 + "," + a2 + "]", 12));
  CHECK(nothing.status == 400);
  CHECK(json::parse(nothing.body).at("error").at("message").as_string() ==
        "a turn needs at least one new message: the request resends the conversation's 4 messages and adds none");
}

TEST_CASE("a conversation past the context drops its oldest turn and says how many tokens in pensieve.truncated_tokens",
          "[net][e2e][stateful]") {
  Server s;
  const std::string u1 = message_json("user", "Hello there, tell me a long story about the sea");
  const std::string u2 = message_json("user", "And then?");
  REQUIRE(s.post(history_body("a", "[" + u1 + "]", 40)).status == 200);
  REQUIRE(s.post(history_body("b", "[" + u1 + "]", 40)).status == 200);
  auto fits = s.post(history_body("b", "[" + u2 + "]", 1));
  REQUIRE(fits.status == 200);
  const std::int64_t asked = json::parse(fits.body).at("usage").at("prompt_tokens").as_int64();
  const std::int64_t max_tokens = 256 - asked + 5;  // 5 tokens past the context
  auto cut = s.post(history_body("a", "[" + u2 + "]", int(max_tokens)));
  REQUIRE(cut.status == 200);
  const auto body = json::parse(cut.body);
  const std::int64_t prompt = body.at("usage").at("prompt_tokens").as_int64();
  CHECK(body.at("pensieve").at("truncated_tokens").as_int64() == asked - prompt);
  CHECK(prompt + max_tokens <= 256);
  auto stored = http_call(s.http->port(), http::verb::get, "/v1/conversations/a");
  REQUIRE(stored.status == 200);
  const json::value conversation = json::parse(stored.body);
  const auto& messages = conversation.at("messages").as_array();
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].at("content").as_string() == "And then?");
}

TEST_CASE("out-of-bounds requests are invalid_request errors over HTTP, as on every front end",
          "[net][e2e][bounds]") {
  Server s;
  for (const auto& c : testing::invalid_turns()) {
    INFO(c.field);
    json::object body{{"model", "tiny"},
                      {"messages", json::array{json::object{{"role", "user"}, {"content", "x"}}}}};
    if (c.has_role) {
      body["messages"].as_array()[0].as_object()["role"] = "robot";
    } else {
      body[c.field] = c.number_value;
    }
    const auto reply = s.post(json::serialize(body));
    CHECK(reply.status == 400);
    const auto error = json::parse(reply.body).at("error").as_object();
    CHECK(error.at("type").as_string() == "invalid_request_error");
    CHECK(error.at("message").as_string() == c.message);
  }
}
