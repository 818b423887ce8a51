#pragma once
// TaskGroup: structured concurrency, Seastar's gate on Asio coroutines. Every
// coroutine the runtime starts is spawned into a group; stop() cancels the
// children and waits until each has finished, so nothing is fire-and-forget
// and nothing outlives the component that owns the group.
//
// Owns its children's bookkeeping (one cancellation signal each), not their
// frames, which Asio owns. Thread-safe. A child runs on the executor it was
// spawned on, which must not run two handlers at once (an io_context run by
// one thread, or a strand): cancellation is delivered there.
//
// A child that throws is a fault: the group keeps the first such exception and
// wait()/stop() rethrow it. Cancellation errors (operation_aborted,
// channel_cancelled) are the expected end of a cancelled child, not faults.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pensieve::rt {

namespace asio = boost::asio;

class TaskGroup {
 public:
  TaskGroup() = default;
  // A group must be stopped or waited empty before it goes: a live child
  // would call back into a dead group.
  ~TaskGroup();
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;

  // Starts `task` on `executor` as a child. Refused (returns false, the task
  // never runs) once stop has been requested.
  template <class Executor>
  bool spawn(const Executor& executor, asio::awaitable<void> task) {
    return spawn_child(executor, std::move(task));
  }
  // Starts `make_task()` as a child, keeping the callable alive until the
  // task ends: a lambda coroutine's captures stay valid.
  template <class Executor, class F>
    requires std::is_invocable_r_v<asio::awaitable<void>, F&>
  bool spawn(const Executor& executor, F&& make_task) {
    return spawn_child(executor, std::forward<F>(make_task));
  }

  // Refuses new children and delivers terminal cancellation to every child
  // on its own executor. Returns at once; callable from any thread.
  void request_stop();

  // request_stop(), then wait().
  asio::awaitable<void> stop();

  // Waits until no child is left (without cancelling them), then rethrows the
  // first fault, if any. Must not be awaited by a child of this group.
  asio::awaitable<void> wait();

  std::size_t size() const;
  bool stopping() const;

 private:
  struct Child {
    std::shared_ptr<asio::cancellation_signal> signal;
    asio::any_io_executor executor;
  };
  using Waiter = asio::experimental::concurrent_channel<void(boost::system::error_code)>;

  template <class Executor, class Task>
  bool spawn_child(const Executor& executor, Task&& task) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    const std::uint64_t id = next_id_++;
    auto signal = std::make_shared<asio::cancellation_signal>();
    children_.emplace(id, Child{signal, asio::any_io_executor(executor)});
    // co_spawn only posts the start, so no child code runs under the lock.
    asio::co_spawn(executor, std::forward<Task>(task),
                   asio::bind_cancellation_slot(signal->slot(), [this, id](std::exception_ptr e) {
                     on_child_done(id, std::move(e));
                   }));
    return true;
  }

  void on_child_done(std::uint64_t id, std::exception_ptr error);
  void rethrow_first_fault();

  mutable std::mutex mutex_;  // guards everything below
  bool stopping_ = false;
  std::uint64_t next_id_ = 0;
  std::unordered_map<std::uint64_t, Child> children_;
  std::vector<std::shared_ptr<Waiter>> waiters_;  // woken when children_ empties
  std::exception_ptr first_fault_;
};

}  // namespace pensieve::rt
