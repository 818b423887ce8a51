#pragma once
// Mailbox<T>: a bounded, typed message queue over an Asio concurrent_channel.
// A full mailbox makes `send` wait (back-pressure) and `try_send` say `full`;
// it never grows past its capacity. Closing it refuses new messages while every
// message already accepted (buffered, or held by a sender waiting for room)
// stays receivable, so its owner can handle or reject each one: a message is
// either refused at the door (the sender is told) or delivered, never lost.
//
// Owns the queued messages. Thread-safe: any thread may send, close and
// receive; awaiting coroutines resume on their own executors. Must not outlive
// the execution context of the executor it was built with.
//
// Given a Tracer, a mailbox stamps each message with its send time
// (cpu_ticks()) while the tracer is enabled, so the receiver's trace span can
// say how long the message waited (see Delivery).
#include "runtime/clock.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/assert.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>

namespace pensieve::rt {

namespace asio = boost::asio;

// The outcome of handing a message to a mailbox.
enum class SendStatus {
  sent,       // accepted: it will be handled or rejected by the owner
  full,       // try_send only: no room now; the caller still holds the message
  closed,     // refused: the mailbox is closed (its actor stopped)
  cancelled,  // the waiting send was cancelled; the message was not accepted
};

std::string_view to_string(SendStatus status) noexcept;

// A received message and when its sender handed it over: cpu_ticks() at the
// send call (a wait for room included), 0 when it was not stamped.
template <class T>
struct Delivery {
  // A message on its way in, converted into a Delivery only once the channel
  // accepts it, so a refused try_send leaves the caller's message untouched.
  struct Sending {
    T& msg;
    std::uint64_t sent_ticks;
  };
  Delivery(T&& m, std::uint64_t ticks) noexcept : msg(std::move(m)), sent_ticks(ticks) {}
  // Implicit: the channel builds its element from a Sending when it accepts it.
  Delivery(Sending s) noexcept : msg(std::move(s.msg)), sent_ticks(s.sent_ticks) {}

  T msg;
  std::uint64_t sent_ticks = 0;
};

template <class T>
class Mailbox {
 public:
  // `tracer` (optional, must outlive the mailbox): stamp send times while it
  // is enabled.
  Mailbox(const asio::any_io_executor& executor, std::size_t capacity,
          const Tracer* tracer = nullptr)
      : capacity_(capacity), tracer_(tracer), channel_(executor, capacity) {
    BOOST_ASSERT_MSG(capacity > 0, "a mailbox needs room for at least one message");
  }
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  std::size_t capacity() const noexcept { return capacity_; }

  // Sends without waiting. On `full` or `closed` the message is left untouched
  // in `msg`, so the caller still owns it.
  SendStatus try_send(T& msg) {
    std::lock_guard lock(mutex_);
    if (closed_) return SendStatus::closed;
    return channel_.try_send(boost::system::error_code{},
                             typename Delivery<T>::Sending{msg, send_stamp()})
               ? SendStatus::sent
               : SendStatus::full;
  }
  SendStatus try_send(T&& msg) { return try_send(msg); }

  // Sends, waiting while the mailbox is full. Returns `sent`, `closed` (the
  // mailbox closed before accepting it) or `cancelled` (the caller's
  // cancellation slot fired while it waited); in the last two cases the
  // message was destroyed unhandled and the caller knows it.
  asio::awaitable<SendStatus> send(T msg) {
    if (SendStatus fast = try_send(msg); fast != SendStatus::full) co_return fast;
    auto token = asio::as_tuple(asio::use_awaitable);
    auto [ec] = co_await asio::async_initiate<decltype(token), void(boost::system::error_code)>(
        [this, &msg](auto handler) { start_waiting_send(std::move(msg), std::move(handler)); },
        token);
    if (!ec) co_return SendStatus::sent;
    if (ec == asio::experimental::error::channel_closed) co_return SendStatus::closed;
    co_return SendStatus::cancelled;
  }

  // Takes the oldest accepted message, if any, without waiting.
  std::optional<T> try_receive() {
    auto delivery = try_receive_delivery();
    if (!delivery) return std::nullopt;
    return std::optional<T>(std::move(delivery->msg));
  }

  // As try_receive(), with the message's send stamp.
  std::optional<Delivery<T>> try_receive_delivery() {
    std::optional<Delivery<T>> out;
    while (channel_.try_receive(
        [&out](boost::system::error_code, std::optional<Delivery<T>> m) { out = std::move(m); })) {
      if (out) return out;  // an empty optional is close()'s wake-up token
    }
    return std::nullopt;
  }

  // Waits for the next message. Returns nothing once the mailbox is closed and
  // every accepted message was taken, or when the wait is cancelled (see
  // closed() to tell which). One receiver at a time.
  asio::awaitable<std::optional<T>> receive() {
    auto delivery = co_await receive_delivery();
    if (!delivery) co_return std::nullopt;
    co_return std::optional<T>(std::move(delivery->msg));
  }

  // As receive(), with the message's send stamp.
  asio::awaitable<std::optional<Delivery<T>>> receive_delivery() {
    for (;;) {
      {
        // Under the lock, "empty and closed" is final: senders check closed_
        // under the same lock before they enqueue.
        std::lock_guard lock(mutex_);
        if (auto m = try_receive_delivery()) co_return m;
        if (closed_) co_return std::nullopt;
      }
      auto [ec, m] = co_await channel_.async_receive(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return std::nullopt;
      if (m) co_return m;
    }
  }

  // Refuses new messages; keeps the accepted ones receivable; wakes a waiting
  // receiver. Idempotent.
  void close() {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    // A receiver waits only on an empty buffer, so this token reaches it; when
    // the buffer is full nobody waits and the token is not needed.
    (void)channel_.try_send(boost::system::error_code{}, std::optional<Delivery<T>>{});
  }

  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }

 private:
  std::uint64_t send_stamp() const noexcept {
    return tracer_ != nullptr && tracer_->enabled() ? cpu_ticks() : 0;
  }

  template <class Handler>
  void start_waiting_send(T&& msg, Handler&& handler) {
    std::unique_lock lock(mutex_);
    if (closed_) {
      lock.unlock();
      auto ex = asio::get_associated_executor(handler, channel_.get_executor());
      asio::post(ex, [h = std::forward<Handler>(handler)]() mutable {
        std::move(h)(boost::system::error_code(asio::experimental::error::channel_closed));
      });
      return;
    }
    // Started under the lock, so close() cannot slip between the check and
    // the enqueue; the channel posts completions, it never runs them here.
    channel_.async_send(boost::system::error_code{},
                        std::optional<Delivery<T>>(std::in_place, std::move(msg), send_stamp()),
                        std::forward<Handler>(handler));
  }

  const std::size_t capacity_;
  const Tracer* tracer_;
  // Guards closed_ and makes "check closed_, then enqueue" atomic against
  // close(); taken before the channel's own lock.
  mutable std::mutex mutex_;
  bool closed_ = false;
  // An empty optional is the wake-up token close() sends to a waiting receiver.
  asio::experimental::concurrent_channel<void(boost::system::error_code,
                                               std::optional<Delivery<T>>)>
      channel_;
};

}  // namespace pensieve::rt
