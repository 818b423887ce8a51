#pragma once
// SchedulerActor: iteration-level scheduling over the actor system. Its
// mailbox takes turns (admission control answers at once: admitted,
// overloaded, too large), conversation drops and stats queries; an
// iteration loop on the same executor runs SchedulerCore's plans on the GPU
// worker one after another and routes each turn's events (started, tokens,
// finished) to the channel its conversation gave.
//
// Tiers: each plan's transfers go to the swap engine first; its per-layer
// swap-in events travel with the batch to the GPU worker, and what finishes
// later comes back as TransfersFinished messages into the core.
//
// Owns the SchedulerCore and the routes; everything runs on the executor it
// was spawned on (one thread), so handler and loop never race.
#include "actors/disk_chunk_paths.hpp"
#include "actors/gpu_worker_protocol.hpp"
#include "actors/scheduler_protocol.hpp"
#include "actors/swap_engine_protocol.hpp"
#include "runtime/actor.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <functional>
#include <memory>

namespace pensieve::actors {

// One iteration as it ran (for stats and tests).
struct IterationRecord {
  std::uint64_t index = 0;
  std::int32_t sequences = 0;
  std::int32_t decode_tokens = 0;
  std::int32_t prefill_tokens = 0;
  std::int32_t free_blocks = 0;
  double compute_ms = 0.0;
};

struct SchedulerConfig {
  SchedulerOptions options;
  KvCacheSizes kv_sizes;
  KvCacheOptions kv_cache;
  rt::Tracer* tracer = nullptr;
  // Executes each plan's tier moves; its reports come back as
  // TransfersFinished. Null: no tiers (plans must carry no transfers).
  rt::ActorRef<SwapEngineMsg> swap;
  // Called after every iteration on the scheduler's thread (stats, tests).
  std::function<void(const IterationRecord&)> on_iteration;
  // The inbox's capacity: turns, drops, stats queries and transfer reports
  // beyond it wait for room (senders that cannot wait must not lose them).
  std::size_t mailbox_messages = 1024;
  // What a previous run left on the disk tier (actors/disk_chunk_paths.hpp).
  RestoredKv restored_kv;
};

class Scheduler {
 public:
  Scheduler(rt::TaskGroup& group, const boost::asio::any_io_executor& executor, SchedulerConfig config,
            rt::ActorRef<GpuWorkerMsg> worker);

  const rt::ActorRef<SchedulerMsg>& ref() const { return ref_; }

  // Ends the loop after the iteration in flight, fails the turns still
  // queued or running ("the server is stopping") and stops the actor.
  boost::asio::awaitable<void> stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
  rt::ActorRef<SchedulerMsg> ref_;
};

}  // namespace pensieve::actors
