#pragma once
// Engine: the embedded API of the serving engine, what the front ends, the
// benchmarks and the tests build on. It starts the actor system for one
// model: the scheduler and the conversation actors on a control thread, the
// GPU worker on its own thread (its forward pass on the worker's compute
// stream), and keeps the conversation store.
//
//   auto engine = Engine::create(std::move(weights), options).value();
//   TurnRequest request{.tenant = "tenant", .conversation = "c1", .messages = {{"user", "Hi"}}};
//   auto stream = engine->start(executor, std::move(request)).value();
//   for (;;) { auto delta = co_await stream.next(); if (!delta) break; ... }
//   (GCC 12 miscompiles co_await in a `while (auto x = ...)` condition.)
//
// Every turn enters through start(): a turn of a stored conversation
// (created on first use), or, without a conversation id, the one turn of an
// anonymous conversation that is dropped when it ends. Both take the same
// path: a conversation actor, then the scheduler.
//
// Stateful (default): a conversation's KV cache outlives its turns, so the
// next turn computes only its new tokens. options.scheduler.keep_kv = false
// is the --no-state baseline: every turn recomputes the whole history, through the
// same code path, and gives the same tokens.
//
// Thread-safe: every method may be called from any thread. Turn streams
// deliver on the executor passed to start(), whose context must outlive
// the engine (the engine's threads complete operations on it until the
// destructor has joined them).
#include "actors/conversation.hpp"
#include "actors/cost_calibration.hpp"
#include "actors/kv_cache_options.hpp"
#include "actors/scheduler_options.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/swap_engine_protocol.hpp"
#include "actors/turn.hpp"
#include "actors/turn_stream.hpp"
#include "gpu/backend/paged_forward.hpp"
#include "gpu/kv/paged_kv_view.hpp"
#include "gpu/model/model_weights.hpp"
#include "runtime/error.hpp"
#include "runtime/trace.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pensieve::actors {

inline constexpr std::int64_t kAutoKvHostMb = -1;

// The host tier's default budget: min(4096 MiB, a quarter of physical
// memory). The host tier is what lets conversations' KV outlive the device's
// room (a swap-in costs far less than recomputing); its memory is reserved,
// not touched, until chunks land in it, and the cap leaves a small machine
// room for the weights, the device tier and the OS.
std::int64_t default_kv_host_mb();

