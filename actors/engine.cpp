#include "actors/engine.hpp"

#include "actors/engine_impl.hpp"

#include "actors/conversation_lru.hpp"

#include "actors/disk_tier.hpp"
#include "actors/gpu_worker.hpp"
#include "actors/history_journal.hpp"
#include "actors/model_identity.hpp"
#include "actors/reply_memo.hpp"
#include "actors/swap_engine.hpp"
#include "gpu/backend/paged_forward.hpp"
#include "runtime/executor.hpp"
#include "runtime/task_group.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <mutex>
#include <random>

namespace pensieve::actors {

namespace asio = boost::asio;

using namespace engine_detail;

void Engine::Impl::shutdown() {
  canceller.reset();  // the scheduler fails every turn as it stops
  {
    std::lock_guard lock(store_mutex);
    stopping = true;
  }
  std::promise<void> done;
  auto stop = [this]() -> asio::awaitable<void> {
    if (!kv_flushed.exchange(true)) (void)co_await flush_kv();  // reported only when asked for
    if (scheduler) co_await scheduler->stop();
    // Before the worker: its copies read and write the worker's KV pool.
    if (swap) co_await swap.stop(rt::StopMode::drain);
    std::vector<rt::ActorRef<ConversationMsg>> actors;
    {
      std::lock_guard lock(store_mutex);
      for (auto& [key, e] : store) {
        if (e.actor) actors.push_back(e.actor);
      }
    }
    for (auto& a : actors) co_await a.stop(rt::StopMode::reject);
    // Creates and deletes that no turn waited for.
    if (journal) (void)co_await journal->sync_all();
    co_await worker.stop(rt::StopMode::drain);
    co_await group.stop();
  };
  asio::co_spawn(control.executor(), stop(), [&](std::exception_ptr) { done.set_value(); });
  done.get_future().wait();
  control.join();
  worker_thread.join();
}

asio::awaitable<KvFlushReport> Engine::Impl::flush_kv() {
  if (!scheduler || !disk_tier || options.kv_flush_on_exit_s <= 0) co_return KvFlushReport{};
  FlushKvToDisk flush;
  // On the steady clock, as the scheduler's.
  flush.deadline_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count() +
                      std::int64_t(options.kv_flush_on_exit_s) * 1'000'000'000;
  auto report = co_await scheduler->ref().ask(std::move(flush));
  co_return report ? *report : KvFlushReport{};
}

KvFlushReport Engine::flush_kv_to_disk() {
  if (impl_->kv_flushed.exchange(true)) return KvFlushReport{};
  std::promise<KvFlushReport> done;
  auto flush = [this]() -> asio::awaitable<KvFlushReport> { co_return co_await impl_->flush_kv(); };
  asio::co_spawn(impl_->control.executor(), flush(), [&](std::exception_ptr e, KvFlushReport r) {
    if (e) {
      done.set_exception(e);
    } else {
      done.set_value(r);
    }
  });
  return done.get_future().get();
}

std::int64_t default_kv_host_mb() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_bytes = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_bytes <= 0) return 1024;  // unknown: a modest tier
  const std::int64_t quarter_mb = std::int64_t(pages) * std::int64_t(page_bytes) / 4 / (std::int64_t(1) << 20);
  return std::min<std::int64_t>(4096, quarter_mb);
}

