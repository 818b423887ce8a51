#pragma once
// Event: a point in a Stream. It completes once every piece of work enqueued
// on its stream before it has completed. A coroutine awaits it without
// blocking a thread (`co_await event.wait(executor)`); another stream waits
// for it without blocking the host (Stream::wait).
//
// Copies of an Event share one completion state. The state completes on the
// stream's worker (CPU) or CUDA's callback thread; awaiting handlers are then
// posted to their executors, never run on the completing thread.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace pensieve::rt {

// A move-only `void()` callable: stream work and event continuations, which
// often own move-only things (a coroutine's completion handler, a buffer).
class HostFn {
 public:
  HostFn() = default;
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, HostFn> && std::is_invocable_r_v<void, F&>)
  HostFn(F&& f)  // NOLINT(google-explicit-constructor): lambdas convert implicitly
      : impl_(std::make_unique<Impl<std::decay_t<F>>>(std::forward<F>(f))) {}

  void operator()() { impl_->call(); }
  explicit operator bool() const noexcept { return impl_ != nullptr; }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual void call() = 0;
  };
  template <class F>
  struct Impl final : Base {
    explicit Impl(F&& fn) : f(std::move(fn)) {}
    explicit Impl(const F& fn) : f(fn) {}
    void call() override { f(); }
    F f;
  };
  std::unique_ptr<Base> impl_;
};

namespace detail {

// Completion state shared by an Event's copies and the stream that will
// complete it. Thread-safe; completes exactly once.
class EventState {
 public:
  bool is_complete() const noexcept { return complete_.load(std::memory_order_acquire); }

  // Marks the event complete and runs the registered continuations on the
  // calling thread, in registration order.
  void complete();

  // Runs `fn` when the event completes: at once on the calling thread when it
  // already has, else on the completing thread.
  void on_complete(HostFn fn);

  // Blocks the calling thread until complete (shutdown, tests, non-coroutine
  // callers). Never call it on the thread that would complete the event.
  void wait_blocking();

 private:
  std::atomic<bool> complete_{false};
  std::mutex mutex_;
  std::condition_variable done_;
  std::vector<HostFn> continuations_;
};

}  // namespace detail

class Event {
 public:
  // A default Event is already complete: waiting on it never waits.
  Event() = default;
  explicit Event(std::shared_ptr<detail::EventState> state,
                 std::shared_ptr<void> device_event = nullptr)
      : state_(std::move(state)), device_event_(std::move(device_event)) {}

  bool is_complete() const noexcept { return state_ == nullptr || state_->is_complete(); }

  // Completes the token (by default: resumes the awaiting coroutine) through
  // `executor` once the event has completed. Signature: void(). The
  // executor's context must outlive the stream that completes the event (the
  // completing thread posts to it).
  template <class Token = boost::asio::use_awaitable_t<>>
  auto wait(boost::asio::any_io_executor executor, Token&& token = {}) const {
    return boost::asio::async_initiate<Token, void()>(
        [](auto handler, std::shared_ptr<detail::EventState> state,
           boost::asio::any_io_executor ex) {
          if (state == nullptr) {
            boost::asio::post(ex, std::move(handler));
            return;
          }
          state->on_complete([ex, h = std::move(handler)]() mutable {
            boost::asio::post(ex, std::move(h));
          });
        },
        token, state_, std::move(executor));
  }

  // Runs `fn` on the completing thread (or now, when already complete). For
  // runtime plumbing; `fn` must be short and must not block.
  void on_complete(HostFn fn) const {
    if (state_ == nullptr) {
      fn();
    } else {
      state_->on_complete(std::move(fn));
    }
  }

  // Blocks the calling thread until complete; not for coroutines.
  void wait_blocking() const {
    if (state_ != nullptr) state_->wait_blocking();
  }

  // The backend's device event (a cudaEvent_t for CUDA streams), or null for
  // CPU events and default events.
  void* device_event() const noexcept { return device_event_.get(); }

 private:
  std::shared_ptr<detail::EventState> state_;
  // Owns the device event; kept apart from state_ so that the completing
  // callback (which may not call the device API) never destroys it.
  std::shared_ptr<void> device_event_;
};

}  // namespace pensieve::rt
