#pragma once
// An Engine (stories260K) and an RpcServer on 127.0.0.1, port 0, for the RPC
// and pensieve-cli tests. The engine's executor is an io_context run by a
// thread of the fixture; clients run their own kj loop on the test's thread.
#include "net/rpc_server.hpp"
#include "schemas/pensieve.capnp.h"
#include "tests/actors/engine_fixture.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <capnp/ez-rpc.h>
#include <kj/debug.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace pensieve::testing {

// Holds the scheduler thread (through EngineOptions::on_iteration) once
// armed, until released: what lets a test act "in the middle" of a turn.
class IterationGate {
 public:
  void pass() {
    std::unique_lock lock(mutex_);
    if (armed_) {
      arrived_ = true;
      changed_.notify_all();
    }
    changed_.wait(lock, [&] { return !armed_ || released_; });
  }
  // Waits (bounded) until the scheduler is held at the armed gate: a turn is
  // mid-generation. The engine cannot answer stats() meanwhile.
  bool wait_held() {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, std::chrono::seconds(60), [&] { return arrived_; });
  }
  void arm() {
    std::lock_guard lock(mutex_);
    armed_ = true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    released_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool armed_ = false;
  bool released_ = false;
  bool arrived_ = false;
};

struct RpcFixture {
  // `tweak`: changes to the engine's options (limits, expiry), applied last.
  explicit RpcFixture(net::RpcServerOptions options = {}, IterationGate* gate = nullptr,
                      const std::function<void(actors::EngineOptions&)>& tweak = {}) {
    actors::EngineOptions o;
    o.n_threads = 1;
    o.kv_cache_mb = 16;
    if (gate) o.on_iteration = [gate](const actors::IterationRecord&) { gate->pass(); };
    if (tweak) tweak(o);
    auto e = actors::Engine::create(stories_model(), o);
    REQUIRE(e.has_value());
    engine = std::move(*e);
    options.host = "127.0.0.1";
    options.port = 0;
    auto s = net::RpcServer::start(*engine, io.get_executor(), options);
    REQUIRE(s.has_value());
    server = std::move(*s);
    io_thread = std::thread([this] { io.run(); });
  }
  ~RpcFixture() {
    if (server) server->stop();
    if (server) server->wait_turns_ended();
    server.reset();
    engine.reset();
    work.reset();
    io_thread.join();
  }

  actors::SchedulerStats stats() { return asio::co_spawn(io, engine->stats(), asio::use_future).get(); }

  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::thread io_thread;
  std::unique_ptr<actors::Engine> engine;
  std::unique_ptr<net::RpcServer> server;
};

// The description of the kj::Exception `f` throws; empty when it throws none.
template <class F>
std::string rpc_error(F&& f) {
  try {
    f();
  } catch (const kj::Exception& e) {
    return e.getDescription().cStr();
  }
  return "";
}

}  // namespace pensieve::testing
