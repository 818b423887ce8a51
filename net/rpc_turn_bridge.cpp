#include "net/rpc_turn_bridge.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

namespace pensieve::net {

namespace asio = boost::asio;

void RpcTurnTracker::begin() {
  std::lock_guard lock(mutex_);
  ++active_;
}

void RpcTurnTracker::end() {
  std::lock_guard lock(mutex_);
  if (--active_ == 0) idle_.notify_all();
}

std::size_t RpcTurnTracker::active() const {
  std::lock_guard lock(mutex_);
  return active_;
}

void RpcTurnTracker::wait_idle() const {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return active_ == 0; });
}

RpcTurnBridge::RpcTurnBridge(actors::Engine& engine, const asio::any_io_executor& executor,
                             std::shared_ptr<RpcTurnTracker> tracker, std::shared_ptr<RpcLoopWaker> waker)
    : engine_(engine), executor_(executor), tracker_(std::move(tracker)), events_(std::move(waker)) {}

void RpcTurnBridge::start(actors::TurnRequest request, const RequestLimits& limits,
                          TurnCallOptions options) {
  tracker_->begin();
  asio::co_spawn(
      executor_,
      [self = shared_from_this(), request = std::move(request), limits, options]() mutable
      -> asio::awaitable<void> { co_await self->run(std::move(request), limits, options); },
      [self = shared_from_this()](std::exception_ptr failure) {
        if (failure) {
          self->events_.push(
              actors::TurnFailed{{actors::TurnErrorKind::internal, "the turn failed"}});
        }
        self->tracker_->end();
      });
}

void RpcTurnBridge::cancel() {
  std::lock_guard lock(mutex_);
  cancel_requested_ = true;
  if (call_) call_->cancel();
}

asio::awaitable<void> RpcTurnBridge::run(actors::TurnRequest request, RequestLimits limits,
                                         TurnCallOptions options) {
  const auto executor = co_await asio::this_coro::executor;
  auto started = TurnCall::start(engine_, executor, std::move(request), limits);
  if (!started) {
    events_.push(actors::TurnFailed{started.error()});
    co_return;
  }
  TurnCall call = std::move(*started);
  {
    std::lock_guard lock(mutex_);
    call_ = &call;
    if (cancel_requested_) call.cancel();
  }
  // Forget the call however this frame ends (even destroyed while suspended).
  struct Forget {
    RpcTurnBridge& bridge;
    ~Forget() {
      std::lock_guard lock(bridge.mutex_);
      bridge.call_ = nullptr;
    }
  } forget{*this};
  // Accepted: what the RPC client waits for before it gets its Turn (the
  // counts come with the summary).
  events_.push(actors::TurnStarted{});
  // The RPC turn paces the client's sink itself (deltas in flight).
  TurnWrite write = [this](std::span<actors::TurnDelta> deltas) -> asio::awaitable<bool> {
    for (auto& d : deltas) events_.push(std::move(d));
    co_return true;
  };
  actors::TurnResult result = co_await call.drain(std::move(write), options);
  if (result) {
    events_.push(std::move(*result));
  } else {
    events_.push(actors::TurnFailed{std::move(result.error())});
  }
}

}  // namespace pensieve::net
