#pragma once
// An in-process OpenAI-compatible server for loopback tests: an Engine on the
// given model, an EngineBackend, its routes on an HttpServer at 127.0.0.1
// (port 0), and the thread running their io_context. `configure` may adjust
// the engine's options (e.g. an IterationGate hook) before it is built.
#include "actors/engine.hpp"
#include "net/engine_backend.hpp"
#include "net/http_server.hpp"
#include "net/openai_routes.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>

namespace pensieve::testing {

struct TestServer {
  // Declared first, destroyed last: the engine completes operations on it.
  boost::asio::io_context io;
  // Keeps run() going after the server stops, so a second stop() still runs.
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
  std::unique_ptr<actors::Engine> engine;
  std::unique_ptr<net::EngineBackend> backend;
  std::unique_ptr<net::HttpServer> http;
  std::thread thread;

  explicit TestServer(model::ModelWeights weights, const std::function<void(actors::EngineOptions&)>& configure = {},
                      net::EngineBackendOptions backend_options = {}) {
    actors::EngineOptions o;
    o.n_threads = 1;
    o.kv_cache_mb = 16;
    if (configure) configure(o);
    auto e = actors::Engine::create(std::move(weights), o);
    REQUIRE(e.has_value());
    engine = std::move(*e);
    backend = std::make_unique<net::EngineBackend>(*engine, std::move(backend_options));
    http = std::make_unique<net::HttpServer>(io.get_executor(), net::make_openai_routes(*backend, {}),
                                             net::HttpServerOptions{});
    REQUIRE(http->listen("127.0.0.1", 0).has_value());
    thread = std::thread([this] { io.run(); });
  }
  ~TestServer() {
    boost::asio::co_spawn(io, http->stop(), boost::asio::use_future).get();
    io.stop();
    thread.join();
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;

  std::uint16_t port() const { return http->port(); }
  actors::SchedulerStats stats() { return boost::asio::co_spawn(io, engine->stats(), boost::asio::use_future).get(); }
  std::size_t open_connections() {
    return boost::asio::post(io, boost::asio::use_future([this] { return http->open_connections(); })).get();
  }
  // Waits (bounded) until the engine runs nothing and no connection is open.
  bool idle() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      const auto s = stats();
      if (s.running == 0 && s.waiting == 0 && open_connections() == 0) return true;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
};

}  // namespace pensieve::testing