struct EngineOptions {
  std::size_t n_threads = 0;   // forward-pass threads; 0: every core
  // The forward-pass threads' nice value (0..19, or rt::kIdleClass for
  // SCHED_IDLE; --compute-nice): on busy cores, token delivery (HTTP I/O,
  // the scheduler) then preempts compute. 0: unchanged.
  int compute_nice = 0;
  // --chat-template: a built-in's name or a Jinja file; empty: the model's own.
  std::string chat_template;
  // The scheduler's and the KV cache's own options, handed to them whole
  // (keep_kv = false: --no-state; max_batch_tokens also sizes the forward
  // pass's buffers).
  SchedulerOptions scheduler;
  KvCacheOptions kv_cache;
  // The eviction policy's recompute costs (--cost-model): kv_cache.cost_model
  // as given, or that of cost_model_profile when set; or measured at
  // start-up (the server's default; tests keep the fixed defaults so that
  // eviction orders do not depend on the machine's speed).
  CostModelSource cost_model_source = CostModelSource::given;
  std::string cost_model_profile;
  CostCalibrationOptions cost_calibration;
  // Stored conversations one tenant may have (--max-conversations-per-tenant);
  // creating one more is refused (rate_limited). 0: no limit.
  std::int32_t max_conversations_per_tenant = 0;
  // Bounded memory: stored conversations in memory at once
  // (--max-conversations) and the idle time after which one leaves memory
  // (--conversation-idle-s). One past either, least recently used first,
  // leaves: its KV is freed; with history_dir its actor and history are
  // unloaded (the journal has every acknowledged turn) and come back on its
  // next turn or snapshot; without, it is deleted (later requests for it:
  // not_found). One with a turn queued or running stays. 0: no limit.
  std::int32_t max_conversations = 0;
  std::int32_t conversation_idle_s = 0;
  // The clock idle times are measured on (tests: then only
  // Engine::expire_conversations() applies the idle limit); empty: steady_clock.
  std::function<std::int64_t()> now_ns;
  // A stored conversation that outgrows the context (--context-overflow).
  ContextOverflow context_overflow = ContextOverflow::truncate;
  // The scheduler's inbox (admissions, deletes, stats, transfer reports);
  // a full one makes senders wait. Small only in tests of that back-pressure.
  std::int32_t scheduler_mailbox_messages = 1024;
  std::int32_t kv_block_tokens = 32;
  std::int64_t kv_cache_mb = 512;       // the device tier, per tensor-parallel rank
  // Compute backend (--backend) and tensor-parallel ranks (--tp; the model's
  // heads, KV heads and ff_dim must split tp ways; CPU backend only for now).
  backend::BackendKind backend = backend::BackendKind::cpu;
  std::int32_t tp = 1;
  // The KV cache's dtype (--kv-dtype): F16 by default, as llama.cpp's;
  // f32 keeps the paged pass bit-exact with the contiguous F32 pass; q8_0
  // (an F16 scale per 64 values) holds 1.94x the tokens of F16 in the same
  // memory.
  kv::KvDType kv_dtype = kv::KvDType::f16;
  // KV tiers (the swap engine). kv_host_mb: the host tier's budget; 0:
  // device only (an idle conversation's KV is dropped whole when room is
  // needed); kAutoKvHostMb (the default): default_kv_host_mb() where the
  // backend has a host pool (the CPU backend on one rank), else none.
  std::int64_t kv_host_mb = kAutoKvHostMb;
  std::string kv_disk_dir;       // the disk tier's folder, with kv_disk_gb > 0
  std::int64_t kv_disk_gb = 0;
  // At a clean exit (the destructor, or flush_kv_to_disk()), the idle
  // conversations' KV that lives only on the device or the host is written
  // to the disk tier for up to this long, so that the next engine on the
  // folder reads it back (--kv-flush-on-exit-s; the server's default is 5).
  // 0: off.
  std::int32_t kv_flush_on_exit_s = 0;
  // Exact sizes instead of the budgets above when > 0 (tests, benchmarks):
  // device and host chunks, disk bytes.
  std::int32_t kv_device_blocks = 0;
  std::int32_t kv_host_blocks = 0;
  std::int64_t kv_disk_bytes = 0;
  bool gather_copies = true;         // merge copies of adjacent chunks
  bool swap_gather_kernel = true;    // small scattered swap runs through the backend's gather kernel
  // The decode attention plan's thresholds (--decode-plan: measured on the
  // device by tests/gpu/device-checks.sh); the CUDA backend's plans use them.
  kernels::DecodePlanThresholds decode_thresholds;
  // Durable conversation history (invariant 4): a journal in this folder
  // that every acknowledged turn is fsynced to, replayed by the next Engine
  // on the same folder (conversations come back; their KV is recomputed).
  // Empty: off.
  std::string history_dir;
  // The journal records the model it was written for (architecture, tensor
  // table, tokenizer, chat template); another model's journal fails create()
  // naming both, unless this is set: then it is moved aside and the engine
  // starts without its conversations (history_note() says so).
  bool history_reset_on_model_change = false;
  rt::Tracer* tracer = nullptr;
  // After every scheduler iteration, on the scheduler's thread.
  std::function<void(const IterationRecord&)> on_iteration;
};

struct ConversationInfo {
  std::string id;
  std::string tenant;
  std::int64_t created_unix_s = 0;
};

// The conversation store's counts (the /metrics gauges and counters).
struct ConversationCounts {
  std::int64_t live = 0;       // stored and in memory (an actor and its history)
  std::int64_t journaled = 0;  // stored and unloaded: its history only in the journal
  std::int64_t unloaded_total = 0;  // times one left memory for the journal
  std::int64_t reloaded_total = 0;  // times one came back from it
  std::int64_t expired_total = 0;   // deleted by the limits (no journal)
};

// What the history journal holds in memory: the histories of the stored
// conversations that are in memory (an unloaded one's is in its file only).
struct JournalMemory {
  std::int64_t held_tokens = 0;
  std::int64_t held_messages = 0;
  std::int64_t released = 0;  // conversations whose history is in the file only
};

template <class T>
using EngineResult = boost::system::result<T, TurnError>;

struct KvPlacement {
  std::int32_t block_tokens = 0;
  std::int32_t device = 0, host = 0, disk = 0, dropped = 0;  // chunks
  std::int32_t moving = 0;                                   // with a transfer in flight
};

