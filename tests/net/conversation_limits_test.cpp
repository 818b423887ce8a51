// --max-conversations over HTTP: a conversation past the limit leaves
// memory; without a history folder it is deleted, and a later request for
// it is a 404 with an OpenAI-style body saying it expired (a not_found
// error frame on the WebSocket); /metrics counts the conversations in
// memory, unloaded and expired.
#include "net/ws_chat_session.hpp"
#include "tests/net/http_client.hpp"
#include "tests/net/server_fixture.hpp"
#include "tests/net/ws_client.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_model.hpp"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace pensieve;
namespace http = boost::beast::http;
namespace json = boost::json;

namespace {

std::string chat(const std::string& conversation, const std::string& text) {
  json::object body{{"model", "tiny"},
                    {"messages", json::array{json::object{{"role", "user"}, {"content", text}}}},
                    {"temperature", 0},
                    {"ignore_eos", true},
                    {"max_tokens", 4},
                    {"conversation", conversation}};
  return json::serialize(body);
}

testing::HttpReply call(testing::TestServer& s, http::verb verb, const std::string& target,
                        const std::string& body = {}) {
  return testing::http_call(s.port(), verb, target, body);
}

// A chat turn, then its conversation's GET: answered once the turn's
// handler has ended (it records the history after the reply), so the
// conversation is idle, and may leave memory, when this returns.
int turn(testing::TestServer& s, const std::string& conversation, const std::string& text) {
  const int status = call(s, http::verb::post, "/v1/chat/completions", chat(conversation, text)).status;
  REQUIRE(call(s, http::verb::get, "/v1/conversations/" + conversation).status == 200);
  return status;
}

}  // namespace

TEST_CASE("a conversation deleted past --max-conversations is a 404 that says it expired", "[net][expiry]") {
  testing::TestServer s(testing::tiny_model(), [](actors::EngineOptions& o) { o.max_conversations = 1; });
  REQUIRE(turn(s, "first", "hello") == 200);
  REQUIRE(turn(s, "second", "hello") == 200);
  const auto again = call(s, http::verb::post, "/v1/chat/completions", chat("first", "and then?"));
  CHECK(again.status == 404);
  const auto error = json::parse(again.body).at("error").as_object();
  CHECK(error.at("type").as_string() == "invalid_request_error");
  CHECK(error.at("code").as_string() == "not_found");
  CHECK(error.at("message").as_string() ==
        "conversation 'first' expired (idle conversations are deleted beyond the 1 most recently used); create it "
        "again to reuse its id");
  CHECK(call(s, http::verb::get, "/v1/conversations/first").status == 404);
  // Created again explicitly, its id is usable (and "second" leaves in turn).
  REQUIRE(call(s, http::verb::post, "/v1/conversations", R"({"id":"first"})").status == 200);
  CHECK(call(s, http::verb::post, "/v1/chat/completions", chat("first", "and then?")).status == 200);
  const std::string m = call(s, http::verb::get, "/metrics").body;
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_live 1\n"));
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_journaled 0\n"));
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_expired_total 2\n"));
}

TEST_CASE("with a history folder a conversation past --max-conversations is unloaded and its next turn answered",
          "[net][expiry]") {
  testing::TempDir dir("net-expiry");
  const std::string history = (dir / "history").string();
  testing::TestServer s(testing::tiny_model(), [&](actors::EngineOptions& o) {
    o.max_conversations = 1;
    o.history_dir = history;
  });
  REQUIRE(turn(s, "first", "hello") == 200);
  REQUIRE(turn(s, "second", "hello") == 200);
  std::string m = call(s, http::verb::get, "/metrics").body;
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_live 1\n"));
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_journaled 1\n"));
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_unloaded_total 1\n"));
  const auto again = call(s, http::verb::post, "/v1/chat/completions", chat("first", "and then?"));
  REQUIRE(again.status == 200);
  const auto view = json::parse(call(s, http::verb::get, "/v1/conversations/first").body).as_object();
  // Both turns, the one from before it left memory included: user, assistant, user, assistant.
  CHECK(view.at("messages").as_array().size() == 4);
  m = call(s, http::verb::get, "/metrics").body;
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_reloaded_total 1\n"));
  CHECK_THAT(m, Catch::Contains("pensieve_conversations_expired_total 0\n"));
}

TEST_CASE("a WebSocket turn on a conversation deleted past --max-conversations is a not_found error frame",
          "[net][ws][expiry]") {
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  actors::EngineOptions o;
  o.n_threads = 1;
  o.kv_cache_mb = 16;
  o.max_conversations = 1;
  auto engine = actors::Engine::create(testing::tiny_model(), o);
  REQUIRE(engine.has_value());
  net::EngineBackend backend(**engine);
  net::HttpServerOptions options;
  options.websocket_routes.push_back({"/v1/ws", net::make_ws_chat_handler(**engine, {})});
  net::HttpServer server(io.get_executor(), net::make_openai_routes(backend, {}), std::move(options));
  REQUIRE(server.listen("127.0.0.1", 0).has_value());
  std::thread thread([&] { io.run(); });
  {
    testing::WsClient c(server.port(), "/v1/ws");
    c.send(json::object{{"type", "open"}});
    const json::object opened = c.next();
    REQUIRE(opened.at("type") == "opened");
    const std::string id(opened.at("conversation").as_string());
    REQUIRE((*engine)->create_conversation("", "newer").has_value());  // the open one leaves
    c.send(json::object{{"type", "send"}, {"content", "hello"}, {"max_tokens", 4}});
    const json::object error = c.next();
    REQUIRE(error.at("type") == "error");
    CHECK(error.at("code") == "not_found");
    CHECK_THAT(std::string(error.at("message").as_string()), Catch::StartsWith("conversation '" + id + "' expired"));
  }
  boost::asio::co_spawn(io, server.stop(), boost::asio::use_future).get();
  work.reset();
  thread.join();
}
