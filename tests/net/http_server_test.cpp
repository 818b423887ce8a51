#include "net/http_server.hpp"

#include "tests/net/http_client.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <thread>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using pensieve::net::HttpRequest;
using pensieve::net::HttpServer;
using pensieve::net::ResponseWriter;
using pensieve::testing::http_call;

namespace {

asio::awaitable<void> handle(const HttpRequest& req, ResponseWriter& w) {
  if (req.target() == "/hello") {
    co_await w.send(200, "text/plain", "hello " + req.body());
  } else if (req.target() == "/stream") {
    co_await w.start_stream(200, "text/event-stream");
    for (int i = 0; i < 3; ++i) co_await w.write_chunk("data: " + std::to_string(i) + "\n\n");
    co_await w.write_chunk("data: [DONE]\n\n");
    co_await w.end_stream();
  }
}

// Runs a server on its own io_context thread for the length of a test.
struct RunningServer {
  asio::io_context io;
  // Keeps run() going after the server stops, so a second stop() still runs.
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  HttpServer server{io.get_executor(), handle, {.max_body_bytes = 1024}};
  std::thread thread;
  RunningServer() {
    REQUIRE(server.listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~RunningServer() {
    asio::co_spawn(io, server.stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
};

}  // namespace

TEST_CASE("the HTTP server answers a request and keeps the body", "[net]") {
  RunningServer s;
  auto r = http_call(s.server.port(), http::verb::post, "/hello", "world");
  CHECK(r.status == 200);
  CHECK(r.body == "hello world");
}

TEST_CASE("a handler that answers nothing yields a 500 with an error body", "[net]") {
  RunningServer s;
  auto r = http_call(s.server.port(), http::verb::get, "/nothing");
  CHECK(r.status == 500);
  CHECK(r.body.find("\"error\"") != std::string::npos);
}

TEST_CASE("a body over the limit is refused with 413", "[net]") {
  RunningServer s;
  auto r = http_call(s.server.port(), http::verb::post, "/hello", std::string(4096, 'x'));
  CHECK(r.status == 413);
  CHECK(r.body.find("too large") != std::string::npos);
}

TEST_CASE("a streamed response arrives as chunks in order", "[net]") {
  RunningServer s;
  auto r = http_call(s.server.port(), http::verb::get, "/stream");
  CHECK(r.status == 200);
  CHECK(r.chunked);
  CHECK(r.content_type == "text/event-stream");
  CHECK(r.body == "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: [DONE]\n\n");
}

TEST_CASE("stopping the server closes idle connections", "[net]") {
  RunningServer s;
  asio::io_context io;
  asio::ip::tcp::socket idle(io);
  idle.connect({asio::ip::make_address("127.0.0.1"), s.server.port()});
  CHECK(http_call(s.server.port(), http::verb::post, "/hello", "x").status == 200);
  asio::co_spawn(s.io, s.server.stop(), asio::use_future).get();
  char byte;
  boost::system::error_code ec;
  idle.read_some(asio::buffer(&byte, 1), ec);
  CHECK(ec == asio::error::eof);
  CHECK(s.server.open_connections() == 0);
}
