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

// Takes over a connection whose request asks for a WebSocket upgrade on its
// path; the connection ends when the handler returns. The server's stop()
// closes the socket under it, so every pending operation fails at once.
using UpgradeHandler =
    std::function<boost::asio::awaitable<void>(boost::beast::tcp_stream& stream, HttpRequest request)>;

struct WebSocketRoute {
  std::string path;  // exact match, query string ignored
  UpgradeHandler handler;
};

struct HttpServerOptions {
  std::size_t max_body_bytes = 1 << 20;
  std::uint32_t idle_timeout_s = 60;
  std::vector<WebSocketRoute> websocket_routes;
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
  // With a grace period, idle connections close at once and requests being
  // answered (a streamed reply included) get up to `grace` to complete
  // before their connections are closed too.
  boost::asio::awaitable<void> stop(std::chrono::milliseconds grace = std::chrono::milliseconds(0));

  struct State;  // shared with the connection coroutines; defined in the .cpp

 private:
  std::shared_ptr<State> state_;
};

}  // namespace pensieve::net
