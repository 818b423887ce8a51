#pragma once
// SchedulerCore: the scheduler's decisions, without threads or messages, so
// they can be tested step by step. Iteration-level, stall-free scheduling:
// each iteration carries one decode token of every running sequence first,
// then prefill chunks first come first served (max_prefill_tokens at most),
// under a token budget, a cap on running sequences and the free KV blocks.
//
// KV: the core owns the KV cache manager (KvCacheManager: the device, host
// and disk pools, the moves in flight and the cached histories; the GPU
// worker and the swap engine own the memory) and every sequence's block
// table. It asks the manager for blocks; out of room is a plain answer it
// acts on: evict cached KV, wait for moves under way, or preempt. Between turns a conversation's
// KV stays cached with the tokens it covers; the next turn reuses its
// longest common prefix with the new token history, so a client that edited
// its history is never answered from stale KV. With a host tier the cache is
// chunk-granular and tiered: chunks move device -> host -> disk -> dropped
// (IterationPlan::transfers, executed by the swap engine, reported back via
// transfers_done()); a returning turn gets its chunks swapped in, restored,
// or recomputed from its token history. Without one, an idle conversation's
// KV is dropped whole, lowest retention value first. When that is not
// enough, the latest-arrived running sequence is preempted: with a host
// tier its KV is cached like a finished turn's (and copied out to the host),
// without one it is recomputed later from its tokens.
//
// Owned by the scheduler actor; used on its thread only.
#include "actors/eviction_policy.hpp"
#include "actors/ids.hpp"
#include "actors/kv_cache_manager.hpp"
#include "actors/kv_cache_options.hpp"
#include "actors/kv_transfers.hpp"
#include "actors/scheduler_options.hpp"
#include "actors/turn.hpp"
#include "gpu/kv/block_allocator.hpp"
#include "gpu/kv/block_table.hpp"
#include "gpu/model/sampler.hpp"

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace pensieve::actors {

// A turn as the scheduler sees it: the conversation's whole token history,
// the new prompt last. The core computes only what its KV does not cover.
struct TurnSpec {
  TurnId turn;
  ConversationId conversation;
  std::vector<std::int32_t> tokens;
  model::SamplingParams sampling;
  bool keep_kv = true;  // this turn's KV outlives it, as its conversation's
  // A stateless request's turn: it continues the longest matching unnamed
  // path of this cache namespace (tenant and cache_salt), and its KV stays
  // cached as an unnamed path when it ends. Nullopt: none of that.
  std::optional<std::string> cache_namespace;
  // A conversation's turn: with no KV of its own cached, it shares the
  // device blocks of the path of this namespace (a stateless one or another
  // conversation's) with the longest common prefix (a system prompt), and
  // its own KV is found by later turns' lookups. Nullopt: none of that.
  std::optional<std::string> share_namespace;
  // > 0: the KV the turn leaves cached (with a namespace) is pinned this
  // long after it ends: no eviction takes its full blocks before then.
  std::int64_t pin_ttl_ns = 0;
};

// pin_refused: the turn's pin (pin_ttl_ns) would take the pinned blocks
// past the KV cache's cap (KvCacheOptions::pin_cap_share).
enum class AdmitStatus : std::uint8_t { admitted, overloaded, too_large, pin_refused };

// One sequence's share of an iteration.
struct PlannedSequence {
  TurnId turn;
  std::vector<std::int32_t> tokens;  // to feed, at positions [start_pos, start_pos + n)
  std::int32_t start_pos = 0;
  std::vector<kv::BlockId> blocks;
  bool sample = false;  // the chunk ends at the newest token: draw the next one
  // Set the first time a turn is planned: what its sampler starts from.
  std::optional<model::SamplingParams> new_sampler;
  std::vector<std::int32_t> sampler_context;  // with new_sampler: the tokens so far
};

// Contract with the swap engine (see kv_transfers.hpp): every plan's
// `transfers` are executed, also when the plan has no sequences. swap_in
// lands before the plan's forward pass reads it (layer by layer) and before
// the next plan() call; swap_out, spill and restore are reported through
// SchedulerCore::transfers_done() (each exactly once, in any later call).

struct IterationPlan {
  std::uint64_t index = 0;
  std::vector<PlannedSequence> sequences;
  std::vector<kv::CopyOnWrite> copies;      // run before the forward pass
  std::vector<kv::BlockId> freed_blocks;    // to poison (debug) before the pass
  std::vector<TurnId> released_samplers;    // turns that ended
  KvTransfers transfers;                    // tier moves (swap engine); swap_in before the pass
  std::int32_t decode_tokens = 0;
  std::int32_t prefill_tokens = 0;
  bool empty() const { return sequences.empty(); }  // nothing to run (transfers may still be there)
};

// What the worker sampled for a planned sequence with sample == true.
struct SampleResult {
  TurnId turn;
  model::SampledToken token;
  model::FinishReason finish = model::FinishReason::none;  // the sampler's verdict
};

// What happened to a turn, for its conversation: TurnStarted (prompt and
// reused tokens), TurnDelta (one sampled token, no text yet), TurnDone (why
// it ended; finish none: cancelled; a stop token rides on it), TurnFailed.
struct TurnUpdate {
  TurnId turn;
  TurnEvent event;
};

struct SchedulerStats {
  std::uint64_t iterations = 0;
  std::uint64_t preemptions = 0;
  std::uint64_t evicted_conversations = 0;
  std::uint64_t refused_overloaded = 0;
  // Pins refused at admission (pin_refused), and those a turn asked for
  // that other pins had taken the room of by the time it ended.
  std::uint64_t refused_pins = 0;
  std::int64_t pinned_blocks = 0;   // pinned prefix blocks now (cached or not yet)
  std::int64_t pin_cap_blocks = 0;  // the most pins may hold
  std::int64_t prefill_tokens = 0;
  std::int64_t decode_tokens = 0;
  std::int64_t reused_tokens = 0;  // prompt tokens served from cached KV
  std::int32_t waiting = 0;
  std::int32_t running = 0;
  std::int32_t cached_conversations = 0;
  std::int32_t free_blocks = 0;
  std::int32_t num_blocks = 0;
  TierStats tiers;  // per-tier hits, recompute, moves, evictions, free slots
  CostModel cost_model;  // the recompute costs the eviction policy weighs now
  // The scheduler actor's loop: times it woke to plan (idle, it waits for a
  // message and does not wake on its own).
  std::uint64_t loop_passes = 0;
};

class SchedulerCore {
 public:
  // The KV cache (its sizes and options) is the core's: the scheduler asks
  // it for blocks and acts on its answers.
  SchedulerCore(SchedulerOptions options, KvCacheSizes kv_sizes, KvCacheOptions kv_options = {});
  // At start-up, before any turn: a previous run's disk chunks become
  // restored paths (KvCacheManager::restore_disk_paths).
  void restore_disk_paths(const RestoredKv& found) { kv_.restore_disk_paths(found); }
  // A clean exit: from the next plan on, each plan's tier moves flush the
  // idle KV to disk (KvCacheManager::flush_to_disk) instead of the
  // ahead-of-time moves; kv_flush() is the last plan's step.
  void start_kv_flush() { kv_flush_.emplace(); }
  const std::optional<KvFlushStep>& kv_flush() const { return kv_flush_; }

  // Queues a turn (FCFS). Refuses it when max_admitted turns are in the
  // system, or when it could never fit the KV pool alone.
  AdmitStatus admit(TurnSpec spec, std::int64_t now_ns);

  // The turn stops at the next iteration (its KV stays consistent with the
  // tokens it has fed). Unknown or finished turns are ignored.
  void cancel(TurnId turn);

  // Forgets a conversation's cached KV, now and when its running turn ends
  // (a deleted conversation).
  void drop_conversation(ConversationId conversation);
  // Every idle unnamed path (stateless turns' cached KV) goes.
  void clear_unnamed_paths() { kv_.forget_unnamed(freed_since_plan_); }
  // Drops the pins of cache namespace `ns` (every pin when absent): their
  // blocks may be evicted again. Returns how many blocks they held.
  std::int64_t unpin(std::optional<std::string_view> ns) { return kv_.unpin(ns); }

  // Ends cancelled turns (their events go to `events`), then picks the next
  // batch. An empty plan means there is nothing to run.
  IterationPlan plan(std::int64_t now_ns, std::vector<TurnUpdate>& events);
  // An empty plan does not reach the worker: the samplers it releases go
  // with the next plan instead (else each is kept there for good).
  void carry_over(IterationPlan& empty_plan);

  // Applies the worker's samples for `plan` and emits the turns' events.
  void complete(const IterationPlan& plan, std::span<const SampleResult> samples,
                std::int64_t now_ns, std::vector<TurnUpdate>& events);

  // The worker failed the batch: every turn in it fails, its KV is dropped.
  void fail(const IterationPlan& plan, const std::string& error, std::vector<TurnUpdate>& events);

  // The swap engine finished (or failed) moves of earlier plans. Blocks and
  // slots they held become reusable; a waiting turn whose restores are all
  // reported can run at the next plan().
  void transfers_done(const TransfersDone& done);

  // Recalibrates the eviction policy's recompute costs (CostModel::fit of
  // measured prefills); takes effect at the next decision.
  void set_cost_model(const CostModel& cost);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  SchedulerStats stats() const;
  const kv::BlockAllocator& allocator() const { return kv_.device_allocator(); }
  // Tokens of a conversation's cached KV, and where its chunks are (tests).
  std::optional<std::vector<std::int32_t>> cached_tokens(ConversationId conversation) const;
  std::vector<ChunkView> cached_chunks(ConversationId conversation) const { return kv_.chunks(conversation); }

 private:
  struct Sequence {
    TurnSpec spec;
    std::uint64_t arrival = 0;
    std::int64_t computed = 0;  // tokens [0, computed) have KV in `table`
    kv::BlockTable table;
    std::int32_t generated = 0;
    std::int32_t reused = 0;
    bool started = false;       // the `started` event went out
    bool sampler_ready = false;
    bool cancelled = false;
    bool attached = false;  // its conversation's cached KV was looked up
    bool looked_up = false;  // the prefix index was looked up (once per turn)
    // The path whose leading blocks it shares when admitted (it diverges
    // from the path inside it).
    std::optional<PrefixMatch> share_from;
    // Dropped ranges of [0, computed): fed again, in order, before the rest.
    std::vector<std::pair<std::int64_t, std::int64_t>> holes;
    std::vector<DeviceHostCopy> swap_in;  // goes out with its first planned chunk
    // The plan (stats_.iterations) that preempted it: it is not admitted again
    // in that plan, or it would take back the blocks its preemption frees.
    std::uint64_t preempted_in = ~std::uint64_t{0};
    std::size_t prompt_size = 0;  // spec.tokens' size when admitted (sampled ones join it)
    // Tokens whose KV earlier iterations wrote (set as each plan starts):
    // what a new turn may share of it while it runs.
    std::int64_t written = 0;
  };
  // Whether pinning seq's prompt keeps pins within their cap.
  bool pin_fits(const Sequence& seq, std::int64_t now_ns);
  enum class KvReady : std::uint8_t { ready, later, no_room };

  void prefetch_waiting_kv(std::int64_t now_ns, IterationPlan& plan);
  void admit_waiting(std::int64_t& budget, std::int64_t now_ns, IterationPlan& plan,
                     std::vector<TurnUpdate>& events);
  void adopt_unnamed_path(Sequence& seq);
  void share_unnamed_prefix(Sequence& seq, std::int64_t now_ns);
  // A new turn with nothing cached to attach shares the written full blocks
  // of the running turn of its namespace whose tokens it continues furthest
  // (many clients sending one uncached system prompt at once compute it once).
  void share_running_prefix(Sequence& seq);
  static const std::optional<std::string>& sharing_namespace(const TurnSpec& spec) {
    return spec.cache_namespace ? spec.cache_namespace : spec.share_namespace;
  }
  bool keeps_kv(const Sequence& seq) const {
    return options_.keep_kv && (seq.spec.keep_kv || seq.spec.cache_namespace.has_value());
  }
  KvReady attach_kv(Sequence& seq, std::int64_t budget, std::int64_t now_ns, IterationPlan& plan);
  bool within_decode_reserve(const Sequence& seq, std::int32_t need, std::int64_t budget) const;
  bool reserve(Sequence& seq, std::int64_t n, std::int64_t now_ns, IterationPlan& plan);
  bool make_room_step(const Sequence& keep, std::int32_t need, std::int64_t now_ns, IterationPlan& plan);
  bool preempt_latest(const Sequence& keep, std::int64_t now_ns, IterationPlan& plan);
  bool prefill(Sequence& seq, std::int64_t& budget, std::int64_t now_ns, IterationPlan& plan,
               std::vector<TurnUpdate>& events);
  void plan_chunk(Sequence& seq, std::int64_t start, std::int64_t n, IterationPlan& plan,
                  std::vector<TurnUpdate>& events);
  void finish(Sequence& seq, model::FinishReason reason, std::int64_t now_ns, IterationPlan* plan,
              std::vector<TurnUpdate>& events,
              std::optional<model::SampledToken> stop_token = std::nullopt);
  void release(kv::BlockTable& table);
  void release_swap_in(Sequence& seq);
  PlannedSequence chunk(Sequence& seq, std::int64_t start, std::int64_t n) const;
  Sequence* find_running(TurnId turn);

  SchedulerOptions options_;
  KvCacheManager kv_;
  std::deque<std::unique_ptr<Sequence>> waiting_;  // by arrival
  std::vector<std::unique_ptr<Sequence>> running_;  // by arrival
  std::vector<HostSlot> swap_in_sources_;  // read by the last plan's swap_in: released at the next
  std::vector<TurnId> pending_cancels_;
  std::vector<kv::BlockId> freed_since_plan_;
  std::vector<TurnId> released_since_plan_;
  std::uint64_t next_arrival_ = 0;
  std::uint64_t next_iteration_ = 0;
  SchedulerStats stats_;
  std::optional<KvFlushStep> kv_flush_;  // set: flushing to disk (start_kv_flush)
};

}  // namespace pensieve::actors
