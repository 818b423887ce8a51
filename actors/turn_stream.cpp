#include "actors/turn_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace pensieve::actors {

namespace asio = boost::asio;

std::optional<TurnDelta> TurnStream::take(boost::system::error_code ec, ClientEvent event) {
  if (ec) {
    ended_ = true;
    result_ = TurnError{TurnErrorKind::internal, "turn stream broken: " + ec.message()};
    return std::nullopt;
  }
  switch (event.kind) {
    case ClientEvent::Kind::delta: return std::move(event.delta);
    case ClientEvent::Kind::done:
      ended_ = true;
      result_ = event.summary;
      break;
    case ClientEvent::Kind::error:
      ended_ = true;
      result_ = std::move(event.error);
      break;
  }
  return std::nullopt;
}

asio::awaitable<std::optional<TurnDelta>> TurnStream::next() {
  while (!ended_) {
    auto [ec, event] = co_await channel_->async_receive(asio::as_tuple(asio::use_awaitable));
    std::optional<TurnDelta> delta = take(ec, std::move(event));
    if (delta) co_return delta;
  }
  co_return std::nullopt;
}

std::optional<TurnDelta> TurnStream::try_next() {
  std::optional<TurnDelta> delta;
  // try_receive calls the handler at once, on this thread, when an event is queued.
  while (!ended_ && !delta) {
    const bool received = channel_->try_receive(
        [&](boost::system::error_code ec, ClientEvent event) { delta = take(ec, std::move(event)); });
    if (!received) break;
  }
  return delta;
}

}  // namespace pensieve::actors
