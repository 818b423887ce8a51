#pragma once
// An HTTP/1.1 server on Boost.Beast coroutines. Owns the acceptor and every
// connection; each connection is one coroutine that reads a request, hands it
// to the handler and writes what the handler answers (keep-alive supported).
// Runs on the executor it is given; stop() closes the acceptor and all
// connections and completes when they have ended.
#include "net/http_types.hpp"
#include "runtime/error.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pensieve::net {

// What an upgraded connection learns of the server stopping. With a grace
// period, stop() calls on_going_away (on the server's executor) and leaves
// the connection open: the handler should take no new work, let what runs
// finish, then end (a WebSocket closes with 1001). Past the grace period, or
// without one, the server closes the socket under the handler, so every
// pending operation fails at once. Owned by the server, alive while the
// handler runs.
struct UpgradeContext {
  bool going_away = false;
  std::function<void()> on_going_away;  // set by the handler; may stay empty
};

// Takes over a connection whose request asks for a WebSocket upgrade on its
// path; the connection ends when the handler returns.
using UpgradeHandler = std::function<boost::asio::awaitable<void>(boost::beast::tcp_stream& stream,
                                                                  HttpRequest request, UpgradeContext& context)>;

struct WebSocketRoute {
  std::string path;  // exact match, query string ignored
  UpgradeHandler handler;
};

struct HttpServerOptions {
  std::size_t max_body_bytes = 1 << 20;
  // The request line and headers together; more is answered 431.
  std::uint32_t max_header_bytes = 8 << 10;
  // A connection waits this long for a request to begin (between keep-alive
  // requests too), and as long again for its body once the header is in.
  std::uint32_t idle_timeout_s = 60;
  // A request's header must be complete this long after its first byte;
  // past it the connection is closed (a slowloris client holds nothing longer).
  std::uint32_t header_timeout_ms = 10'000;
  std::vector<WebSocketRoute> websocket_routes;
  // SO_REUSEPORT: several servers, each on its own thread, listen on one
  // port and the kernel spreads the connections among them.
  bool reuse_port = false;
};

class HttpServer {
 public:
  HttpServer(boost::asio::any_io_executor executor, HttpHandler handler, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting. Port 0 picks a free port (see port()).
  Result<void> listen(const std::string& host, std::uint16_t port);
  std::uint16_t port() const;
  std::size_t open_connections() const;

  // Stops accepting, closes every connection, and waits for them to finish.
  // With a grace period, idle connections close at once, requests being
  // answered (a streamed reply included) get up to `grace` to complete, and
  // upgraded connections are told to go away (UpgradeContext) and get as
  // long to end, before their connections are closed too.
  boost::asio::awaitable<void> stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  struct State;  // shared with the connection coroutines; defined in the .cpp

 private:
  std::shared_ptr<State> state_;
};

}  // namespace pensieve::net
