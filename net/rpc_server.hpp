#pragma once
// RpcServer: serves the Cap'n Proto interface (schemas/pensieve.capnp) for
// internal clients. Its event loop runs on a thread of its own (kj's async
// I/O is per thread), listening on host:port; engine calls run on the Asio
// executor given at start, whose context must be running and outlive both
// the server and the engine (see Engine).
//
//   auto rpc = RpcServer::start(engine, io.get_executor(), {.host = "127.0.0.1", .port = 8081});
//   ...
//   (*rpc)->stop();   // any thread but the loop's; never waits on the executor
//
// Owns the loop thread and, on it, the listener, the connections and the
// turns in flight. stop() closes them all: turns in flight are cancelled;
// shutdown(grace) first lets them finish.
#include "actors/engine.hpp"
#include "net/rpc_connections.hpp"
#include "net/rpc_drain.hpp"
#include "net/rpc_loop_waker.hpp"
#include "net/rpc_service.hpp"
#include "net/rpc_turn_bridge.hpp"
#include "runtime/error.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <kj/async.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace pensieve::net {

struct RpcServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: any free port (see port())
  std::string tenant;      // RPC clients' conversations belong to this tenant
  int max_deltas_in_flight = 4;
  // shutdown(): once every answer is delivered, how long a connection's
  // peer gets to read to the end and close (within the grace period). A
  // client that reads takes a moment; one whose loop is not running would
  // hold the stop for all of it.
  std::chrono::milliseconds hang_up_linger{1000};
  // Keys required: clients must login(key) and act for the key's tenant.
  std::shared_ptr<const ApiKeys> keys;
  RequestLimits limits;  // the bounds every turn is checked against (net/turn_call.hpp)
  TurnCallOptions turn;  // each turn's timeout and the metrics it records into
};

class RpcServer {
 public:
  // Binds and starts the loop thread; returns once the server accepts.
  static Result<std::unique_ptr<RpcServer>> start(actors::Engine& engine, boost::asio::any_io_executor executor,
                                                  RpcServerOptions options);
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  std::uint16_t port() const { return port_; }

  // Stops listening, drops every connection (cancelling their turns) and
  // joins the loop thread. Idempotent; does not wait for the engine.
  void stop();
  // Stops in the background without blocking the caller (any thread): no
  // new turns (sendTurn throws "unavailable: the server is shutting down"),
  // turns in flight get up to `grace` to deliver their whole reply to their
  // sink and every answer to its client (RpcConnections::flushed, then
  // hang_up for at most hang_up_linger), then the loop stops as stop()
  // does. `stopped` runs once the loop has ended (on its thread; on the
  // caller's if it had already). Call stop() or destroy the server
  // afterwards to join the thread.
  void shutdown(std::chrono::milliseconds grace, std::function<void()> stopped);
  // Turns this server started that are still in the engine.
  std::size_t active_turns() const { return tracker_->active(); }
  // Blocks until active_turns() == 0. Not on the engine executor's thread.
  void wait_turns_ended() const { tracker_->wait_idle(); }

 private:
  RpcServer(actors::Engine& engine, boost::asio::any_io_executor executor, RpcServerOptions options);
  void run(std::promise<Result<std::uint16_t>>& bound);

  actors::Engine& engine_;
  boost::asio::any_io_executor executor_;
  RpcServerOptions options_;
  std::shared_ptr<RpcTurnTracker> tracker_ = std::make_shared<RpcTurnTracker>();
  std::uint16_t port_ = 0;
  std::shared_ptr<RpcLoopWaker> waker_ = std::make_shared<RpcLoopWaker>();
  std::mutex mutex_;
  bool running_ = false;                          // guarded by mutex_: the loop serves
  bool stop_posted_ = false;                      // guarded by mutex_
  bool ended_ = false;                            // guarded by mutex_: run() has returned
  std::function<void()> on_stopped_;             // guarded by mutex_
  kj::PromiseFulfiller<void>* stop_ = nullptr;  // the loop thread only: ends run()
  RpcDrain* drain_ = nullptr;                   // guarded by mutex_ (set while run() serves)
  RpcConnections* connections_ = nullptr;       // likewise
  kj::Timer* timer_ = nullptr;                  // likewise
  kj::Promise<void> draining_ = nullptr;        // likewise: the grace period in progress
  std::thread thread_;
};

}  // namespace pensieve::net
