#pragma once
// RpcTurnBridge: one RPC turn's engine side. It starts the turn on the
// engine's Asio executor, drains it there through the front ends' one
// TurnCall (the request timeout and the metrics included) and forwards the
// turn's own events (actors::TurnEvent) to the Cap'n Proto loop through an
// RpcInbox; cancel() reaches the stream from any thread. RpcTurnTracker counts the turns still in the engine
// so a stopping server can wait for them.
//
// Threads: start() and cancel() from any thread; the turn runs on the engine
// executor (no strand: a strand behind any_io_executor is heap-shared with an
// acquire fence TSan cannot follow); the stream pointer is guarded by a
// mutex (the stream may end meanwhile; its cancel() itself is a message to
// the scheduler, safe from any thread); events() is
// consumed on the loop thread.
#include "actors/engine.hpp"
#include "net/rpc_inbox.hpp"
#include "net/turn_call.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pensieve::net {

class RpcTurnTracker {
 public:
  void begin();
  void end();
  std::size_t active() const;
  // Blocks until no turn is in the engine. Never on the engine's executor.
  void wait_idle() const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable idle_;
  std::size_t active_ = 0;
};

class RpcTurnBridge : public std::enable_shared_from_this<RpcTurnBridge> {
 public:
  RpcTurnBridge(actors::Engine& engine, const boost::asio::any_io_executor& executor,
                std::shared_ptr<RpcTurnTracker> tracker, std::shared_ptr<RpcLoopWaker> waker);

  // Posts the turn to the engine executor. Events: TurnStarted once the
  // engine has accepted the turn, then deltas, then TurnDone; or a single
  // TurnFailed when the engine refuses it, or TurnStarted, deltas and a
  // TurnFailed (a timeout among them).
  void start(actors::TurnRequest request, const RequestLimits& limits, TurnCallOptions options = {});
  // Stops the turn at the engine's next iteration: on return the engine's
  // stream has been told (or will be as soon as it exists).
  void cancel();
  RpcInbox<actors::TurnEvent>& events() { return events_; }

 private:
  boost::asio::awaitable<void> run(actors::TurnRequest request, RequestLimits limits,
                                  TurnCallOptions options);

  actors::Engine& engine_;
  boost::asio::any_io_executor executor_;
  std::shared_ptr<RpcTurnTracker> tracker_;
  RpcInbox<actors::TurnEvent> events_;
  std::mutex mutex_;
  const TurnCall* call_ = nullptr;        // guarded by mutex_, while run() owns it
  bool cancel_requested_ = false;         // guarded by mutex_
};

}  // namespace pensieve::net
