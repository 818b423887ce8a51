#pragma once
// The inside of an actor (see actor.hpp for the user's view): the state its
// handles share (mailbox, stop request, counters, end signal) and the
// coroutine that drains the mailbox into the handler.
#include "runtime/mailbox.hpp"
#include "runtime/reply.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace pensieve::rt {

enum class StopMode {
  drain,   // handle every accepted message, then end
  reject,  // end after the message in hand; reject the rest
};

struct ActorOptions {
  // Names the actor in trace spans; must outlive the actor (a string literal
  // or a Tracer::intern'ed name).
  std::string_view name = "actor";
  std::size_t mailbox_capacity = 256;
  // When non-null (and enabled), one span per handled message: kind
  // SpanKind::message, the actor's name, the message's name, start/end ns,
  // and enqueue_ns, when the message was sent (its mailbox wait is
  // start - enqueue). A handler may name the span's request with
  // `std::uint64_t message_flow_id(const Msg&) const` (0: none).
  Tracer* tracer = nullptr;
  // Messages handled in a row before yielding the thread to other handlers.
  std::size_t messages_per_turn = 64;
};

struct ActorStats {
  std::uint64_t handled = 0;   // given to the handler
  std::uint64_t rejected = 0;  // accepted, then rejected by a stop
};

// "msg#<index>" for a variant inbox's alternative (the default span name).
std::string_view variant_alternative_name(std::size_t index) noexcept;

namespace detail {

template <class T>
inline constexpr bool is_variant_v = false;
template <class... Ts>
inline constexpr bool is_variant_v<std::variant<Ts...>> = true;

template <class T>
inline constexpr bool is_awaitable_v = false;
template <class T, class E>
inline constexpr bool is_awaitable_v<asio::awaitable<T, E>> = true;

// Calls the handler with the whole message, or visits a variant inbox.
template <class Handler, class Msg>
decltype(auto) invoke_handler(Handler& handler, Msg&& msg) {
  if constexpr (std::is_invocable_v<Handler&, Msg&&>) {
    return handler(std::move(msg));
  } else {
    static_assert(is_variant_v<Msg>, "the handler must accept the message type");
    return std::visit(handler, std::move(msg));
  }
}

template <class Handler, class Msg>
std::string_view message_name(const Handler& handler, const Msg& msg) {
  if constexpr (requires { handler.message_name(msg); }) {
    return handler.message_name(msg);
  } else if constexpr (is_variant_v<Msg>) {
    return variant_alternative_name(msg.index());
  } else {
    return "message";
  }
}

// Fills in what a message span knows besides its name: the message's send
// time and the request it belongs to.
template <class Handler, class Msg>
void describe_message_span(TraceSpan& span, const Handler& handler, const Msg& msg,
                           std::uint64_t sent_ticks) {
  if (!span.recording()) return;
  span.set_enqueue_ticks(sent_ticks);
  if constexpr (requires { handler.message_flow_id(msg); }) {
    span.set_flow_id(handler.message_flow_id(msg));
  }
}

template <class M>
void fail_reply(M& msg) {
  if constexpr (carries_reply<M>) {
    if (msg.reply.pending()) msg.reply.fail(AskError::actor_stopped);
  }
}

// Shared by an actor's coroutine and its ActorRefs; thread-safe.
template <class Msg>
struct ActorCore {
  static_assert(std::is_nothrow_move_constructible_v<Msg>, "messages must be nothrow-movable");

  ActorCore(const asio::any_io_executor& executor, const ActorOptions& opts)
      : options(opts), mailbox(executor, opts.mailbox_capacity, opts.tracer), finished(executor) {}

  void request_stop(StopMode mode) {
    if (mode == StopMode::reject) rejecting.store(true, std::memory_order_release);
    mailbox.close();
  }

  // Single writer (the actor's coroutine), any reader.
  static void bump(std::atomic<std::uint64_t>& counter) {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }

