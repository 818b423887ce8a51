#pragma once
// Actor: a coroutine that owns its state and drains a bounded Mailbox, one
// message at a time. An actor is a handler object (its state plus what it does
// with each message) and a message type, typically a std::variant inbox
// declared in a *_protocol.hpp. The handler is called with the message, or,
// for a variant it cannot take whole, visited with each alternative. It
// returns void, or asio::awaitable<void> for handling that must wait.
//
//   struct Counter {                       // state + behaviour
//     int count = 0;
//     void operator()(Add m) { count += m.n; }
//     void operator()(Get m) { m.reply.send(count); }
//   };
//   auto ref = spawn_actor<CounterMsg>(group, executor, Counter{}, {.name = "counter"});
//   co_await ref.tell(Add{2});
//
// Stopping: request_stop(drain) handles every message already accepted and
// then ends; request_stop(reject) ends after the message in hand, rejecting the
// rest: each rejected request gets AskError::actor_stopped, the handler's
// optional `on_rejected(Msg&)` sees every rejected message, and stats() counts
// them. A send after stop is refused (SendStatus::closed). So every message
// is handled, rejected, or refused to its sender; none vanishes. Cancelling
// the actor's TaskGroup stops it like request_stop(reject).
//
// GCC 12 (Debian 12's compiler) destroys an aggregate temporary that appears
// in a co_await expression twice (found while writing these tests; fixed in
// later GCCs). Build a message or request that owns anything (a Reply, a
// shared_ptr, a string) in a named variable, then co_await with std::move:
//   Get get;  auto n = co_await ref.ask(std::move(get), 100ms);
// (`co_await ref.tell(Add{2})` is safe only because Add is trivially
// destructible.) It also mis-compiles co_await inside || / && / ?: operands
// and in a `while (auto x = co_await ...)` condition (a hang under -O1):
// give each co_await a statement of its own.
//
// Threads: the handler and its state live on the executor the actor was
// spawned on (one handler at a time). ActorRef is a cheap handle, usable from
// any thread; it must not outlive the execution context.
#include "runtime/actor_core.hpp"
#include "runtime/ask.hpp"
#include "runtime/task_group.hpp"

#include <chrono>
#include <memory>
#include <string_view>
#include <utility>

namespace pensieve::rt {

template <class Msg>
class ActorRef {
 public:
  ActorRef() = default;
  explicit ActorRef(std::shared_ptr<detail::ActorCore<Msg>> core) : core_(std::move(core)) {}

  explicit operator bool() const noexcept { return core_ != nullptr; }
  std::string_view name() const { return core_->options.name; }

  // Sends, waiting while the mailbox is full (back-pressure). The ref must
  // stay alive until the co_await completes.
  asio::awaitable<SendStatus> tell(Msg msg) const { return core_->mailbox.send(std::move(msg)); }

  // Sends without waiting, for callers that are not coroutines (a sync
  // handler). On `full` or `closed` the caller still holds `msg`.
  SendStatus try_tell(Msg& msg) const { return core_->mailbox.try_send(msg); }
  SendStatus try_tell(Msg&& msg) const { return core_->mailbox.try_send(msg); }

  // Sends a request (a message alternative with a `Reply<T> reply` member)
  // and awaits its answer. See ask.hpp for the outcomes.
  template <class Req>
  asio::awaitable<AskResult<reply_value_t<Req>>> ask(Req req) const {
    return rt::ask<Msg>(mailbox(), std::move(req));
  }
  template <class Req, class Rep, class Period>
  asio::awaitable<AskResult<reply_value_t<Req>>> ask(
      Req req, std::chrono::duration<Rep, Period> timeout) const {
    return rt::ask<Msg>(mailbox(), std::move(req), timeout);
  }

  // Asks the actor to stop; returns at once. Callable from any thread,
  // including the actor's own handler. The first request's mode wins, except
  // that reject overrides a drain in progress.
  void request_stop(StopMode mode) const { core_->request_stop(mode); }

  // request_stop(mode), then join().
  asio::awaitable<void> stop(StopMode mode) const {
    core_->request_stop(mode);
    return join();
  }

  // Waits until the actor has ended: every accepted message was handled or
  // rejected. Not to be awaited from the actor's own handler.
  asio::awaitable<void> join() const { return detail::join_actor(core_); }

  bool ended() const noexcept { return core_->ended(); }
  ActorStats stats() const noexcept { return core_->stats(); }
  std::size_t mailbox_capacity() const noexcept { return core_->mailbox.capacity(); }

 private:
  std::shared_ptr<Mailbox<Msg>> mailbox() const { return {core_, &core_->mailbox}; }

  std::shared_ptr<detail::ActorCore<Msg>> core_;
};

// Starts an actor on `executor` (an io_context run by one thread, or a
// strand) as a child of `group`. When the group is already stopping the
// actor never runs: its mailbox is closed and every send is refused.
template <class Msg, class Handler, class Executor>
ActorRef<Msg> spawn_actor(TaskGroup& group, const Executor& executor, Handler handler,
                          ActorOptions options = {}) {
  auto core = std::make_shared<detail::ActorCore<Msg>>(asio::any_io_executor(executor), options);
  if (!group.spawn(executor, detail::run_actor<Msg>(core, std::move(handler)))) {
    core->end_unstarted();
  }
  return ActorRef<Msg>(std::move(core));
}

}  // namespace pensieve::rt
