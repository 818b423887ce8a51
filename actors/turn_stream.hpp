#pragma once
// TurnStream: a turn's output as an awaitable generator, for whoever started
// the turn (the front ends, the benchmark, tests):
//
//   auto stream = engine.start_turn(...);           // Result<TurnStream>
//   for (;;) {
//     auto delta = co_await stream->next();  // never in a while condition: GCC 12
//     if (!delta) break;
//     use(*delta);
//   }
//   auto summary = stream->result();                 // result<TurnSummary, TurnError>
//
// Dropping the stream (or calling cancel()) stops the turn at the next
// iteration; what was generated until then stays in the conversation.
//
// Owns the receiving end of the turn's channel. One coroutine at a time
// awaits next(), on the executor the stream was created for.
#include "actors/scheduler_protocol.hpp"
#include "actors/turn.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/system/result.hpp>

#include <memory>
#include <optional>

namespace pensieve::actors {

using TurnResult = boost::system::result<TurnSummary, TurnError>;

// What a conversation sends to its turn's client: deltas, then one end.
struct ClientEvent {
  enum class Kind : std::uint8_t { delta, done, error } kind = Kind::done;
  TurnDelta delta;
  TurnSummary summary;
  TurnError error;
};

using ClientChannel =
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, ClientEvent)>;

class TurnStream {
 public:
  TurnStream(std::shared_ptr<ClientChannel> channel, std::shared_ptr<CancelFlag> cancel)
      : channel_(std::move(channel)), cancel_(std::move(cancel)) {}
  TurnStream(TurnStream&&) = default;
  TurnStream& operator=(TurnStream&&) = default;
  ~TurnStream() { cancel(); }

  // The next piece of text, or nullopt once the turn has ended.
  boost::asio::awaitable<std::optional<TurnDelta>> next();

  // A piece of text already queued, without suspending: nullopt when none
  // is (or the turn has ended; ended() tells which). Lets a writer take
  // every pending delta after next() and send them in one write.
  std::optional<TurnDelta> try_next();

  // Whether the turn's end has been received (result() is then final).
  bool ended() const { return ended_; }

  // After next() returned nullopt: how the turn ended.
  const TurnResult& result() const { return result_; }

  void cancel() {
    if (cancel_) cancel_->store(true, std::memory_order_relaxed);
  }

 private:
  // One received event: a delta is returned, an end is recorded.
  std::optional<TurnDelta> take(boost::system::error_code ec, ClientEvent event);

  std::shared_ptr<ClientChannel> channel_;
  std::shared_ptr<CancelFlag> cancel_;
  TurnResult result_{TurnError{TurnErrorKind::internal, "the turn has not ended"}};
  bool ended_ = false;
};

// Events a turn can produce for max_tokens generated tokens.
inline std::size_t turn_channel_capacity(std::int32_t max_tokens) {
  return std::size_t(std::max(0, max_tokens)) + 8;
}

}  // namespace pensieve::actors
