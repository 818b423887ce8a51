#pragma once
// Reply<T>: the one-shot reply slot a request carries, and AskResult<T>, what
// the asker gets back: the value, or why there is none (timed out, cancelled,
// actor stopped, dropped unanswered).
//
// Convention: a request is a plain struct with a member `Reply<T> reply`
// (STYLE.md: requests carry their reply slot). The runtime fills it in `ask`,
// and rejects it with AskError::actor_stopped when a stopping actor refuses
// the request; a slot destroyed without an answer sends AskError::no_reply, so
// an asker never waits on a request that is gone.
//
// Thread-safety: a Reply is answered from any one thread (the actor's); its
// PendingReply is awaited from one coroutine, on any executor. An answer
// that comes after the asker gave up (timed out, cancelled, its io_context
// destroyed) touches nothing of the asker's: the channel it would have
// landed in went with the PendingReply.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/assert.hpp>
#include <boost/assert/source_location.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>

#include <concepts>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace pensieve::rt {

namespace asio = boost::asio;

// Why an ask has no value. Ordinary outcomes, not faults.
enum class AskError {
  timed_out,      // no reply within the ask's timeout
  cancelled,      // the asker's cancellation slot fired
  actor_stopped,  // the actor was stopped: the request was refused or rejected
  no_reply,       // the actor dropped the request without answering it
};

std::string_view to_string(AskError error) noexcept;

// Called by AskResult<T>::value() on an error; found by argument-dependent lookup.
[[noreturn]] void throw_exception_from_error(const AskError& error,
                                             const boost::source_location& where);

template <class T>
using AskResult = boost::system::result<T, AskError>;

template <class T>
AskResult<T> ask_error(AskError error) {
  return AskResult<T>(boost::system::in_place_error, error);
}

namespace detail {

template <class T>
using ReplyChannel =
    asio::experimental::concurrent_channel<void(boost::system::error_code, std::optional<AskResult<T>>)>;

// Shared by a Reply and its PendingReply. The one-slot channel (answering
// never waits) belongs to the asker alone: it is bound to the asker's
// io_context, and destroying it unregisters it there, so it must never be
// destroyed by the answering actor after the asker (and its context) may be
// gone. The answer reaches it through `channel` under `mutex`, which the
// PendingReply clears before it destroys the channel; what the answering
// side holds afterwards is plain memory.
template <class T>
struct ReplyState {
  std::mutex mutex;
  ReplyChannel<T>* channel = nullptr;  // null once the asker's end is gone
};

}  // namespace detail

template <class T>
class PendingReply;

template <class T>
class Reply {
  static_assert(!std::is_void_v<T>, "reply with rt::Ack instead of void");

 public:
  using value_type = T;

  Reply() = default;  // an unbound slot; ask() binds it
  Reply(Reply&& other) noexcept : state_(std::move(other.state_)) {}
  Reply& operator=(Reply&& other) noexcept {
    if (this != &other) {
      finish(ask_error<T>(AskError::no_reply));
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~Reply() { finish(ask_error<T>(AskError::no_reply)); }

  // True while bound and not yet answered.
  bool pending() const noexcept { return state_ != nullptr; }

  void send(T value) {
    BOOST_ASSERT_MSG(pending(), "a reply is sent at most once, through a bound slot");
    finish(AskResult<T>(std::move(value)));
  }
  void fail(AskError error) {
    BOOST_ASSERT_MSG(pending(), "a reply is sent at most once, through a bound slot");
    finish(ask_error<T>(error));
  }

 private:
  friend class PendingReply<T>;
  template <class U>
  friend std::pair<Reply<U>, PendingReply<U>> make_reply(const asio::any_io_executor&);

  explicit Reply(std::shared_ptr<detail::ReplyState<T>> state) : state_(std::move(state)) {}

  void finish(AskResult<T> result) noexcept {
    if (!state_) return;
    {
      std::lock_guard lock(state_->mutex);
      // Never fails: the slot has room for the one answer it will ever get.
      // (try_send posts the asker's handler; it never runs it here.)
      if (state_->channel) (void)state_->channel->try_send(boost::system::error_code{}, std::move(result));
    }
    state_.reset();
  }

  std::shared_ptr<detail::ReplyState<T>> state_;
};

// The asker's end of a Reply: owns the channel the answer lands in.
template <class T>
class PendingReply {
 public:
  PendingReply(PendingReply&&) noexcept = default;
  PendingReply& operator=(PendingReply&&) = delete;
  PendingReply(const PendingReply&) = delete;
  ~PendingReply() {
    if (!state_) return;  // moved from
    std::lock_guard lock(state_->mutex);
    state_->channel = nullptr;  // from here on the answer goes nowhere
  }

  // Waits for the answer; cancellation through the awaiting coroutine's slot
  // yields AskError::cancelled.
  asio::awaitable<AskResult<T>> wait() {
    auto [ec, result] = co_await channel_->async_receive(asio::as_tuple(asio::use_awaitable));
    if (ec || !result) co_return ask_error<T>(AskError::cancelled);
    co_return std::move(*result);
  }

 private:
  template <class U>
  friend std::pair<Reply<U>, PendingReply<U>> make_reply(const asio::any_io_executor&);

  PendingReply(std::shared_ptr<detail::ReplyState<T>> state, std::unique_ptr<detail::ReplyChannel<T>> channel)
      : state_(std::move(state)), channel_(std::move(channel)) {
    state_->channel = channel_.get();
  }

  // Declared first, destroyed last: the destructor clears the state's
  // pointer before the channel goes.
  std::shared_ptr<detail::ReplyState<T>> state_;
  std::unique_ptr<detail::ReplyChannel<T>> channel_;
};

// A bound slot and its asker's end. The executor is the asker's.
template <class T>
std::pair<Reply<T>, PendingReply<T>> make_reply(const asio::any_io_executor& executor) {
  auto state = std::make_shared<detail::ReplyState<T>>();
  PendingReply<T> pending(state, std::make_unique<detail::ReplyChannel<T>>(executor, 1));
  return {Reply<T>(std::move(state)), std::move(pending)};
}

// The answer of a request that carries no value.
struct Ack {
  bool operator==(const Ack&) const = default;
};

// The value type of request `Req`'s reply slot (its member `reply`).
template <class Req>
using reply_value_t = typename decltype(std::declval<Req&>().reply)::value_type;

// True for a message type that carries a reply slot.
template <class M>
concept carries_reply = requires(M& m) {
  { m.reply.pending() } -> std::convertible_to<bool>;
  m.reply.fail(AskError::actor_stopped);
};

}  // namespace pensieve::rt