namespace {

struct TierSizes {
  std::int32_t host_slots = 0;
  std::int64_t disk_bytes = 0;
};

// `host_pool`: the backend has host memory to swap to (automatic sizing
// turns the tier off where it has none; an explicit size is then an error).
TierSizes tier_sizes(const EngineOptions& o, std::size_t block_bytes, bool host_pool) {
  TierSizes t;
  if (!o.scheduler.keep_kv) return t;  // --no-state keeps nothing to move
  const bool automatic = o.kv_host_blocks <= 0 && o.kv_host_mb == kAutoKvHostMb;
  if (automatic && !host_pool) return t;
  const std::int64_t host_mb = automatic ? default_kv_host_mb() : std::max<std::int64_t>(o.kv_host_mb, 0);
  const std::int64_t host = o.kv_host_blocks > 0
                                ? std::int64_t(o.kv_host_blocks)
                                : std::int64_t(std::size_t(host_mb) * (std::size_t(1) << 20) / block_bytes);
  t.host_slots = std::int32_t(std::min<std::int64_t>(host, 1 << 30));
  t.disk_bytes = o.kv_disk_bytes > 0 ? o.kv_disk_bytes : std::max<std::int64_t>(o.kv_disk_gb, 0) << 30;
  return t;
}

// Chunks reach the disk tier only through the host tier (the swap engine
// spills host slots to it), so a disk budget without a host tier would be
// silently unused: refuse it at start-up, naming what is missing.
Result<void> check_disk_tier(const EngineOptions& o, bool host_pool, std::int32_t host_slots) {
  if (o.kv_disk_bytes <= 0 && o.kv_disk_gb <= 0) return {};
  if (!o.scheduler.keep_kv) return fail("--kv-disk-gb: --no-state keeps no KV, so a disk KV tier would be unused");
  if (!host_pool) {
    return fail(std::string("--kv-disk-gb: the disk KV tier is fed by the host tier, which works with one rank "
                            "only for now (this is --backend ") +
                std::string(backend::backend_name(o.backend)) + " --tp " + std::to_string(o.tp) + ")");
  }
  if (host_slots <= 0) {
    return fail("--kv-disk-gb: the disk KV tier is fed by the host tier, and --kv-host-mb " +
                std::to_string(o.kv_host_mb) + " leaves it no block (give the host tier a budget, or drop --kv-disk-gb)");
  }
  return {};
}

// Starts the swap engine on the control thread, beside the scheduler, over
// the worker's device pool and stream pool. Returns the disk tier's chunks;
// what a previous run left there (chunks of model `identity`) goes to `found`.
Result<std::int64_t> start_swap_engine(Engine::Impl& m, GpuWorker& gpu, const TierSizes& tiers,
                                       const JournalModel& identity, DiskTierFound& found) {
  std::shared_ptr<DiskTier> disk;
  if (tiers.disk_bytes > 0) {
    if (m.options.kv_disk_dir.empty()) return fail("a disk KV tier needs a folder (--kv-disk-dir)");
    kv::KvPoolConfig layout = gpu.pool_config();
    layout.num_blocks = tiers.host_slots;
    auto store = open_disk_tier(m.control.executor(), m.options.kv_disk_dir, std::uint64_t(tiers.disk_bytes), layout,
                                kv_identity(identity, layout), true, &found);
    if (!store) return store.error();
    disk = std::move(*store);
  }
  const std::int64_t disk_slots = disk ? disk->slots() : 0;
  SwapEngineConfig config;
  config.host_slots = tiers.host_slots;
  config.gather = m.options.gather_copies;
  config.gather_kernel = m.options.swap_gather_kernel;
  config.tracer = m.options.tracer;
  config.disk = std::move(disk);
  // On the control thread, where the scheduler runs too. A full inbox: the
  // report waits its turn (it must not be lost: it frees slots).
  config.report = [impl = &m](TransfersDone done) {
    SchedulerMsg message = TransfersFinished{std::move(done)};
    const rt::ActorRef<SchedulerMsg> ref = impl->scheduler->ref();
    if (ref.try_tell(message) != rt::SendStatus::full) return;  // sent, or the scheduler is gone
    auto tell = [](rt::ActorRef<SchedulerMsg> to, SchedulerMsg msg) -> asio::awaitable<void> {
      co_await to.tell(std::move(msg));
    };
    impl->group.spawn(impl->control.executor(), tell(ref, std::move(message)));
  };
  // The backend's own links (CUDA: pinned host tier, CUDA copy streams), or
  // the device pool in host memory with CPU copy streams.
  auto links = gpu.device_tier_links(tiers.host_slots);
  if (!links) return links.error();
  std::optional<SwapEngine> engine;
  if (*links) {
    engine.emplace(std::move(**links), m.group, m.control.executor(), std::move(config));
  } else if (gpu.device_pool()) {
    engine.emplace(gpu.device_pool(), gpu.stream_pool(), m.group, m.control.executor(), std::move(config));
  } else {
    return fail("this backend has no host KV tier (--kv-host-mb): the KV is split over --tp ranks");
  }
  m.swap = rt::spawn_actor<SwapEngineMsg>(m.group, m.control.executor(), std::move(*engine),
                                          {.name = "swap engine", .mailbox_capacity = 64, .tracer = m.options.tracer});
  return disk_slots;
}

// The start-up log's line on the disk tier: what the scan of the previous
// run's file found, what the prefix index took of it, and how it comes back.
std::string disk_scan_note(const EngineOptions& o, std::int64_t disk_slots, const RestoredKv& r) {
  const kv::DiskScanReport& s = r.scan;
  const auto front_missing = std::count_if(r.paths.begin(), r.paths.end(),
                                           [](const RestoredPath& p) { return p.missing_front > 0; });
  std::string note = "disk KV tier " + o.kv_disk_dir + ": " + std::to_string(disk_slots) + " chunk slots; ";
  if (s.scanned == 0) {
    note += "no previous run's chunks";
  } else {
    note += "scanned " + std::to_string(s.scanned) + " slots of a previous run: " + std::to_string(s.labelled) +
            " chunks of this model (" + std::to_string(s.empty) + " empty, " + std::to_string(s.corrupt) +
            " corrupt, " + std::to_string(s.foreign) + " of another model or layout, " +
            std::to_string(s.unreadable) + " unreadable); registered " + std::to_string(r.used.size()) +
            " chunks as " + std::to_string(r.paths.size()) + " cached paths (" + std::to_string(front_missing) +
            " of them behind a missing front, recomputed from a journaled history), discarded " +
            std::to_string(r.unused.size()) + " (earlier chunks of their path gone, duplicates)";
  }
  note += "; --kv-disk-restore " + std::string(disk_restore_mode_name(o.kv_cache.disk_restore));
  if (o.kv_flush_on_exit_s > 0) {
    note += "; idle KV is flushed to it at exit (up to " + std::to_string(o.kv_flush_on_exit_s) + " s)";
  }
  return note;
}

// The recompute costs eviction weighs: given, from a profile, or timed on
// the backend before the worker owns it (prefills that fit one pass, the
// context and the pool).
Result<CostModelReport> engine_cost_model(const EngineOptions& o, backend::PagedForward& forward,
                                          std::int32_t max_context) {
  if (o.cost_model_source == CostModelSource::measured) {
    CostCalibrationOptions c = o.cost_calibration;
    const std::int64_t pool_tokens = std::int64_t(forward.pool_config().num_blocks) * o.kv_block_tokens;
    c.limit_tokens = std::int32_t(std::min<std::int64_t>(
        {std::int64_t(c.limit_tokens), std::int64_t(o.scheduler.max_batch_tokens), std::int64_t(max_context),
         pool_tokens}));
    return calibrate_cost_model(forward, c, o.kv_cache.cost_model);
  }
  CostModelReport r;
  r.model = o.kv_cache.cost_model;
  r.source = "default";
  if (!o.cost_model_profile.empty()) {
    auto m = load_cost_profile(o.cost_model_profile);
    if (!m) return m.error();
    r.model = *m;
    r.source = "profile " + o.cost_model_profile;
  }
  return r;
}

}  // namespace

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() { impl_->shutdown(); }

