#pragma once
// Messages to the scheduler actor, and the per-turn event channel through
// which it streams a turn's progress back to the turn's conversation.
#include "actors/scheduler_core.hpp"
#include "runtime/reply.hpp"

#include <boost/asio/experimental/concurrent_channel.hpp>

#include <atomic>
#include <memory>
#include <variant>

namespace pensieve::actors {

// Sized by its creator to hold every event of the turn (max_tokens + a few),
// so the scheduler never waits for a slow consumer.
using TurnEventChannel =
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, TurnEvent)>;

// Set by whoever wants the turn to stop (the client left, a stop string
// matched); the scheduler checks it before every iteration.
using CancelFlag = std::atomic<bool>;

struct AdmitTurn {
  TurnSpec spec;
  std::shared_ptr<TurnEventChannel> events;
  std::shared_ptr<CancelFlag> cancel;
  rt::Reply<AdmitStatus> reply;
};

struct DropConversation {
  ConversationId conversation;
};

struct GetSchedulerStats {
  rt::Reply<SchedulerStats> reply;
};

// From the swap engine: tier moves of earlier iterations that have finished.
struct TransfersFinished {
  TransfersDone done;
};

using SchedulerMsg = std::variant<AdmitTurn, DropConversation, GetSchedulerStats, TransfersFinished>;

}  // namespace pensieve::actors
