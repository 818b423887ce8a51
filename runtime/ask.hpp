#pragma once
// ask: send a request that carries a Reply<T> slot and await the answer, with
// an optional timeout, cancellable through the asking coroutine's own
// cancellation slot (co_spawn with bind_cancellation_slot, awaitable
// operators, a TaskGroup's stop). The outcome is an AskResult<T>: the value,
// or timed_out / cancelled / actor_stopped / no_reply. Nothing leaks on any of
// these paths: an answer that comes too late lands in a slot nobody awaits
// and is freed with it.
//
// Runs in the asking coroutine, on its executor; the mailbox may belong to an
// actor on any executor.
#include "runtime/mailbox.hpp"
#include "runtime/reply.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/channel_error.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

namespace pensieve::rt {

namespace detail {

inline bool is_cancellation_error(const boost::system::error_code& ec) {
  return ec == asio::error::operation_aborted ||
         ec == asio::experimental::error::channel_cancelled;
}

inline bool is_cancelled(const asio::cancellation_state& state) {
  return state.cancelled() != asio::cancellation_type::none;
}

// Binds the request's reply slot, enqueues it (waiting while the mailbox is
// full) and awaits the answer.
template <class Msg, class Req>
asio::awaitable<AskResult<reply_value_t<Req>>> send_and_await(std::shared_ptr<Mailbox<Msg>> mailbox,
                                                              Req req) {
  using R = reply_value_t<Req>;
  auto [reply, pending] = make_reply<R>(co_await asio::this_coro::executor);
  req.reply = std::move(reply);
  try {
    switch (co_await mailbox->send(Msg(std::move(req)))) {
      case SendStatus::sent:
        break;
      case SendStatus::closed:
        co_return ask_error<R>(AskError::actor_stopped);
      case SendStatus::full:
      case SendStatus::cancelled:
        co_return ask_error<R>(AskError::cancelled);
    }
    co_return co_await pending.wait();
  } catch (const boost::system::system_error& e) {
    // Cancelled between two awaits: Asio throws at the next one.
    if (!is_cancellation_error(e.code())) throw;
  }
  // Only the cancellation catch gets here (co_await is not allowed in a handler).
  co_return ask_error<R>(AskError::cancelled);
}

// co_spawn needs a default-constructible result; AskResult<T> may not be.
template <class Msg, class Req>
asio::awaitable<std::optional<AskResult<reply_value_t<Req>>>> send_and_await_boxed(
    std::shared_ptr<Mailbox<Msg>> mailbox, Req req) {
  co_return co_await send_and_await(std::move(mailbox), std::move(req));
}

}  // namespace detail

// Asks without a time limit; only the caller's cancellation ends the wait early.
template <class Msg, class Req>
asio::awaitable<AskResult<reply_value_t<Req>>> ask(std::shared_ptr<Mailbox<Msg>> mailbox, Req req) {
  const auto state = co_await asio::this_coro::cancellation_state;
  if (detail::is_cancelled(state)) co_return ask_error<reply_value_t<Req>>(AskError::cancelled);
  co_return co_await detail::send_and_await(std::move(mailbox), std::move(req));
}

// Asks with a time limit covering both the wait for mailbox room and the wait
// for the answer.
template <class Msg, class Req, class Rep, class Period>
asio::awaitable<AskResult<reply_value_t<Req>>> ask(std::shared_ptr<Mailbox<Msg>> mailbox, Req req,
                                                   std::chrono::duration<Rep, Period> timeout) {
  using R = reply_value_t<Req>;
  const auto state = co_await asio::this_coro::cancellation_state;
  if (detail::is_cancelled(state)) co_return ask_error<R>(AskError::cancelled);
  const auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor, timeout);
  // The first to finish cancels the other; both have finished when this resumes.
  auto [order, fault, answer, timer_ec] =
      co_await asio::experimental::make_parallel_group(
          asio::co_spawn(executor, detail::send_and_await_boxed(std::move(mailbox), std::move(req)),
                         asio::deferred),
          timer.async_wait(asio::deferred))
          .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
  if (order[0] == 0) {
    if (fault) std::rethrow_exception(fault);
    co_return std::move(*answer);
  }
  co_return ask_error<R>(timer_ec ? AskError::cancelled : AskError::timed_out);
}

}  // namespace pensieve::rt