// Called with each delta of a turn; returning false cancels the turn.
using TurnSink = std::function<boost::asio::awaitable<bool>(const TurnDelta&)>;

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(model::ModelWeights weights, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& model_name() const;
  // The chat template in use ("the model's", a file, a built-in's name) and
  // why, when the model's own could not be used.
  std::string chat_template_description() const;
  std::int32_t max_context() const;
  // What restoring the history journal set aside (another model's journal,
  // with history_reset_on_model_change), for the start-up log; empty: nothing.
  const std::string& history_note() const;
  // A token's text for logprobs reports (may be part of a UTF-8 character).
  std::string token_text(std::int32_t token) const;
  const EngineOptions& options() const;
  // The eviction policy's recompute costs in use and where they came from.
  const CostModelReport& cost_model() const;
  // What the disk KV tier's start-up scan found of a previous run and what
  // became of it, for the start-up log; empty without a disk tier.
  const std::string& kv_disk_note() const;
  // Writes the idle conversations' KV that is only on the device or the
  // host to the disk tier, for up to options().kv_flush_on_exit_s (a
  // no-op without a disk tier or with 0), once: the destructor then skips
  // it. Blocks; never call it from a thread of the engine's.
  KvFlushReport flush_kv_to_disk();

  // Conversations, namespaced per tenant. `id`: the client's choice (1-128
  // characters of [A-Za-z0-9._:-]); absent: a fresh random one.
  EngineResult<ConversationInfo> create_conversation(const std::string& tenant,
                                                     std::optional<std::string> id = {});
  std::optional<ConversationInfo> find_conversation(const std::string& tenant, const std::string& id) const;
  // Where a stored conversation's cached KV lives: chunks per tier (a
  // chunk restoring from disk counts as disk) and the tokens they cover.
  boost::asio::awaitable<EngineResult<KvPlacement>> kv_placement(const std::string& tenant, const std::string& id);
  std::vector<ConversationInfo> list_conversations(const std::string& tenant) const;
  boost::asio::awaitable<EngineResult<ConversationSnapshot>> snapshot(const std::string& tenant,
                                                                      const std::string& id);
  // Frees the conversation's KV; a turn in flight finishes, queued ones fail.
  bool delete_conversation(const std::string& tenant, const std::string& id);
  ConversationCounts conversation_counts() const;
  // The journal's memory (zero without history_dir), after every unload
  // and reload asked for before this call.
  boost::asio::awaitable<JournalMemory> journal_memory();
  // The engine's coroutines alive now (actors, a conversation actor each,
  // pending tells): what a leak check compares with its starting count.
  std::size_t running_tasks() const;
  // Applies max_conversations and conversation_idle_s now (the engine also
  // does every second, and applies the count at each creation and reload);
  // returns how many left memory.
  std::int32_t expire_conversations();
  // Frees the KV that stateless requests left cached (every idle unnamed
  // path; turns in flight keep theirs). Takes effect in the scheduler's
  // order: a stats() asked afterwards sees it.
  void clear_prefix_cache();
  // Drops the prefix pins (cache_control, /admin/prefix-cache/pin) of
  // `tenant`'s namespace with `cache_salt`, or every pin when `tenant` is
  // absent, before their time: their KV stays cached and may be evicted
  // again. Returns the pinned blocks that were freed.
  // (By value: the coroutine outlives its caller's arguments.)
  boost::asio::awaitable<std::int64_t> unpin_prefixes(std::optional<std::string> tenant,
                                                      std::optional<std::string> cache_salt);

  // Starts a turn (see TurnRequest). Refusals known at once come back
  // here (a bad conversation id, a missing one that may not be created, a
  // full conversation mailbox); every later outcome is an event of the
  // stream.
  EngineResult<TurnStream> start(const boost::asio::any_io_executor& executor, TurnRequest request);

  boost::asio::awaitable<SchedulerStats> stats();
  // The swap engine's counters (all zero without a host tier).
  boost::asio::awaitable<SwapStats> swap_stats();

  struct Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Drains a stream into a sink; cancels the turn when the sink says stop
// (for the benchmark and tests; the front ends drain through net/turn_call).
boost::asio::awaitable<TurnResult> drain_turn(TurnStream stream, TurnSink sink);

}  // namespace pensieve::actors
