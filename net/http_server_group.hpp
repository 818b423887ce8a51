#pragma once
// HttpServerGroup: one HttpServer per I/O thread, all listening on one port
// (SO_REUSEPORT when there are several), the kernel spreading the connections
// among them. A connection, its requests, its WebSocket session and the turn
// streams it starts (the engine delivers on the connection's executor) all
// stay on one thread, so the servers share nothing but the handler, which
// must be thread-safe (the OpenAI routes, the WebSocket chat and the engine
// are). Why: one thread writing every stream's tokens queues the last
// client's behind everyone else's.
//
// Owns the io_contexts, their threads and the servers. Create it before the
// engine (the engine completes operations on its contexts until it is gone)
// and join() it before destroying the engine.
#include "net/http_server.hpp"
#include "runtime/error.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace pensieve::net {

class HttpServerGroup {
 public:
  // Starts `threads` (>= 1) I/O threads, idle until listen().
  explicit HttpServerGroup(int threads);
  ~HttpServerGroup();
  HttpServerGroup(const HttpServerGroup&) = delete;
  HttpServerGroup& operator=(const HttpServerGroup&) = delete;

  // Binds every server to host:port (port 0: one free port for all) and
  // starts accepting. Call once.
  Result<void> listen(const std::string& host, std::uint16_t port, const HttpHandler& handler,
                      HttpServerOptions options);
  std::uint16_t port() const { return port_; }
  std::size_t threads() const { return contexts_.size(); }

  // HttpServer::stop(grace) on every server at once, each on its thread;
  // completes on the awaiting coroutine's executor when all have.
  boost::asio::awaitable<void> stop(std::chrono::milliseconds grace);
  // Stops the threads (what their contexts still hold is dropped, as when
  // an io_context stops) and joins them. Idempotent.
  void join();

 private:
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts_;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::unique_ptr<HttpServer>> servers_;
  std::vector<std::thread> threads_;
  std::uint16_t port_ = 0;
};

}  // namespace pensieve::net
