// The conversation store of Engine: creating, looking up, listing and
// deleting stored conversations, the limits that send idle ones out of
// memory (to the journal, or deleted), and the journal's restore at start-up.
#include "actors/engine_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>

namespace pensieve::actors {

namespace asio = boost::asio;

namespace engine_detail {

std::string cache_namespace(const std::string& tenant, const std::optional<std::string>& salt) {
  std::string ns = std::to_string(tenant.size()) + ":" + tenant;
  if (salt) ns += ":" + *salt;
  return ns;
}

bool valid_conversation_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string store_key(const std::string& tenant, const std::string& id) { return tenant + '\n' + id; }

TurnError not_found(const std::string& id) {
  return TurnError{TurnErrorKind::not_found, "no conversation '" + id + "'"};
}

TurnError expired(const std::string& id, const EngineOptions& o) {
  TurnError e{TurnErrorKind::not_found, "conversation '" + id + "' expired"};
  e.message += " (idle conversations are deleted";
  if (o.conversation_idle_s > 0) e.message += " after " + std::to_string(o.conversation_idle_s) + " s";
  if (o.max_conversations > 0) {
    e.message += std::string(o.conversation_idle_s > 0 ? " or" : "") + " beyond the " +
                 std::to_string(o.max_conversations) + " most recently used";
  }
  e.message += "); create it again to reuse its id";
  return e;
}

std::int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace engine_detail

using namespace engine_detail;

EngineResult<Engine::Impl::Entry*> Engine::Impl::create_locked(const std::string& tenant,
                                                               std::optional<std::string> id) {
  if (id) {
    if (!valid_conversation_id(*id)) {
      return TurnError{TurnErrorKind::invalid_request,
                       "a conversation id is 1-128 characters of letters, digits and . _ : -",
                       "conversation"};
    }
    if (store.contains(store_key(tenant, *id))) {
      return TurnError{TurnErrorKind::invalid_request, "conversation '" + *id + "' already exists",
                       "conversation"};
    }
  } else {
    do {
      char buf[24];
      std::snprintf(buf, sizeof buf, "conv_%016llx", static_cast<unsigned long long>(rng()));
      id = buf;
    } while (store.contains(store_key(tenant, *id)));
  }
  std::int32_t& count = per_tenant[tenant];
  if (options.max_conversations_per_tenant > 0 && count >= options.max_conversations_per_tenant) {
    if (count == 0) per_tenant.erase(tenant);
    return TurnError{TurnErrorKind::rate_limited,
                     "this API key has " + std::to_string(count) +
                         " conversations, its limit; delete one before creating another"};
  }
  ++count;
  expired_ids.forget(store_key(tenant, *id));
  ConversationState state;
  state.id = new_id();
  state.tenant = tenant;
  state.created_unix_s = state.last_active_unix_s = unix_now_s();
  if (journal) {
    state.journal_uid = rng() | 1;  // never 0
    const JournalRecord created = JournalCreate{state.journal_uid, tenant, *id, state.created_unix_s};
    journal->flush_soon(journal->append(created));
  }
  const std::uint64_t journal_uid = state.journal_uid;
  ConversationInfo info{*id, tenant, state.created_unix_s};
  const ConversationId cid = state.id;
  auto activity = std::make_shared<ConversationActivity>();
  state.activity = activity;
  auto actor = spawn_conversation(std::move(state));
  const std::string key = store_key(tenant, *id);
  auto [it, inserted] = store.emplace(key, Entry{info, cid, std::move(actor), journal_uid, std::move(activity)});
  ++counts.live;
  loaded.touch(key, now_ns());
  (void)expire_locked(false, &key);  // the count of those that left is in `counts`
  return &it->second;
}

rt::ActorRef<ConversationMsg> Engine::Impl::use_locked(const std::string& key, Entry& e) {
  loaded.touch(key, now_ns());
  if (e.actor) return e.actor;
  // Back from the journal: its history loads before its first message; its
  // KV is recomputed (a fresh id: the old one's drop may still be queued).
  ConversationState state;
  state.id = new_id();
  state.tenant = e.info.tenant;
  state.created_unix_s = state.last_active_unix_s = e.info.created_unix_s;
  state.journal_uid = e.journal_uid;
  state.activity = e.activity;
  state.load_from_journal = true;
  e.cid = state.id;
  e.actor = spawn_conversation(std::move(state));
  --counts.journaled;
  ++counts.live;
  ++counts.reloaded_total;
  (void)expire_locked(false, &key);
  return e.actor;
}

std::int32_t Engine::Impl::expire_locked(bool idle, const std::string* keep) {
  if (stopping || (options.max_conversations <= 0 && (!idle || options.conversation_idle_s <= 0))) return 0;
  const auto busy = [this](const std::string& key) {
    return store.at(key).activity->turns_pending.load(std::memory_order_acquire) > 0;
  };
  const std::vector<std::string> leaving = loaded.pick(now_ns(), limits(idle), busy, keep);
  for (const std::string& key : leaving) leave_memory_locked(store.find(key));
  return std::int32_t(leaving.size());
}

// The conversation has no turn queued or running (so no message for its
// actor but snapshots, which it still answers), and every acknowledged turn
// of it is in the journal's copy (the turn committed before it ended).
void Engine::Impl::leave_memory_locked(std::map<std::string, Entry>::iterator it) {
  Entry& e = it->second;
  loaded.erase(it->first);
  e.actor.request_stop(rt::StopMode::drain);
  e.actor = {};
  drop_kv(e.cid);
  --counts.live;
  if (journal && e.journal_uid != 0) {
    // Its history is in the journal's file: the journal's copy goes too.
    journal->release_soon(e.journal_uid);
    ++counts.journaled;
    ++counts.unloaded_total;
    return;
  }
  ++counts.expired_total;
  expired_ids.remember(it->first);
  if (auto t = per_tenant.find(e.info.tenant); t != per_tenant.end() && --t->second == 0) per_tenant.erase(t);
  store.erase(it);
}

void Engine::Impl::drop_kv(ConversationId cid) {
  SchedulerMsg drop = DropConversation{cid};
  const rt::ActorRef<SchedulerMsg> ref = scheduler->ref();
  if (ref.try_tell(drop) != rt::SendStatus::full) return;  // sent, or the scheduler is gone
  // A full inbox (a burst of deletes): the drop waits its turn. It must not
  // be lost: the cached entry (its token history, and its KV until eviction
  // takes it) would outlive the conversation.
  auto tell = [](rt::ActorRef<SchedulerMsg> to, SchedulerMsg msg) -> asio::awaitable<void> {
    co_await to.tell(std::move(msg));
  };
  group.spawn(control.executor(), tell(ref, std::move(drop)));
}

asio::awaitable<void> Engine::Impl::expire_every_second() {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    timer.expires_after(std::chrono::seconds(1));
    auto [ec] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;  // cancelled: the engine is stopping
    std::lock_guard lock(store_mutex);
    (void)expire_locked(true, nullptr);  // counted in `counts`
  }
}

ConversationCounts Engine::conversation_counts() const {
  std::lock_guard lock(impl_->store_mutex);
  return impl_->counts;
}

asio::awaitable<JournalMemory> Engine::journal_memory() {
  if (!impl_->journal) co_return JournalMemory{};
  // On the journal's executor, after the releases posted there before.
  auto read = [](std::shared_ptr<HistoryJournal> j) -> asio::awaitable<JournalMemory> {
    co_return JournalMemory{std::int64_t(j->held_tokens()), std::int64_t(j->held_messages()),
                            std::int64_t(j->released())};
  };
  co_return co_await asio::co_spawn(impl_->journal_ring->get_executor(), read(impl_->journal), asio::use_awaitable);
}

std::size_t Engine::running_tasks() const { return impl_->group.size(); }

std::int32_t Engine::expire_conversations() {
  std::lock_guard lock(impl_->store_mutex);
  return impl_->expire_locked(true, nullptr);
}

EngineResult<ConversationInfo> Engine::create_conversation(const std::string& tenant,
                                                           std::optional<std::string> id) {
  std::lock_guard lock(impl_->store_mutex);
  auto entry = impl_->create_locked(tenant, std::move(id));
  if (!entry) return entry.error();
  return (*entry)->info;
}

// The conversations the journal replayed, unloaded: each comes into memory
// on its first use, its history from the journal's copy, its KV recomputed.
void Engine::Impl::restore_history() {
  std::lock_guard lock(store_mutex);
  for (const auto& [uid, c] : journal->recovered()) {
    store.emplace(store_key(c.tenant, c.id), Entry{{c.id, c.tenant, c.created_unix_s}, new_id(), {}, uid,
                                                   std::make_shared<ConversationActivity>()});
    ++counts.journaled;
    ++per_tenant[c.tenant];  // restored ones count, even past a lowered limit
  }
  // Unloaded until their first use: their histories stay in the file only.
  // Nothing uses the journal yet, so this may run on this thread.
  std::vector<std::uint64_t> uids;
  for (const auto& [uid, c] : journal->recovered()) uids.push_back(uid);
  for (std::uint64_t uid : uids) journal->release(uid);
}

std::optional<ConversationInfo> Engine::find_conversation(const std::string& tenant, const std::string& id) const {
  std::lock_guard lock(impl_->store_mutex);
  auto it = impl_->store.find(store_key(tenant, id));
  if (it == impl_->store.end()) return std::nullopt;
  return it->second.info;
}

std::vector<ConversationInfo> Engine::list_conversations(const std::string& tenant) const {
  std::lock_guard lock(impl_->store_mutex);
  std::vector<ConversationInfo> out;
  const std::string prefix = tenant + '\n';
  for (auto it = impl_->store.lower_bound(prefix); it != impl_->store.end() && it->first.starts_with(prefix); ++it) {
    out.push_back(it->second.info);
  }
  return out;
}

asio::awaitable<EngineResult<ConversationSnapshot>> Engine::snapshot(const std::string& tenant, const std::string& id) {
  rt::ActorRef<ConversationMsg> actor;
  {
    std::lock_guard lock(impl_->store_mutex);
    const std::string key = store_key(tenant, id);
    auto it = impl_->store.find(key);
    if (it == impl_->store.end()) {
      co_return impl_->expired_ids.contains(key) ? expired(id, impl_->options) : not_found(id);
    }
    actor = impl_->use_locked(key, it->second);
  }
  GetSnapshot get;
  auto r = co_await actor.ask(std::move(get));
  if (!r) co_return not_found(id);
  co_return std::move(*r);
}

bool Engine::delete_conversation(const std::string& tenant, const std::string& id) {
  Impl& m = *impl_;
  Impl::Entry entry;
  {
    std::lock_guard lock(m.store_mutex);
    auto it = m.store.find(store_key(tenant, id));
    if (it == m.store.end()) return false;
    entry = std::move(it->second);
    m.store.erase(it);
    if (entry.actor) {
      m.loaded.erase(store_key(tenant, id));
      --m.counts.live;
    } else {
      --m.counts.journaled;
    }
    if (auto t = m.per_tenant.find(tenant); t != m.per_tenant.end() && --t->second == 0) m.per_tenant.erase(t);
    if (m.journal && entry.journal_uid != 0) {
      const JournalRecord tombstone = JournalRemove{entry.journal_uid};
      m.journal->flush_soon(m.journal->append(tombstone));
    }
  }
  if (!entry.actor) return true;  // unloaded: its KV was freed then
  entry.actor.request_stop(rt::StopMode::reject);
  m.drop_kv(entry.cid);
  return true;
}

}  // namespace pensieve::actors
