// What the HTTP front end does when a client leaves while a whole (not
// streamed) completion is computed, and when the server stops with requests
// in flight (HttpServer::stop with a grace period).
#include "actors/engine.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"
#include "tests/net/http_client.hpp"
#include "tests/net/rpc_fixture.hpp"
#include "tests/net/server_fixture.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include <thread>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using namespace pensieve;
using asio::ip::tcp;

namespace {

// The stories260K server, its engine optionally held at each iteration by `gate`.
struct Server : testing::TestServer {
  explicit Server(testing::IterationGate* gate = nullptr)
      : TestServer(testing::stories_model(), [gate](actors::EngineOptions& o) {
          if (gate) o.on_iteration = [gate](const actors::IterationRecord&) { gate->pass(); };
        }) {}
};

std::string chat_body(const Server& s, int max_tokens, bool stream) {
  return R"({"model":")" + s.engine->model_name() + R"(","messages":[{"role":"user","content":"Once upon a time"}],"temperature":0,)"
         R"("ignore_eos":true,"max_tokens":)" +
         std::to_string(max_tokens) + (stream ? R"(,"stream":true})" : "}");
}

// A raw connection that sends one request and can read, or leave, at will.
struct RawClient {
  asio::io_context io;
  tcp::socket socket{io};
  beast::flat_buffer buffer;

  RawClient(std::uint16_t port, const std::string& body) {
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
    http::request<http::string_body> req{http::verb::post, "/v1/chat/completions", 11};
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    http::write(socket, req);
  }
  // Everything the server sends until it closes the connection.
  std::string read_to_end() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    boost::system::error_code ec;
    http::read(socket, buffer, parser, ec);
    return parser.get().body();
  }
};

}  // namespace

TEST_CASE("a client gone during a whole completion has its turn cancelled before max_tokens", "[net][disconnect]") {
  testing::IterationGate gate;
  gate.arm();  // the scheduler stops at its first iteration: the turn is mid-generation
  Server s(&gate);
  {
    RawClient c(s.http->port(), chat_body(s, 400, false));
    // Wait for the engine to hold the turn, then leave without reading.
    REQUIRE(gate.wait_held());
    c.socket.close();
  }
  gate.release();
  REQUIRE(s.idle());
  s.engine->clear_prefix_cache();  // what the stateless turn computed stays cached until then
  const auto stats = s.stats();
  CHECK(stats.running == 0);
  CHECK(stats.free_blocks == stats.num_blocks);  // its KV reservation was freed
  // Cancelled at a delta soon after the disconnect, not run to its 400 tokens.
  CHECK(stats.decode_tokens < 399);
}

TEST_CASE("a whole completion whose client stays is answered in full", "[net][disconnect]") {
  Server s;
  auto r = testing::http_call(s.http->port(), http::verb::post, "/v1/chat/completions", chat_body(s, 40, false));
  REQUIRE(r.status == 200);
  CHECK(json::parse(r.body).at("usage").at("completion_tokens").as_int64() == 40);
}

TEST_CASE("stopping with a grace period lets a streamed reply finish and refuses new connections",
          "[net][shutdown]") {
  testing::IterationGate gate;
  gate.arm();
  Server s(&gate);
  const auto port = s.http->port();
  RawClient streaming(port, chat_body(s, 60, true));
  // An idle keep-alive connection: closed at once by the stop. It is answered
  // one request first, so the server has accepted it (a connection still in
  // the listener's backlog when the listener closes is reset, not closed).
  asio::io_context idle_io;
  tcp::socket idle(idle_io);
  idle.connect({asio::ip::make_address("127.0.0.1"), port});
  asio::write(idle, asio::buffer(std::string_view("GET /health HTTP/1.1\r\nHost: t\r\n\r\n")));
  {
    std::string reply;
    const std::size_t head = asio::read_until(idle, asio::dynamic_buffer(reply), "\r\n\r\n");
    REQUIRE(reply.starts_with("HTTP/1.1 200"));
    const auto at = reply.find("Content-Length: ");
    REQUIRE((at != std::string::npos && at < head));
    const std::size_t length = std::stoul(reply.substr(at + 16));
    if (reply.size() - head < length)
      asio::read(idle, asio::dynamic_buffer(reply), asio::transfer_exactly(length - (reply.size() - head)));
  }
  REQUIRE(gate.wait_held());
  auto stopped = asio::co_spawn(s.io, s.http->stop(std::chrono::seconds(30)), asio::use_future);
  // The listener is closed before the stop waits for anything.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool refused = false;
  while (!refused && std::chrono::steady_clock::now() < deadline) {
    asio::io_context io;
    tcp::socket probe(io);
    boost::system::error_code ec;
    probe.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
    refused = ec == asio::error::connection_refused;
    if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(refused);
  char byte = 0;
  boost::system::error_code idle_ec;
  idle.read_some(asio::buffer(&byte, 1), idle_ec);
  CHECK(idle_ec == asio::error::eof);
  gate.release();
  const std::string body = streaming.read_to_end();
  // The stream completed: its last chunk has finish_reason, then [DONE].
  CHECK(body.find(R"("finish_reason":"length")") != std::string::npos);
  CHECK(body.ends_with("data: [DONE]\n\n"));
  REQUIRE(stopped.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
}

TEST_CASE("a reply still running when the grace period ends is cut and its turn cancelled", "[net][shutdown]") {
  testing::IterationGate gate;
  gate.arm();
  Server s(&gate);
  RawClient streaming(s.http->port(), chat_body(s, 400, true));
  REQUIRE(gate.wait_held());
  // The scheduler is held: the turn cannot finish within 50 ms.
  auto stopped = asio::co_spawn(s.io, s.http->stop(std::chrono::milliseconds(50)), asio::use_future);
  // Past the grace the connection is closed under the held turn.
  const std::string body = streaming.read_to_end();
  CHECK(body.find("[DONE]") == std::string::npos);
  gate.release();  // the turn's cancellation takes effect at the next iteration
  REQUIRE(stopped.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  REQUIRE(s.idle());
  s.engine->clear_prefix_cache();
  CHECK(s.stats().free_blocks == s.stats().num_blocks);
}
