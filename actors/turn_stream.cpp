#include "actors/turn_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace pensieve::actors {

namespace asio = boost::asio;

asio::awaitable<std::optional<TurnDelta>> TurnStream::next() {
  while (!ended_) {
    auto [ec, event] = co_await channel_->async_receive(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      ended_ = true;
      result_ = TurnError{TurnErrorKind::internal, "turn stream broken: " + ec.message()};
      break;
    }
    switch (event.kind) {
      case ClientEvent::Kind::delta: co_return std::move(event.delta);
      case ClientEvent::Kind::done:
        ended_ = true;
        result_ = event.summary;
        break;
      case ClientEvent::Kind::error:
        ended_ = true;
        result_ = std::move(event.error);
        break;
    }
  }
  co_return std::nullopt;
}

}  // namespace pensieve::actors
