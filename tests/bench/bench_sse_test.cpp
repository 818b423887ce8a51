// Reading streamed chat completions: SSE framing and chunk contents, checked
// against the events our own server writes.
#include "bench/pensieve-bench/request_body.hpp"
#include "bench/pensieve-bench/sse.hpp"
#include "net/openai_json.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace pensieve::bench;
namespace net = pensieve::net;
namespace json = boost::json;

namespace {

// What our server sends for a reply "Hel" + "lo" with usage.
std::string server_stream() {
  const net::CompletionIds ids{"chatcmpl-1", "m", 0};
  net::GenerationResult result;
  result.finish_reason = "length";
  result.prompt_tokens = 17;
  result.completion_tokens = 2;
  result.cached_tokens = 9;
  return net::chunk_event(ids, json::object{{"role", "assistant"}, {"content", ""}}, nullptr, nullptr) +
         net::chunk_event(ids, json::object{{"content", "Hel"}}, nullptr, nullptr) +
         net::chunk_event(ids, json::object{{"content", "lo"}}, nullptr, nullptr) +
         net::chunk_event(ids, json::object{}, nullptr, "length") + net::usage_event(ids, result) +
         "data: [DONE]\n\n";
}

}  // namespace

TEST_CASE("SSE events come out whole however the bytes are cut", "[bench]") {
  const std::string stream = ": keep-alive\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: line1\ndata: line2\n\ndata: [DONE]\n\n";
  const std::vector<std::string> expected{"{\"a\":1}", "line1\nline2", "[DONE]"};
  for (std::size_t cut = 1; cut <= stream.size(); ++cut) {
    SseParser p;
    std::vector<std::string> events;
    for (std::size_t pos = 0; pos < stream.size(); pos += cut) {
      for (auto& e : p.feed(std::string_view(stream).substr(pos, cut))) events.push_back(e);
    }
    CHECK(events == expected);
  }
  SseParser p;
  CHECK(p.feed("data: incomplete").empty());
  CHECK(p.feed("\n").empty());
  CHECK(p.feed("\n") == std::vector<std::string>{"incomplete"});
}

TEST_CASE("a recorder reads our server's stream: text, timings, usage, [DONE]", "[bench]") {
  SseParser p;
  StreamRecorder r;
  double t = 1.0;
  for (const auto& e : p.feed(server_stream())) {
    r.on_event(e, t);
    t += 0.5;
  }
  CHECK(r.text() == "Hello");
  CHECK(r.content_events() == 2);
  // Events at 1.0 (role), 1.5 (Hel), 2.0 (lo): the empty role delta is no token.
  CHECK(r.first_token_s() == 1.5);
  CHECK(r.inter_token_s() == std::vector<double>{0.5});
  REQUIRE(r.usage().has_value());
  CHECK(r.usage()->prompt_tokens == 17);
  CHECK(r.usage()->completion_tokens == 2);
  CHECK(r.usage()->cached_tokens == 9);
  CHECK(r.finish_reason() == "length");
  CHECK(r.done());
  CHECK(r.error().empty());
}

TEST_CASE("an error event or a malformed event is the request's error", "[bench]") {
  StreamRecorder r;
  r.on_event(R"({"error":{"message":"overloaded","type":"server_error"}})", 0.1);
  CHECK(r.error() == "overloaded");
  StreamRecorder m;
  m.on_event("{not json", 0.1);
  CHECK(m.error().rfind("malformed stream event", 0) == 0);
  CHECK_FALSE(m.done());
}

TEST_CASE("stateless requests carry the history, stateful ones only the new message and the id", "[bench]") {
  const std::vector<DatasetMessage> history{{"user", "hi"}, {"assistant", "hello"}};
  const std::vector<DatasetMessage> next{{"user", "more"}};
  RequestSpec spec{"m", ClientMode::stateless, "conv-1", &history, &next, 7};
  const json::object stateless = json::parse(chat_request_body(spec)).as_object();
  CHECK(stateless.at("messages").as_array().size() == 3);
  CHECK(stateless.at("messages").at(1).at("content").as_string() == "hello");
  CHECK(stateless.at("max_tokens").as_int64() == 7);
  CHECK(stateless.at("ignore_eos").as_bool());
  CHECK(stateless.at("stream").as_bool());
  CHECK(stateless.at("stream_options").at("include_usage").as_bool());
  CHECK_FALSE(stateless.contains(conversation_field));
  spec.mode = ClientMode::stateful;
  const json::object stateful = json::parse(chat_request_body(spec)).as_object();
  REQUIRE(stateful.at("messages").as_array().size() == 1);
  CHECK(stateful.at("messages").at(0).at("content").as_string() == "more");
  CHECK(stateful.at(conversation_field).as_string() == "conv-1");
}
