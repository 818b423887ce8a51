#pragma once
// TurnStream: a turn's events as an awaitable generator, for whoever started
// the turn (the front ends' adapter, the benchmark, tests):
//
//   auto stream = engine.start(executor, std::move(request));  // EngineResult<TurnStream>
//   for (;;) {
//     auto delta = co_await stream->next();  // never in a while condition: GCC 12
//     if (!delta) break;
//     use(*delta);
//   }
//   auto done = stream->result();             // result<TurnDone, TurnError>
//
// next() gives the deltas only; next_event() gives every TurnEvent
// (TurnStarted, deltas, then TurnDone or TurnFailed).
//
// cancel() sends CancelTurn to the scheduler: the turn stops at its next
// iteration and ends with TurnDone (cancelled); what was generated until
// then stays in the conversation. Dropping the stream cancels the turn and
// closes its channel, which the conversation takes as "the client left".
//
// Owns the receiving end of the turn's channel. One coroutine at a time uses
// the stream, on the executor it was created for.
#include "actors/scheduler_protocol.hpp"
#include "actors/turn.hpp"
#include "runtime/actor.hpp"
#include "runtime/task_group.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <memory>
#include <optional>

namespace pensieve::actors {

using TurnResult = boost::system::result<TurnDone, TurnError>;

// Where the streams' cancels go: the engine's scheduler, while the engine
// lives (streams hold it weakly, so a stream may outlive the engine). A
// cancel that meets a full inbox waits for room in a task of the engine's
// group: it must not be lost. Thread-safe.
class TurnCanceller {
 public:
  TurnCanceller(rt::ActorRef<SchedulerMsg> scheduler, rt::TaskGroup& group,
                boost::asio::any_io_executor executor)
      : scheduler_(std::move(scheduler)), group_(&group), executor_(std::move(executor)) {}
  void cancel(TurnId turn) const;

 private:
  rt::ActorRef<SchedulerMsg> scheduler_;
  rt::TaskGroup* group_;
  boost::asio::any_io_executor executor_;
};

class TurnStream {
 public:
  TurnStream(std::shared_ptr<TurnEventChannel> channel,
             std::weak_ptr<const TurnCanceller> canceller, TurnId turn)
      : channel_(std::move(channel)), canceller_(std::move(canceller)), turn_(turn) {}
  TurnStream(TurnStream&&) = default;
  TurnStream& operator=(TurnStream&&) = default;
  ~TurnStream();

  // The next event; once the turn has ended, its end again.
  boost::asio::awaitable<TurnEvent> next_event();

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

  // The scheduler's TurnStarted, once it has come.
  const std::optional<TurnStarted>& started() const { return started_; }

  TurnId turn() const { return turn_; }

  // Callable from any thread (it reads nothing the reader changes), as long
  // as the stream is not moved or destroyed meanwhile.
  void cancel() const;

 private:
  // Records what the stream keeps of `event` (its start, its end).
  void note(const TurnEvent& event);

  std::shared_ptr<TurnEventChannel> channel_;
  std::weak_ptr<const TurnCanceller> canceller_;
  TurnId turn_;
  TurnResult result_{TurnError{TurnErrorKind::internal, "the turn has not ended"}};
  std::optional<TurnStarted> started_;
  bool ended_ = false;
};

}  // namespace pensieve::actors
