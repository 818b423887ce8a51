// Hostile clients over loopback: connections that send their header a byte
// at a time (slowloris) are closed once the header timeout has passed while
// the server goes on answering everyone else; a header over the limit is
// answered 431; a keep-alive connection may still idle longer than the
// header timeout before its request begins.
#include "net/http_server.hpp"

#include "tests/net/http_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <latch>
#include <list>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using pensieve::net::HttpRequest;
using pensieve::net::HttpServer;
using pensieve::net::HttpServerOptions;
using pensieve::net::ResponseWriter;
using pensieve::testing::http_call;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr auto tuple_awaitable = asio::as_tuple(asio::use_awaitable);

asio::awaitable<void> hello(const HttpRequest&, ResponseWriter& w) { co_await w.send(200, "text/plain", "hello"); }

// A server on its own io_context thread for the length of a test.
struct RunningServer {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  HttpServer server;
  std::thread thread;
  explicit RunningServer(HttpServerOptions options) : server(io.get_executor(), hello, std::move(options)) {
    REQUIRE(server.listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~RunningServer() {
    asio::co_spawn(io, server.stop(), asio::use_future).get();
    io.stop();
    thread.join();
  }
  std::size_t open_connections() {
    return asio::post(io, asio::use_future([this] { return server.open_connections(); })).get();
  }
};

// One slowloris connection, as its client saw it.
struct SlowClient {
  explicit SlowClient(asio::io_context& io) : socket(io) {}
  tcp::socket socket;
  Clock::time_point first_byte;
  Clock::time_point closed;
  std::size_t sent = 0;      // header bytes written before the server closed
  std::size_t answered = 0;  // bytes the server sent back
  bool was_closed = false;
};

// Writes `header` a byte every `gap` until the server closes the connection.
asio::awaitable<void> send_slowly(SlowClient& c, std::string header, std::chrono::milliseconds gap,
                                  std::latch& started) {
  asio::steady_timer timer(c.socket.get_executor());
  c.first_byte = Clock::now();
  for (std::size_t i = 0; i < header.size() && !c.was_closed; ++i) {
    auto [ec, n] = co_await asio::async_write(c.socket, asio::buffer(&header[i], 1), tuple_awaitable);
    if (ec) break;
    if (++c.sent == 1) started.count_down();
    timer.expires_after(gap);
    (void)co_await timer.async_wait(tuple_awaitable);
  }
}

// Waits for the server to close the connection (EOF or reset).
asio::awaitable<void> watch_close(SlowClient& c) {
  char bytes[64];
  for (;;) {
    auto [ec, n] = co_await c.socket.async_read_some(asio::buffer(bytes), tuple_awaitable);
    c.answered += n;
    if (ec) break;
  }
  c.closed = Clock::now();
  c.was_closed = true;
}

// A request header of `bytes` bytes (at least about 60).
std::string header_of(std::size_t bytes) {
  std::string h = "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  h += std::string(bytes - h.size() - end.size(), 'a');
  return h + end;
}

}  // namespace

TEST_CASE("slowloris connections are closed after the header timeout while other clients are served",
          "[net][hostile]") {
  constexpr auto header_timeout = 1000ms;
  constexpr auto gap = 50ms;
  constexpr int slow = 64;
  const std::string header = header_of(200);  // 10 s at one byte per 50 ms: never finishes in time
  RunningServer s({.header_timeout_ms = std::uint32_t(header_timeout.count())});
  asio::io_context io;
  std::list<SlowClient> clients;
  std::latch started(slow);
  for (int i = 0; i < slow; ++i) {
    SlowClient& c = clients.emplace_back(io);
    c.socket.connect({asio::ip::make_address("127.0.0.1"), s.server.port()});
    asio::co_spawn(io, send_slowly(c, header, gap, started), asio::detached);
    asio::co_spawn(io, watch_close(c), asio::detached);
  }
  std::thread slow_thread([&] { io.run(); });
  started.wait();  // every slow client has begun its header
  for (int i = 0; i < 20; ++i) {
    const auto r = http_call(s.server.port(), http::verb::get, "/hello");
    REQUIRE(r.status == 200);
    CHECK(r.body == "hello");
  }
  const Clock::time_point served = Clock::now();
  slow_thread.join();  // every slow client has been closed
  for (const SlowClient& c : clients) {
    REQUIRE(c.was_closed);
    CHECK(c.answered == 0);                   // closed without an answer
    CHECK(c.sent < header.size());            // before its header was complete
    CHECK(c.closed > served);                 // the others were answered while it was open
    CHECK(c.closed - c.first_byte >= header_timeout);
    CHECK(c.closed - c.first_byte < header_timeout + 3s);  // not left to the idle timeout (60 s)
  }
  CHECK(http_call(s.server.port(), http::verb::get, "/hello").status == 200);
}

TEST_CASE("a header over the limit is answered 431 and the server goes on serving", "[net][hostile]") {
  RunningServer s({.max_header_bytes = 8 << 10});
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), s.server.port()});
  asio::write(socket, asio::buffer(header_of(12 << 10)));
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res);
  CHECK(res.result_int() == 431);
  CHECK(res.body().find("headers too large") != std::string::npos);
  // Under the limit the same request is served.
  asio::io_context io2;
  tcp::socket ok(io2);
  ok.connect({asio::ip::make_address("127.0.0.1"), s.server.port()});
  asio::write(ok, asio::buffer(header_of(6 << 10)));
  http::response<http::string_body> fine;
  boost::beast::flat_buffer buffer2;
  http::read(ok, buffer2, fine);
  CHECK(fine.result_int() == 200);
  CHECK(http_call(s.server.port(), http::verb::get, "/hello").status == 200);
}

TEST_CASE("a keep-alive connection may wait longer than the header timeout before its request begins",
          "[net][hostile]") {
  constexpr auto header_timeout = 200ms;
  RunningServer s({.header_timeout_ms = std::uint32_t(header_timeout.count())});
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), s.server.port()});
  for (int round = 0; round < 2; ++round) {
    // Idle for three header timeouts, then the whole request at once.
    asio::steady_timer idle(io, 3 * header_timeout);
    idle.wait();
    asio::write(socket, asio::buffer(header_of(100)));
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(socket, buffer, res);
    INFO("request " << round << " on the connection");
    CHECK(res.result_int() == 200);
  }
}