Result<std::unique_ptr<Engine>> Engine::create(model::ModelWeights weights, EngineOptions options) {
  if (!weights.tokenizer) return fail("the model has no tokenizer; a chat server needs one");
  const SchedulerOptions& so = options.scheduler;
  if (so.max_batch_tokens <= 0 || so.max_running <= 0 || so.max_admitted <= 0 || options.kv_block_tokens <= 0 ||
      options.kv_cache_mb <= 0 || options.scheduler_mailbox_messages <= 0) {
    return fail("engine options: batch tokens, running and queued turns, block tokens, KV size and the "
                "scheduler's mailbox must be positive");
  }
  auto tokenizer = model::Tokenizer::from_data(*weights.tokenizer);
  if (!tokenizer) return tokenizer.error();
  std::string chat_note;
  auto chat = model::chat_template_for(*tokenizer, options.chat_template, &chat_note);
  if (!chat) return chat.error();
  // Before the weights go to the backend (which may shard or repack them).
  const JournalModel identity = model_identity(weights, options.chat_template, *chat);
  std::string name = weights.config.name.empty() ? "pensieve" : weights.config.name;
  const std::int32_t max_context = weights.config.max_context;
  // The device tier: as many blocks as the budget holds (on every rank:
  // each has kv_cache_mb for its share of the KV heads).
  backend::PagedForwardOptions fo;
  fo.backend = options.backend;
  fo.tp = options.tp;
  fo.n_threads = options.n_threads;
  fo.block_tokens = options.kv_block_tokens;
  fo.kv_dtype = options.kv_dtype;
  fo.kv_budget_bytes = std::size_t(options.kv_cache_mb) << 20;
  fo.num_blocks = options.kv_device_blocks;
  fo.max_batch_tokens = options.scheduler.max_batch_tokens;
  fo.decode_thresholds = options.decode_thresholds;
  auto forward = backend::make_paged_forward(std::move(weights), fo);
  if (!forward) return forward.error();
  const kv::KvPoolConfig pool = (*forward)->pool_config();
  const std::size_t block_bytes = kv::kv_bytes_per_token(pool) * std::size_t(options.kv_block_tokens);
  const TierSizes tiers = tier_sizes(options, block_bytes, (*forward)->supports_host_tier());
  if (auto ok = check_disk_tier(options, (*forward)->supports_host_tier(), tiers.host_slots); !ok) {
    return ok.error();
  }
  if (tiers.host_slots > 0 && !(*forward)->supports_host_tier()) {
    return fail("the host KV tier (--kv-host-mb) works with one rank only for now (--tp 1)");
  }
  auto cost = engine_cost_model(options, **forward, max_context);
  if (!cost) return cost.error();
  options.kv_cache.cost_model = cost->model;
  // Measured or a profile's: seconds, which the disk-vs-recompute rule needs.
  options.kv_cache.cost_in_seconds = cost->measured || !options.cost_model_profile.empty();
  model::VocabInfo vocab{(*forward)->config().vocab_size, {}};
  for (auto id : {tokenizer->eos_id(), tokenizer->eot_id()}) {
    if (id) vocab.eos_ids.push_back(*id);
  }

  auto impl = std::make_unique<Impl>(std::move(*tokenizer), std::move(*chat), std::move(name), std::move(options));
  impl->chat_note = std::move(chat_note);
  impl->cost_model = std::move(*cost);
  Impl& m = *impl;
  m.max_context = max_context;
  if (!m.options.history_dir.empty()) {
    auto ring = rt::IoRing::create(m.control.executor());
    if (!ring) return ring.error();
    auto journal = HistoryJournal::open(*ring, {.dir = m.options.history_dir,
                                                .model = identity,
                                                .reset_on_model_change = m.options.history_reset_on_model_change});
    if (!journal) return journal.error();
    const JournalOpenReport& report = (*journal)->open_report();
    if (report.model_reset) m.history_note = *report.model_reset;
    m.journal_ring = std::move(*ring);
    m.journal = std::move(*journal);
  }
  GpuWorker gpu(std::move(*forward), GpuWorkerConfig{pool, vocab, m.options.tracer, {}, m.options.compute_nice});
  std::int64_t disk_slots = 0;
  DiskTierFound found;
  if (tiers.host_slots > 0) {
    auto swap = start_swap_engine(m, gpu, tiers, identity, found);
    if (!swap) return swap.error();
    disk_slots = *swap;
  }
  m.worker = rt::spawn_actor<GpuWorkerMsg>(m.group, m.worker_thread.executor(), std::move(gpu),
                                           {.name = "gpu worker", .mailbox_capacity = 4, .tracer = m.options.tracer});
  SchedulerConfig sc;
  sc.swap = m.swap;
  sc.options = m.options.scheduler;
  sc.kv_cache = m.options.kv_cache;
  sc.kv_sizes.num_blocks = pool.num_blocks;
  sc.kv_sizes.block_tokens = m.options.kv_block_tokens;
  sc.kv_sizes.host_slots = tiers.host_slots;
  sc.kv_sizes.disk_slots = std::int32_t(std::min<std::int64_t>(disk_slots, 1 << 30));
  sc.tracer = m.options.tracer;
  sc.on_iteration = m.options.on_iteration;
  sc.mailbox_messages = std::size_t(m.options.scheduler_mailbox_messages);
  // The journal's histories place chunks whose earlier chunks are gone
  // (their conversations' unsalted namespace: what their turns share under).
  std::vector<KnownHistory> histories;
  if (m.journal && !found.chunks.empty()) {
    for (const auto& [uid, c] : m.journal->recovered()) {
      histories.push_back({cache_namespace(c.tenant, std::nullopt), c.tokens});
    }
  }
  sc.restored_kv = restore_paths(std::move(found.chunks), m.options.kv_block_tokens, histories);
  sc.restored_kv.scan = found.report;
  m.disk_tier = disk_slots > 0;
  if (m.disk_tier) m.kv_disk_note = disk_scan_note(m.options, disk_slots, sc.restored_kv);
  m.scheduler.emplace(m.group, m.control.executor(), std::move(sc), m.worker);
  m.services = TurnServices{&m.tokenizer, &m.chat, m.scheduler->ref(), m.max_context, m.options.context_overflow};
  m.canceller =
      std::make_shared<const TurnCanceller>(m.scheduler->ref(), m.group, m.control.executor());
  m.services.journal = m.journal.get();
  m.services.replies = &m.replies;
  if (m.journal) m.restore_history();
  // A test's clock (now_ns) drives expiry through expire_conversations()
  // alone. The count is applied at each creation too, but a conversation
  // whose turn is still ending then stays over it until the next pass.
  if ((m.options.conversation_idle_s > 0 || m.options.max_conversations > 0) && !m.options.now_ns) {
    m.group.spawn(m.control.executor(), m.expire_every_second());
  }
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

const std::string& Engine::model_name() const { return impl_->name; }

std::string Engine::chat_template_description() const {
  const model::ChatTemplate& t = impl_->chat;
  std::string d = std::string(t.name()) + (t.is_jinja() ? " (Jinja)" : " (built in)");
  if (!impl_->chat_note.empty()) d += "; " + impl_->chat_note;
  return d;
}
const std::string& Engine::history_note() const { return impl_->history_note; }
std::int32_t Engine::max_context() const { return impl_->max_context; }
std::string Engine::token_text(std::int32_t token) const { return impl_->tokenizer.token_to_piece(token); }
const EngineOptions& Engine::options() const { return impl_->options; }
const CostModelReport& Engine::cost_model() const { return impl_->cost_model; }
const std::string& Engine::kv_disk_note() const { return impl_->kv_disk_note; }

EngineResult<TurnStream> Engine::start(const asio::any_io_executor& executor, TurnRequest request) {
  Impl& m = *impl_;
  if ((request.prompt || request.prompt_tokens) && request.conversation) {
    return TurnError{TurnErrorKind::invalid_request, "a raw prompt cannot continue a conversation",
                     "prompt"};
  }
  rt::ActorRef<ConversationMsg> actor;
  std::shared_ptr<ConversationActivity> activity;  // counts the turn in; null: anonymous
  const bool anonymous = !request.conversation;
  if (anonymous) {
    // Not in the store: no one else can reach it, and it ends after this turn.
    ConversationState state;
    state.id = m.new_id();
    state.tenant = request.tenant;
    state.keep_kv = false;
    // Also with --no-state: its replies' ids are remembered alike, so a
    // resent history is the same tokens in both modes.
    state.cache_namespace = cache_namespace(request.tenant, request.cache_salt);
    actor = m.spawn_conversation(std::move(state));
  } else {
    std::lock_guard lock(m.store_mutex);
    const std::string key = store_key(request.tenant, *request.conversation);
    auto it = m.store.find(key);
    Impl::Entry* entry = nullptr;
    if (it != m.store.end()) {
      entry = &it->second;
      actor = m.use_locked(key, *entry);
    } else if (m.expired_ids.contains(key)) {
      return expired(*request.conversation, m.options);
    } else if (!request.create_conversation) {
      return not_found(*request.conversation);
    } else {
      auto created = m.create_locked(request.tenant, *request.conversation);
      if (!created) return created.error();
      entry = *created;
      actor = entry->actor;
    }
    // Under the store's lock: an expiry that sees no turn pending sees this one.
    activity = entry->activity;
    activity->turns_pending.fetch_add(1, std::memory_order_acq_rel);
  }
  const TurnId turn{m.next_turn.fetch_add(1) + 1};
  auto channel = std::make_shared<TurnEventChannel>(
      executor, turn_channel_capacity(request.sampling.max_tokens));
  StartTurn start{turn,    std::move(request.messages), std::move(request.prompt), std::move(request.sampling),
                  channel, std::move(request.chat),     request.compare_history};
  // A stored conversation's turn shares only its tenant's and salt's
  // cached prefixes, as a stateless request does (no cross-salt hit).
  if (!anonymous) start.share_namespace = cache_namespace(request.tenant, request.cache_salt);
  start.pin_ttl_ns = request.pin_ttl_s * 1'000'000'000;
  start.prompt_tokens = std::move(request.prompt_tokens);
  ConversationMsg message = std::move(start);
  const rt::SendStatus sent = actor.try_tell(message);
  if (sent != rt::SendStatus::sent && activity) activity->turns_pending.fetch_sub(1, std::memory_order_acq_rel);
  if (anonymous) actor.request_stop(rt::StopMode::drain);  // after its one turn
  switch (sent) {
    case rt::SendStatus::sent: break;
    case rt::SendStatus::full:
      return TurnError{TurnErrorKind::overloaded, "too many turns are queued on this conversation; retry later"};
    default:
      if (anonymous) return TurnError{TurnErrorKind::overloaded, "the server is stopping"};
      return not_found(*request.conversation);
  }
  return TurnStream(std::move(channel), m.canceller, turn);
}

asio::awaitable<TurnResult> drain_turn(TurnStream stream, TurnSink sink) {
  bool listening = true;
  for (;;) {
    auto delta = co_await stream.next();
    if (!delta) break;
    if (!listening) continue;  // cancelled: drain to the turn's end
    const bool keep_going = co_await sink(*delta);  // its own statement: GCC 12
    if (!keep_going) {
      listening = false;
      stream.cancel();
    }
  }
  co_return stream.result();
}

asio::awaitable<SwapStats> Engine::swap_stats() {
  if (!impl_->swap) co_return SwapStats{};
  GetSwapStats get;
  auto r = co_await impl_->swap.ask(std::move(get));
  co_return r ? *r : SwapStats{};
}

void Engine::clear_prefix_cache() {
  SchedulerMsg clear = ClearUnnamedPaths{};
  const rt::ActorRef<SchedulerMsg> ref = impl_->scheduler->ref();
  if (ref.try_tell(clear) != rt::SendStatus::full) return;  // sent, or the scheduler is gone
  auto tell = [](rt::ActorRef<SchedulerMsg> to, SchedulerMsg msg) -> asio::awaitable<void> {
    co_await to.tell(std::move(msg));
  };
  impl_->group.spawn(impl_->control.executor(), tell(ref, std::move(clear)));
}

asio::awaitable<EngineResult<KvPlacement>> Engine::kv_placement(const std::string& tenant, const std::string& id) {
  ConversationId cid;
  {
    std::lock_guard lock(impl_->store_mutex);
    auto it = impl_->store.find(store_key(tenant, id));
    if (it == impl_->store.end()) co_return TurnError{TurnErrorKind::not_found, "no conversation '" + id + "'"};
    cid = it->second.cid;
  }
  GetConversationChunks get{cid, {}};
  auto chunks = co_await impl_->scheduler->ref().ask(std::move(get));
  if (!chunks) co_return TurnError{TurnErrorKind::internal, "the scheduler did not answer"};
  KvPlacement p;
  p.block_tokens = impl_->options.kv_block_tokens;
  for (const ChunkView& c : *chunks) {
    switch (c.tier) {
      case ChunkTier::device:
        ++p.device;
        break;
      case ChunkTier::host:
        ++p.host;
        break;
      case ChunkTier::disk:
      case ChunkTier::restoring:
        ++p.disk;
        break;
      case ChunkTier::dropped:
        ++p.dropped;
        break;
    }
    if (c.moving) ++p.moving;
  }
  co_return p;
}

asio::awaitable<std::int64_t> Engine::unpin_prefixes(std::optional<std::string> tenant,
                                                     std::optional<std::string> cache_salt) {
  UnpinPrefixes unpin;
  if (tenant) unpin.ns = cache_namespace(*tenant, cache_salt);
  auto r = co_await impl_->scheduler->ref().ask(std::move(unpin));
  co_return r ? *r : 0;
}

asio::awaitable<SchedulerStats> Engine::stats() {
  GetSchedulerStats get;
  auto r = co_await impl_->scheduler->ref().ask(std::move(get));
  co_return r ? *r : SchedulerStats{};
}

}  // namespace pensieve::actors
