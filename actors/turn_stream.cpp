#include "actors/turn_stream.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace pensieve::actors {

namespace asio = boost::asio;

TurnStream::~TurnStream() {
  if (!channel_) return;  // moved from
  if (!ended_) cancel();
  channel_->close();  // the conversation sees that its client left
}

void TurnCanceller::cancel(TurnId turn) const {
  SchedulerMsg message = CancelTurn{turn};
  if (scheduler_.try_tell(message) != rt::SendStatus::full)
    return;  // sent, or the scheduler is gone
  auto tell = [](rt::ActorRef<SchedulerMsg> to, SchedulerMsg msg) -> asio::awaitable<void> {
    co_await to.tell(std::move(msg));
  };
  (void)group_->spawn(executor_,
                      tell(scheduler_, std::move(message)));  // refused: the engine is stopping
}

void TurnStream::cancel() const {
  // No engine any more: nothing left to stop.
  if (const auto canceller = canceller_.lock()) canceller->cancel(turn_);
}

void TurnStream::note(const TurnEvent& event) {
  if (const auto* s = std::get_if<TurnStarted>(&event)) {
    started_ = *s;
  } else if (const auto* d = std::get_if<TurnDone>(&event)) {
    ended_ = true;
    result_ = *d;
  } else if (const auto* f = std::get_if<TurnFailed>(&event)) {
    ended_ = true;
    result_ = f->error;
  }
}

asio::awaitable<TurnEvent> TurnStream::next_event() {
  if (ended_) {
    if (result_) co_return TurnEvent{*result_};
    co_return TurnEvent{TurnFailed{result_.error()}};
  }
  auto [ec, event] = co_await channel_->async_receive(asio::as_tuple(asio::use_awaitable));
  if (ec)
    event = TurnFailed{TurnError{TurnErrorKind::internal, "turn stream broken: " + ec.message()}};
  note(event);
  co_return std::move(event);
}

asio::awaitable<std::optional<TurnDelta>> TurnStream::next() {
  while (!ended_) {
    TurnEvent event = co_await next_event();
    if (auto* delta = std::get_if<TurnDelta>(&event)) co_return std::move(*delta);
  }
  co_return std::nullopt;
}

std::optional<TurnDelta> TurnStream::try_next() {
  std::optional<TurnDelta> delta;
  // try_receive calls the handler at once, on this thread, when an event is queued.
  while (!ended_ && !delta) {
    const bool received = channel_->try_receive([&](boost::system::error_code ec, TurnEvent event) {
      if (ec)
        event =
            TurnFailed{TurnError{TurnErrorKind::internal, "turn stream broken: " + ec.message()}};
      note(event);
      if (auto* d = std::get_if<TurnDelta>(&event)) delta = std::move(*d);
    });
    if (!received) break;
  }
  return delta;
}

}  // namespace pensieve::actors
