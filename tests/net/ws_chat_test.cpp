// The WebSocket chat (/v1/ws) and the web page's files, over loopback
// against an in-process server with a real engine on stories260K.
#include "actors/engine.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "net/tenant_limits.hpp"
#include "net/web_assets.hpp"
#include "net/ws_chat_session.hpp"
#include "tests/actors/engine_fixture.hpp"
#include "tests/net/http_client.hpp"
#include "tests/net/invalid_turns.hpp"
#include "tests/net/ws_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using namespace pensieve;
using pensieve::testing::WsClient;

namespace {

struct Server {
  // Declared first, destroyed last: the engine completes operations on it.
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<actors::Engine> engine;
  std::unique_ptr<net::EngineBackend> backend;
  std::unique_ptr<net::HttpServer> http;
  std::thread thread;
  bool stopped = false;

  explicit Server(net::WsChatOptions ws_options = {}) {
    auto e = actors::Engine::create(testing::stories_model(), {.n_threads = 1, .kv_cache_mb = 16});
    REQUIRE(e.has_value());
    engine = std::move(*e);
    backend = std::make_unique<net::EngineBackend>(*engine);
    net::HttpServerOptions options;
    options.websocket_routes.push_back({"/v1/ws", net::make_ws_chat_handler(*engine, std::move(ws_options))});
    http = std::make_unique<net::HttpServer>(
        io.get_executor(), net::with_web_page(net::make_openai_routes(*backend, {})), std::move(options));
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~Server() {
    stop();
    io.stop();
    thread.join();
  }
  // True when the server stopped (every connection ended) within the deadline.
  bool stop() {
    if (stopped) return true;
    stopped = true;
    auto done = asio::co_spawn(io, http->stop(), asio::use_future);
    return done.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  }
  std::uint16_t port() const { return http->port(); }
  actors::SchedulerStats stats() { return asio::co_spawn(io, engine->stats(), asio::use_future).get(); }
  std::size_t open_connections() {
    return asio::post(io, asio::use_future([this] { return http->open_connections(); })).get();
  }
  // Waits (bounded) until the server has closed every connection.
  bool drained() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (open_connections() != 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
};

json::object send_message(const std::string& content, int max_tokens, bool ignore_eos = true) {
  return {{"type", "send"}, {"content", content}, {"max_tokens", max_tokens},
          {"temperature", 0}, {"ignore_eos", ignore_eos}};
}

// Opens a conversation (a new one when `id` is empty); returns "opened".
json::object open(WsClient& c, const std::string& id = {}) {
  json::object m{{"type", "open"}};
  if (!id.empty()) m["conversation"] = id;
  c.send(m);
  auto opened = c.next();
  REQUIRE(opened.at("type") == "opened");
  return opened;
}

std::string error_code(const json::object& m) {
  REQUIRE(m.at("type") == "error");
  return std::string(m.at("code").as_string());
}

}  // namespace

TEST_CASE("a WebSocket turn streams deltas, then done with exact usage", "[net][ws]") {
  Server s;
  WsClient c(s.port());
  auto opened = open(c);
  CHECK(opened.at("history").as_array().empty());
  CHECK(opened.at("model").is_string());
  const std::string id(opened.at("conversation").as_string());
  CHECK_FALSE(id.empty());

  c.send(send_message("Once upon a time", 12));
  auto reply = c.reply();
  REQUIRE(reply.end.at("type") == "done");
  CHECK(reply.deltas >= 1);
  CHECK(reply.end.at("finish_reason") == "length");
  CHECK(reply.end.at("cancelled") == false);
  const auto& usage = reply.end.at("usage").as_object();
  CHECK(usage.at("completion_tokens").as_int64() == 12);
  CHECK(usage.at("prompt_tokens").as_int64() > 0);
  CHECK(usage.at("cached_tokens").as_int64() == 0);
  CHECK(reply.end.at("tokens_per_s").as_double() > 0);

  // The deltas are exactly the reply the conversation keeps.
  auto snapshot = asio::co_spawn(s.io, s.engine->snapshot("", id), asio::use_future).get();
  REQUIRE(snapshot.has_value());
  REQUIRE(snapshot->messages.size() == 2);
  CHECK(snapshot->messages[1].content == reply.text);
}

TEST_CASE("reopening a conversation returns its history and the next turn reuses its cache", "[net][ws]") {
  Server s;
  std::string id;
  std::string first_reply;
  std::int64_t first_prompt = 0;
  {
    WsClient c(s.port());
    id = std::string(open(c).at("conversation").as_string());
    c.send(send_message("Hello", 8));
    auto reply = c.reply();
    REQUIRE(reply.end.at("type") == "done");
    first_reply = reply.text;
    first_prompt = reply.end.at("usage").at("prompt_tokens").as_int64();
  }
  WsClient c(s.port());
  auto opened = open(c, id);
  CHECK(opened.at("conversation").as_string() == id);
  const auto& history = opened.at("history").as_array();
  REQUIRE(history.size() == 2);
  CHECK(history[0].at("role") == "user");
  CHECK(history[0].at("content") == "Hello");
  CHECK(history[1].at("role") == "assistant");
  CHECK(history[1].at("content").as_string() == first_reply);

  c.send(send_message("And then?", 8));
  auto reply = c.reply();
  REQUIRE(reply.end.at("type") == "done");
  // The first turn's prompt and reply are served from the cache, all but
  // the reply's last token, which was sampled but never fed to the model.
  CHECK(reply.end.at("usage").at("cached_tokens").as_int64() == first_prompt + 8 - 1);
}

TEST_CASE("a cancel read while a reply streams ends the turn early", "[net][ws]") {
  Server s;
  WsClient c(s.port());
  open(c);
  c.send(send_message("Tell me a long story", 400));
  auto first = c.next();
  REQUIRE(first.at("type") == "delta");
  c.send(json::object{{"type", "cancel"}});
  auto reply = c.reply();
  REQUIRE(reply.end.at("type") == "done");
  CHECK(reply.end.at("cancelled") == true);
  CHECK(reply.end.at("finish_reason") == "cancelled");
  CHECK(reply.end.at("usage").at("completion_tokens").as_int64() < 400);

  // The session takes the next turn.
  c.send(send_message("Again", 4));
  auto again = c.reply();
  REQUIRE(again.end.at("type") == "done");
  CHECK(again.end.at("usage").at("completion_tokens").as_int64() == 4);
}

TEST_CASE("a WebSocket turn that outlives the request timeout ends with a timeout error frame",
          "[net][ws][timeout]") {
  net::WsChatOptions options;
  options.turn.timeout = std::chrono::milliseconds(1);
  Server s(std::move(options));
  WsClient c(s.port());
  open(c);
  c.send(send_message("Tell me a long story", 400));
  auto reply = c.reply();
  CHECK(error_code(reply.end) == "timeout");
  CHECK_THAT(std::string(reply.end.at("message").as_string()), Catch::Contains("timed out after 1 ms"));
  auto stats = s.stats();
  CHECK(stats.running == 0);
  CHECK(stats.waiting == 0);
  // The session stays open and answers the next message.
  c.send(json::object{{"type", "list"}});
  CHECK(c.next().at("type") == "conversations");
}

TEST_CASE("WebSocket turns record their tokens and first-token times in the server's metrics",
          "[net][ws][metrics]") {
  net::ServerMetrics metrics;
  net::WsChatOptions options;
  options.turn.metrics = &metrics;
  Server s(std::move(options));
  WsClient c(s.port());
  open(c);
  c.send(send_message("Once upon a time", 7));
  REQUIRE(c.reply().end.at("type") == "done");
  c.send(send_message("and then", 5));
  REQUIRE(c.reply().end.at("type") == "done");
  const std::string text = metrics.render({});
  CHECK_THAT(text, Catch::Contains("pensieve_generated_tokens_total 12\n"));
  CHECK_THAT(text, Catch::Contains("pensieve_ttft_seconds_count 2\n"));
  CHECK_THAT(text, Catch::Contains("pensieve_turn_decode_seconds_count 2\n"));
  CHECK(text.find("pensieve_cached_prompt_tokens_total 0\n") == std::string::npos);
}

TEST_CASE("a WebSocket turn over its tenant's limit gets an error frame, then close 1013", "[net][ws][limits]") {
  net::WsChatOptions options;
  options.limits.tenant_turns = std::make_shared<net::TenantTurnLimiter>(1);
  auto limiter = options.limits.tenant_turns;
  Server s(std::move(options));
  // The tenant's one slot is taken (by a turn on another front end, say).
  auto taken = limiter->try_acquire("");
  REQUIRE(taken);
  WsClient c(s.port());
  open(c);
  c.send(send_message("Once upon a time", 4));
  const auto refused = c.next();
  CHECK(error_code(refused) == "rate_limited");
  CHECK_FALSE(c.receive().has_value());
  CHECK(c.close_code() == 1013);
  CHECK(s.stats().running == 0);
  // Once the slot is back, a new connection's turn runs.
  taken.reset();
  WsClient again(s.port());
  open(again);
  again.send(send_message("Once upon a time", 4));
  CHECK(again.reply().end.at("type") == "done");
  // The session gives its slot back as its turn's call ends, just after the
  // done frame went out: wait for it, boundedly.
  for (int i = 0; i < 200 && limiter->running("") != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK(limiter->running("") == 0);
}

TEST_CASE("bad messages are answered with errors and the connection stays open", "[net][ws]") {
  Server s;
  WsClient c(s.port());
  c.send_text("{not json");
  CHECK(error_code(c.next()) == "bad_json");
  c.send_text(R"({"type":"dance"})");
  CHECK(error_code(c.next()) == "unknown_type");
  c.send_text(R"([1,2])");
  CHECK(error_code(c.next()) == "bad_request");
  c.send(send_message("too early", 4));
  CHECK(error_code(c.next()) == "not_open");
  c.send(json::object{{"type", "open"}, {"conversation", "no-such-conversation"}});
  CHECK(error_code(c.next()) == "not_found");
  open(c);
  c.send(json::object{{"type", "send"}, {"content", 42}});
  CHECK(error_code(c.next()) == "bad_request");
  c.send(json::object{{"type", "send"}, {"content", "x"}, {"max_tokens", 0}});
  CHECK(error_code(c.next()) == "invalid_request");  // in bounds is the adapter's check
  c.send(json::object{{"type", "delete"}, {"conversation", "no-such-conversation"}});
  CHECK(error_code(c.next()) == "not_found");

  // A send while a turn runs is refused; the running turn is not disturbed.
  c.send(send_message("first", 200));
  c.send(send_message("second", 4));
  std::optional<std::string> refused;
  auto reply = c.reply();
  while (reply.end.at("type") == "error") {
    REQUIRE_FALSE(refused.has_value());
    refused = error_code(reply.end);
    auto rest = c.reply();
    rest.text = reply.text + rest.text;
    reply = std::move(rest);
  }
  CHECK(refused == "busy");
  REQUIRE(reply.end.at("type") == "done");
  CHECK(reply.end.at("usage").at("completion_tokens").as_int64() == 200);
  // Beyond the model's context: the engine's error comes back as a message.
  c.send(send_message("overflow", 4096));
  CHECK(error_code(c.next()) == "invalid_request");
}

TEST_CASE("list shows a tenant's conversations and delete removes one", "[net][ws]") {
  Server s;
  WsClient c(s.port());
  const std::string a(open(c).at("conversation").as_string());
  const std::string b(open(c).at("conversation").as_string());
  c.send(json::object{{"type", "list"}});
  auto list = c.next();
  REQUIRE(list.at("type") == "conversations");
  std::set<std::string> ids;
  for (const auto& item : list.at("items").as_array()) ids.insert(std::string(item.at("id").as_string()));
  CHECK(ids == std::set<std::string>{a, b});

  c.send(json::object{{"type", "delete"}, {"conversation", a}});
  auto deleted = c.next();
  CHECK(deleted.at("type") == "deleted");
  CHECK(deleted.at("conversation").as_string() == a);
  c.send(json::object{{"type", "list"}});
  list = c.next();
  REQUIRE(list.at("items").as_array().size() == 1);
  CHECK(list.at("items").at(0).at("id").as_string() == b);
}

TEST_CASE("a binary frame closes the WebSocket with 1003", "[net][ws]") {
  Server s;
  WsClient c(s.port());
  c.send_binary(std::string("\x01\x02\x03", 3));
  CHECK_FALSE(c.receive().has_value());
  CHECK(c.close_code() == 1003);
}

TEST_CASE("a message over 64 KiB closes the WebSocket with 1009", "[net][ws]") {
  Server s;
  WsClient c(s.port());
  open(c);
  const std::string content(64 * 1024, 'a');
  c.send(send_message(content, 4));  // larger than 64 KiB with its JSON around it
  CHECK_FALSE(c.receive().has_value());
  CHECK(c.close_code() == 1009);
}

TEST_CASE("a client gone mid-stream has its turn cancelled and freed", "[net][ws]") {
  Server s;
  {
    WsClient c(s.port());
    open(c);
    c.send(send_message("Tell me a long story", 400));
    REQUIRE(c.next().at("type") == "delta");
    c.drop();
  }
  REQUIRE(s.drained());
  auto stats = s.stats();
  CHECK(stats.running == 0);
  CHECK(stats.waiting == 0);
  // The turn ended early: the conversation kept fewer than 400 reply tokens.
  auto ids = s.engine->list_conversations("");
  REQUIRE(ids.size() == 1);
  auto snapshot = asio::co_spawn(s.io, s.engine->snapshot("", ids[0].id), asio::use_future).get();
  REQUIRE(snapshot.has_value());
  CHECK(snapshot->tokens.size() < 400);
}

TEST_CASE("stopping the server ends WebSocket sessions, a streaming one included", "[net][ws]") {
  Server s;
  WsClient idle(s.port());
  open(idle);
  WsClient busy(s.port());
  open(busy);
  busy.send(send_message("Tell me a long story", 400));
  REQUIRE(busy.next().at("type") == "delta");
  REQUIRE(s.stop());
  CHECK(s.stats().running == 0);
  // Both connections are closed: their reads end (after any deltas in flight).
  CHECK_FALSE(idle.receive().has_value());
  while (busy.receive().has_value()) {
  }
  CHECK(busy.closed());
}

TEST_CASE("a refused tenant gets 401 instead of a WebSocket", "[net][ws]") {
  Server s;
  // A second server on the same engine whose tenant_of refuses everyone.
  net::WsChatOptions options;
  options.tenant_of = [](const net::HttpRequest&) { return std::optional<std::string>{}; };
  net::HttpServerOptions http_options;
  http_options.websocket_routes.push_back({"/v1/ws", net::make_ws_chat_handler(*s.engine, options)});
  net::HttpServer refusing(s.io.get_executor(), net::with_web_page(net::make_openai_routes(*s.backend, {})),
                           std::move(http_options));
  REQUIRE(refusing.listen("127.0.0.1", 0).has_value());
  boost::asio::io_context io;
  boost::beast::websocket::stream<boost::asio::ip::tcp::socket> ws(io);
  ws.next_layer().connect({boost::asio::ip::make_address("127.0.0.1"), refusing.port()});
  boost::beast::websocket::response_type res;
  boost::system::error_code ec;
  ws.handshake(res, "127.0.0.1", "/v1/ws", ec);
  CHECK(ec == boost::beast::websocket::error::upgrade_declined);
  CHECK(res.result_int() == 401);
  asio::co_spawn(s.io, refusing.stop(), asio::use_future).get();
}

TEST_CASE("the web page's files are served with their content types", "[net][web]") {
  Server s;
  auto page = testing::http_call(s.port(), http::verb::get, "/");
  CHECK(page.status == 200);
  CHECK(page.content_type == "text/html; charset=utf-8");
  CHECK(page.body.find("<title>Pensieve chat</title>") != std::string::npos);
  CHECK(page.body == testing::http_call(s.port(), http::verb::get, "/index.html").body);
  auto js = testing::http_call(s.port(), http::verb::get, "/app.js");
  CHECK(js.status == 200);
  CHECK(js.content_type == "text/javascript; charset=utf-8");
  CHECK(js.body.find("/v1/ws") != std::string::npos);
  auto css = testing::http_call(s.port(), http::verb::get, "/style.css?v=1");
  CHECK(css.status == 200);
  CHECK(css.content_type == "text/css; charset=utf-8");
  CHECK(testing::http_call(s.port(), http::verb::get, "/nothing-here.js").status == 404);
  // A plain GET of the WebSocket path is not an upgrade: no route.
  CHECK(testing::http_call(s.port(), http::verb::get, "/v1/ws").status == 404);
}

TEST_CASE("the embedded files are the files of net/web, byte for byte", "[net][web]") {
  for (const char* name : {"index.html", "app.js", "style.css"}) {
    std::ifstream in(std::string(PENSIEVE_SOURCE_DIR) + "/net/web/" + name, std::ios::binary);
    REQUIRE(in);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const net::WebAsset* asset = net::find_web_asset(std::string("/") + name);
    REQUIRE(asset != nullptr);
    CHECK(asset->body == file);
  }
  CHECK(net::find_web_asset("/") == net::find_web_asset("/index.html"));
  CHECK(net::find_web_asset("/missing") == nullptr);
}

namespace {

// A server whose WebSocket needs one of two keys (tenants "alice" and "bob"),
// refusing others the way pensieve does: accepted, then closed with 1008.
struct KeyedServer {
  Server s;
  std::unique_ptr<net::HttpServer> http;
  KeyedServer() {
    auto keys = net::ApiKeys::parse("key-a alice\nkey-b bob\n", "test");
    REQUIRE(keys.has_value());
    net::WsChatOptions options;
    options.tenant_of = net::ws_tenant_of(std::make_shared<const net::ApiKeys>(std::move(*keys)));
    options.refuse_with_close = true;
    net::HttpServerOptions http_options;
    http_options.websocket_routes.push_back({"/v1/ws", net::make_ws_chat_handler(*s.engine, options)});
    http = std::make_unique<net::HttpServer>(s.io.get_executor(), net::make_openai_routes(*s.backend, {}),
                                             std::move(http_options));
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
  }
  ~KeyedServer() { asio::co_spawn(s.io, http->stop(), asio::use_future).get(); }
  std::uint16_t port() const { return http->port(); }
};

}  // namespace

TEST_CASE("a WebSocket key in the Authorization header or the api_key query acts for its tenant", "[net][ws][auth]") {
  KeyedServer k;
  WsClient alice(k.port(), "/v1/ws", "Bearer key-a");
  const std::string id(open(alice).at("conversation").as_string());
  CHECK(k.s.engine->find_conversation("alice", id).has_value());
  // A browser cannot set headers: the key in the query works too (percent-encoded).
  WsClient alice_again(k.port(), "/v1/ws?x=1&api_key=key%2Da");
  CHECK(open(alice_again, id).at("conversation").as_string() == id);
}

TEST_CASE("a wrong or missing WebSocket key is closed with 1008", "[net][ws][auth]") {
  KeyedServer k;
  for (const auto& [target, auth] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/ws", ""}, {"/v1/ws", "Bearer nope"}, {"/v1/ws?api_key=nope", ""}, {"/v1/ws?api_key=key-a", "Bearer nope"}}) {
    INFO(target << " " << auth);
    WsClient c(k.port(), target, auth);
    CHECK_FALSE(c.receive().has_value());
    CHECK(c.close_code() == 1008);
  }
}

TEST_CASE("another tenant's conversation is not found over the WebSocket", "[net][ws][auth]") {
  KeyedServer k;
  WsClient alice(k.port(), "/v1/ws", "Bearer key-a");
  const std::string id(open(alice).at("conversation").as_string());
  WsClient bob(k.port(), "/v1/ws", "Bearer key-b");
  bob.send(json::object{{"type", "open"}, {"conversation", id}});
  CHECK(error_code(bob.next()) == "not_found");
  bob.send(json::object{{"type", "delete"}, {"conversation", id}});
  CHECK(error_code(bob.next()) == "not_found");
  bob.send(json::object{{"type", "list"}});
  CHECK(bob.next().at("items").as_array().empty());
  CHECK(k.s.engine->find_conversation("alice", id).has_value());
}

TEST_CASE("stopping the server with a grace period closes an idle WebSocket session with 1001", "[net][ws][shutdown]") {
  Server s;
  WsClient ws(s.port());
  ws.send(json::object{{"type", "open"}});
  REQUIRE(ws.next().at("type") == "opened");
  s.stopped = true;
  auto stopped = asio::co_spawn(s.io, s.http->stop(std::chrono::seconds(30)), asio::use_future);
  CHECK_FALSE(ws.receive().has_value());
  CHECK(ws.close_code() == 1001);
  CHECK(stopped.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
}

TEST_CASE(
    "out-of-bounds turns are invalid_request errors over the WebSocket, as on every front end",
    "[net][ws][bounds]") {
  Server s;
  WsClient c(s.port());
  open(c);
  for (const auto& t : testing::invalid_turns()) {
    INFO(t.field);
    json::object send{{"type", "send"}, {"content", "x"}};
    if (t.has_role) {
      send["role"] = "robot";
    } else {
      send[t.field] = t.number_value;
    }
    c.send(send);
    const json::object error = c.next();
    CHECK(error_code(error) == "invalid_request");
    CHECK(error.at("message").as_string() == t.message);
  }
}
