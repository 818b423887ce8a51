#pragma once
// Engine::Impl, what engine.cpp (start-up, turns, the scheduler's questions)
// and engine_store.cpp (the conversation store: creation, limits, the
// journal's restore, lookups) share; included by those two files only.
#include "actors/conversation.hpp"
#include "actors/conversation_lru.hpp"
#include "actors/engine.hpp"
#include "actors/gpu_worker.hpp"
#include "actors/history_journal.hpp"
#include "actors/reply_memo.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/swap_engine.hpp"
#include "runtime/executor.hpp"
#include "runtime/io_ring.hpp"
#include "runtime/task_group.hpp"

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>

namespace pensieve::actors {

namespace engine_detail {

// Conversations deleted by the limits whose ids answer "expired" (about
// 100 bytes each).
inline constexpr std::size_t kExpiredIds = 4096;

// The memory of the replies whose generated ids a stateless client's
// resent history maps back to (ReplyMemo): 64 MiB of ids and text, some
// 30,000 replies of 256 tokens, the oldest leaving first. Bounded by bytes,
// not tied to the life of the replies' KV blocks: see reply_memo.hpp.
inline constexpr std::size_t kReplyMemoBytes = std::size_t(64) << 20;

// A stateless request's cache namespace: its tenant and salt, joined so
// that no two pairs give the same name.
std::string cache_namespace(const std::string& tenant, const std::optional<std::string>& salt);
bool valid_conversation_id(const std::string& id);
std::string store_key(const std::string& tenant, const std::string& id);
TurnError not_found(const std::string& id);
// Without a journal a conversation past the limits is deleted: its 404 says why it is gone.
TurnError expired(const std::string& id, const EngineOptions& o);
std::int64_t unix_now_s();

}  // namespace engine_detail

struct Engine::Impl {
  struct Entry {
    ConversationInfo info;
    ConversationId cid;
    rt::ActorRef<ConversationMsg> actor;  // null: unloaded to the journal
    std::uint64_t journal_uid = 0;  // 0: not journaled
    std::shared_ptr<ConversationActivity> activity;
  };

  // The threads' io_contexts go last: every channel and actor below belongs
  // to one of them (shutdown() has joined the threads by then).
  rt::LoopThread control{"pv-control"};
  rt::LoopThread worker_thread{"pv-worker"};
  model::Tokenizer tokenizer;
  model::ChatTemplate chat;
  std::string chat_note;  // why the model's own template is not the one in use
  std::string history_note;  // what the journal's restore set aside, for the start-up log
  std::string kv_disk_note;  // what the disk tier's start-up scan found, for the start-up log
  bool disk_tier = false;    // a disk KV tier is configured
  std::atomic<bool> kv_flushed{false};  // flush_kv_to_disk() ran (the destructor skips it)
  std::string name;
  EngineOptions options;
  CostModelReport cost_model;
  std::int32_t max_context = 0;
  std::atomic<std::uint64_t> next_turn{0};
  std::atomic<std::uint64_t> next_conversation{0};
  TurnServices services;
  // Where the streams' cancels go; reset first on shutdown.
  std::shared_ptr<const TurnCanceller> canceller;
  // Durable history (options.history_dir); null: off. Its I/O runs on the
  // control thread, through its own ring.
  std::shared_ptr<rt::IoRing> journal_ring;
  std::shared_ptr<HistoryJournal> journal;
  // Stateless replies' generated ids; used on the control thread.
  ReplyMemo replies{engine_detail::kReplyMemoBytes};

  rt::TaskGroup group;
  rt::ActorRef<GpuWorkerMsg> worker;
  rt::ActorRef<SwapEngineMsg> swap;  // null without a host tier
  std::optional<Scheduler> scheduler;

  mutable std::mutex store_mutex;  // guards the members down to `stopping`
  std::map<std::string, Entry> store;
  std::map<std::string, std::int32_t> per_tenant;  // stored conversations by tenant (those with one)
  std::mt19937_64 rng{std::random_device{}()};
  ConversationLru loaded;  // the stored conversations in memory
  ExpiredIds expired_ids{engine_detail::kExpiredIds};
  ConversationCounts counts;
  bool stopping = false;  // shutdown began: nothing leaves memory any more

  Impl(model::Tokenizer t, model::ChatTemplate c, std::string n, EngineOptions o)
      : tokenizer(std::move(t)), chat(std::move(c)), name(std::move(n)), options(std::move(o)) {}

  ConversationId new_id() { return ConversationId{next_conversation.fetch_add(1) + 1}; }
  rt::ActorRef<ConversationMsg> spawn_conversation(ConversationState state) {
    // A named conversation shares cached prefixes with its tenant's
    // requests and conversations of the same cache_salt (one system prompt,
    // computed once); each turn names its salt (StartTurn::share_namespace),
    // unsalted until one does.
    if (state.keep_kv) state.share_namespace = engine_detail::cache_namespace(state.tenant, std::nullopt);
    return rt::spawn_actor<ConversationMsg>(
        group, control.executor(), ConversationActor(services, std::move(state)),
        {.name = "conversation", .mailbox_capacity = 16, .tracer = options.tracer});
  }
  std::int64_t now_ns() const {
    if (options.now_ns) return options.now_ns();
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  ConversationLimits limits(bool idle) const {
    return {options.max_conversations, idle ? std::int64_t(options.conversation_idle_s) * 1'000'000'000 : 0};
  }
  // Under store_mutex.
  EngineResult<Entry*> create_locked(const std::string& tenant, std::optional<std::string> id);
  // The entry's actor, loaded back from the journal if it had left memory;
  // the entry becomes the most recently used.
  rt::ActorRef<ConversationMsg> use_locked(const std::string& key, Entry& e);
  // Unloads (or, without a journal, deletes) what the limits say must leave.
  std::int32_t expire_locked(bool idle, const std::string* keep);
  void leave_memory_locked(std::map<std::string, Entry>::iterator it);
  void drop_kv(ConversationId cid);
  boost::asio::awaitable<void> expire_every_second();
  void restore_history();
  boost::asio::awaitable<KvFlushReport> flush_kv();
  void shutdown();
};

}  // namespace pensieve::actors