  template <class Handler>
  void reject(Msg& msg, Handler& handler) {
    if constexpr (requires { handler.on_rejected(msg); }) handler.on_rejected(msg);
    if constexpr (is_variant_v<Msg>) {
      std::visit([](auto& alternative) { fail_reply(alternative); }, msg);
    } else {
      fail_reply(msg);
    }
    bump(rejected);
  }

  // Rejects whatever is left and signals the end.
  template <class Handler>
  void end(Handler& handler) {
    mailbox.close();
    while (auto msg = mailbox.try_receive()) reject(*msg, handler);
    end_unstarted();
  }
  void end_unstarted() {
    mailbox.close();
    ended_flag.store(true, std::memory_order_release);
    finished.close();
  }

  bool ended() const noexcept { return ended_flag.load(std::memory_order_acquire); }
  ActorStats stats() const noexcept {
    return {handled.load(std::memory_order_relaxed), rejected.load(std::memory_order_relaxed)};
  }

  const ActorOptions options;
  Mailbox<Msg> mailbox;
  std::atomic<bool> rejecting{false};
  std::atomic<bool> ended_flag{false};
  std::atomic<std::uint64_t> handled{0};
  std::atomic<std::uint64_t> rejected{0};
  asio::experimental::concurrent_channel<void(boost::system::error_code)> finished;
};

// Waits until the actor has ended; closing `finished` wakes every waiter, now
// and later.
template <class Msg>
asio::awaitable<void> join_actor(std::shared_ptr<ActorCore<Msg>> core) {
  (void)co_await core->finished.async_receive(asio::as_tuple(asio::use_awaitable));
}

template <class Msg, class Handler>
asio::awaitable<void> handle_one(ActorCore<Msg>& core, Handler& handler, Msg& msg,
                                 std::uint64_t sent_ticks) {
  TraceSpan span(core.options.tracer, SpanKind::message, core.options.name,
                 message_name(handler, msg));
  describe_message_span(span, handler, msg, sent_ticks);
  co_await invoke_handler(handler, std::move(msg));
}

template <class Msg, class Handler>
asio::awaitable<void> drain_mailbox(ActorCore<Msg>& core, Handler& handler) {
  using Result = decltype(invoke_handler(handler, std::declval<Msg&&>()));
  // The group's cancellation stops the actor like request_stop(reject).
  const auto cancellation = co_await asio::this_coro::cancellation_state;
  std::size_t in_a_row = 0;
  for (;;) {
    std::optional<Delivery<Msg>> delivery = core.mailbox.try_receive_delivery();
    if (!delivery) {
      in_a_row = 0;
      delivery = co_await core.mailbox.receive_delivery();
      if (!delivery) co_return;  // closed and empty, or cancelled
    }
    Msg& msg = delivery->msg;
    if (core.rejecting.load(std::memory_order_acquire) ||
        cancellation.cancelled() != asio::cancellation_type::none) {
      core.reject(msg, handler);
      continue;
    }
    if constexpr (is_awaitable_v<Result>) {
      co_await handle_one(core, handler, msg, delivery->sent_ticks);
    } else {
      TraceSpan span(core.options.tracer, SpanKind::message, core.options.name,
                     message_name(handler, msg));
      describe_message_span(span, handler, msg, delivery->sent_ticks);
      invoke_handler(handler, std::move(msg));
    }
    ActorCore<Msg>::bump(core.handled);
    if (++in_a_row >= core.options.messages_per_turn) {
      in_a_row = 0;
      co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    }
  }
}

// The actor's coroutine: owns the handler (the actor's state) for its lifetime.
template <class Msg, class Handler>
asio::awaitable<void> run_actor(std::shared_ptr<ActorCore<Msg>> core, Handler handler) {
  std::exception_ptr fault;  // a handler's exception, or the group's cancellation
  try {
    co_await drain_mailbox(*core, handler);
  } catch (...) {
    fault = std::current_exception();
  }
  core->end(handler);
  if (fault) std::rethrow_exception(fault);
}

}  // namespace detail
}  // namespace pensieve::rt
