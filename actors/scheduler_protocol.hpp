#pragma once
// Messages to the scheduler actor, and the per-turn event channel through
// which it streams a turn's events (TurnEvent) back to the turn's
// conversation.
#include "actors/scheduler_core.hpp"
#include "runtime/reply.hpp"

#include <boost/asio/experimental/concurrent_channel.hpp>

#include <algorithm>
#include <memory>
#include <variant>

namespace pensieve::actors {

// Sized by its creator to hold every event of the turn (max_tokens + a few),
// so the scheduler never waits for a slow consumer.
using TurnEventChannel =
    boost::asio::experimental::concurrent_channel<void(boost::system::error_code, TurnEvent)>;

// Events a turn can produce for max_tokens generated tokens.
inline std::size_t turn_channel_capacity(std::int32_t max_tokens) {
  return std::size_t(std::max(0, max_tokens)) + 8;
}

struct AdmitTurn {
  TurnSpec spec;
  std::shared_ptr<TurnEventChannel> events;
  rt::Reply<AdmitStatus> reply;
};

// Stops a turn at the next iteration (the client left or cancelled, a stop
// string matched); it ends with TurnDone, cancelled. A cancel that arrives
// before its turn's admission is kept for it.
struct CancelTurn {
  TurnId turn;
};

struct DropConversation {
  ConversationId conversation;
};

// Clears the stateless cache: every idle unnamed path goes.
struct ClearUnnamedPaths {};

// Drops the prefix pins of cache namespace `ns` (every pin when absent);
// answers the blocks they held.
struct UnpinPrefixes {
  std::optional<std::string> ns;
  rt::Reply<std::int64_t> reply;
};

struct GetSchedulerStats {
  rt::Reply<SchedulerStats> reply;
};

// Where a conversation's cached KV lives, chunk by chunk (empty: nothing cached).
struct GetConversationChunks {
  ConversationId conversation;
  rt::Reply<std::vector<ChunkView>> reply;
};

// What a flush of the idle KV to disk did (FlushKvToDisk).
struct KvFlushReport {
  std::int64_t chunks_written = 0;  // spills it started (every one reported, unless timed_out)
  std::int64_t chunks_left = 0;     // idle chunks it could not give a disk copy (disk full, a dropped front)
  std::int64_t waiting = 0;         // chunks still on their way when the time ran out
  bool timed_out = false;
  double seconds = 0.0;
};

// At a clean exit: flushes the idle conversations' KV to the disk tier
// (KvCacheManager::flush_to_disk), answering once every chunk that can
// have a disk copy has one, or at `deadline_ns` (steady clock).
struct FlushKvToDisk {
  std::int64_t deadline_ns = 0;
  rt::Reply<KvFlushReport> reply;
};

// From the swap engine: tier moves of earlier iterations that have finished.
struct TransfersFinished {
  TransfersDone done;
};

using SchedulerMsg =
    std::variant<AdmitTurn, CancelTurn, DropConversation, ClearUnnamedPaths, UnpinPrefixes, GetSchedulerStats,
                 GetConversationChunks, TransfersFinished, FlushKvToDisk>;

}  // namespace pensieve::actors
