#pragma once
// RpcTurnBridge: one RPC turn's engine side. It starts the turn on the
// engine's Asio executor, drains its TurnStream there and forwards every
// event to the Cap'n Proto loop through an RpcInbox; cancel() reaches the
// stream from any thread. RpcTurnTracker counts the turns still in the engine
// so a stopping server can wait for them.
//
// Threads: start() and cancel() from any thread; the turn runs on the engine
// executor (no strand: a strand behind any_io_executor is heap-shared with an
// acquire fence TSan cannot follow); the stream pointer is guarded by a
// mutex, since cancelling a TurnStream is an atomic store; events() is
// consumed on the loop thread.
#include "actors/engine.hpp"
#include "net/rpc_inbox.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pensieve::net {

struct RpcTurnEvent {
  enum class Kind : std::uint8_t { accepted, delta, done, error } kind = Kind::done;
  actors::TurnDelta delta;
  actors::TurnSummary summary;
  actors::TurnError error;
};

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

struct RpcTurnRequest {
  std::string tenant;
  std::string conversation;
  std::vector<model::ChatMessage> messages;
  model::SamplingParams sampling;
};

class RpcTurnBridge : public std::enable_shared_from_this<RpcTurnBridge> {
 public:
  RpcTurnBridge(actors::Engine& engine, const boost::asio::any_io_executor& executor,
                std::shared_ptr<RpcTurnTracker> tracker, std::shared_ptr<RpcLoopWaker> waker);

  // Posts the turn to the engine executor. Events: accepted, then deltas,
  // then done; or a single error when the engine refuses the turn, or
  // accepted, deltas and an error.
  void start(RpcTurnRequest request);
  // Stops the turn at the engine's next iteration: on return the engine's
  // stream has been told (or will be as soon as it exists).
  void cancel();
  RpcInbox<RpcTurnEvent>& events() { return events_; }

 private:
  boost::asio::awaitable<void> run(RpcTurnRequest request);

  actors::Engine& engine_;
  boost::asio::any_io_executor executor_;
  std::shared_ptr<RpcTurnTracker> tracker_;
  RpcInbox<RpcTurnEvent> events_;
  std::mutex mutex_;
  actors::TurnStream* stream_ = nullptr;  // guarded by mutex_, while run() owns it
  bool cancel_requested_ = false;         // guarded by mutex_
};

}  // namespace pensieve::net
