#include "actors/scheduler_core.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <utility>

namespace pensieve::actors {

namespace {

std::int64_t blocks_for(std::int64_t tokens, std::int32_t block_tokens) {
  return (tokens + block_tokens - 1) / block_tokens;
}

}  // namespace

SchedulerCore::SchedulerCore(SchedulerOptions options, KvCacheSizes kv_sizes, KvCacheOptions kv_options)
    : options_(options), kv_(kv_sizes, kv_options) {
  assert(kv_sizes.block_tokens > 0 && options_.max_batch_tokens > 0 && options_.max_running > 0);
}

AdmitStatus SchedulerCore::admit(TurnSpec spec, std::int64_t now_ns) {
  if (std::int64_t(waiting_.size() + running_.size()) >= options_.max_admitted) {
    ++stats_.refused_overloaded;
    return AdmitStatus::overloaded;
  }
  const std::int64_t need = std::int64_t(spec.tokens.size()) + std::max(0, spec.sampling.max_tokens);
  // Pinned blocks are not the turn's to take: a turn that needs them could
  // only wait for the pins to expire.
  kv_.expire_pins(now_ns);
  if (spec.tokens.empty() ||
      blocks_for(need, kv_.block_tokens()) > kv_.device_blocks() - kv_.pinned_blocks()) {
    return AdmitStatus::too_large;
  }
  auto seq = std::make_unique<Sequence>(Sequence{std::move(spec), next_arrival_++, 0,
                                                 kv::BlockTable(kv_.block_tokens())});
  seq->prompt_size = seq->spec.tokens.size();
  if (seq->spec.pin_ttl_ns > 0 && !pin_fits(*seq, now_ns)) {
    ++stats_.refused_pins;
    return AdmitStatus::pin_refused;
  }
  waiting_.push_back(std::move(seq));
  return AdmitStatus::admitted;
}

bool SchedulerCore::pin_fits(const Sequence& seq, std::int64_t now_ns) {
  const auto& ns = seq.spec.cache_namespace ? seq.spec.cache_namespace : seq.spec.share_namespace;
  if (!ns) return true;  // nothing it leaves is findable: nothing to pin
  const auto prompt = std::span(seq.spec.tokens).first(seq.prompt_size);
  kv_.expire_pins(now_ns);
  return kv_.pinned_blocks() + kv_.blocks_to_pin(*ns, prompt) <= kv_.pin_cap_blocks();
}

void SchedulerCore::cancel(TurnId turn) { pending_cancels_.push_back(turn); }

void SchedulerCore::drop_conversation(ConversationId conversation) {
  // A turn still in flight keeps nothing when it ends.
  for (auto& s : running_) {
    if (s->spec.conversation == conversation) s->spec.keep_kv = false;
  }
  for (auto& s : waiting_) {
    if (s->spec.conversation == conversation) s->spec.keep_kv = false;
  }
  kv_.forget(conversation, freed_since_plan_);
}

void SchedulerCore::transfers_done(const TransfersDone& done) { kv_.transfers_done(done, freed_since_plan_); }

void SchedulerCore::set_cost_model(const CostModel& cost) { kv_.set_cost_model(cost); }

std::optional<std::vector<std::int32_t>> SchedulerCore::cached_tokens(ConversationId conversation) const {
  return kv_.tokens(conversation);
}

void SchedulerCore::release(kv::BlockTable& table) { kv_.truncate(table, 0, freed_since_plan_); }

void SchedulerCore::release_swap_in(Sequence& seq) {
  for (const DeviceHostCopy& c : seq.swap_in) kv_.release_host(c.host);
  seq.swap_in.clear();
}

SchedulerCore::Sequence* SchedulerCore::find_running(TurnId turn) {
  for (auto& s : running_) {
    if (s->spec.turn == turn) return s.get();
  }
  return nullptr;
}

// Looks up the turn's cached KV once (pinning it, starting restores) and
// hands it to the turn once it is ready and the device has room for it.
SchedulerCore::KvReady SchedulerCore::attach_kv(Sequence& seq, std::int64_t budget, std::int64_t now_ns,
                                                IterationPlan& plan) {
  // A reference: a stateless turn may take an unnamed path's id below.
  const ConversationId& conversation = seq.spec.conversation;
  if (seq.preempted_in == stats_.iterations) return KvReady::later;
  if (!seq.attached) {
    seq.attached = true;
    if (seq.computed == 0 && seq.table.num_tokens() == 0) {
      adopt_unnamed_path(seq);
      kv_.attach(conversation, seq.spec.turn, seq.spec.tokens, now_ns, plan.transfers, freed_since_plan_);
    }
  }
  share_unnamed_prefix(seq, now_ns);
  const bool cached = kv_.attached_to(conversation, seq.spec.turn);
  if (!cached) share_running_prefix(seq);
  if (cached && !kv_.ready(conversation)) return KvReady::later;
  const std::int32_t need = cached ? kv_.blocks_to_materialize(conversation) : 0;
  if (!within_decode_reserve(seq, need, budget)) return KvReady::no_room;
  if (!cached) return KvReady::ready;
  while (need > kv_.free_device_blocks()) {
    if (!make_room_step(seq, need, now_ns, plan)) return KvReady::no_room;
  }
  AttachedKv kv = kv_.materialize(conversation, freed_since_plan_);
  seq.table = std::move(kv.table);
  seq.computed = kv.computed;
  seq.holes = std::move(kv.holes);
  seq.swap_in = std::move(kv.swap_in);
  seq.reused = std::int32_t(kv.hit_tokens);
  return KvReady::ready;
}

// A stateless turn runs under the id of the unnamed path its prompt
// continues, so it attaches that path's KV as a conversation's turn would
// and its own KV replaces the path when it ends. Looked up once: a
// preempted turn finds its own KV under the id it took. A conversation's
// turn with nothing of its own cached shares the longest cached prefix of
// its namespace (another conversation's system prompt) the same way.
void SchedulerCore::adopt_unnamed_path(Sequence& seq) {
  const bool stateless = seq.spec.cache_namespace.has_value();
  const auto& ns = stateless ? seq.spec.cache_namespace : seq.spec.share_namespace;
  if (!ns || !options_.keep_kv || seq.looked_up) return;
  seq.looked_up = true;
  if (!stateless && kv_.cached_token_count(seq.spec.conversation) > 0) return;  // it attaches its own
  auto match = kv_.find_prefix(*ns, seq.spec.tokens, stateless, seq.spec.conversation);
  if (!match) return;
  // A path a previous run left on disk has no device blocks to share: the
  // turn takes it over (attach keeps what its prompt has in common).
  if (match->restored) {
    if (stateless) {
      seq.spec.conversation = match->path;
      return;
    }
    if (kv_.adopt_restored(match->path, seq.spec.conversation)) return;
  }
  // The prompt continues the whole path: the path is this turn's. It
  // diverges inside it (or the path is a conversation's): it shares the
  // path's leading blocks and the path stays for the others.
  if (stateless && match->unnamed && match->tokens >= kv_.cached_token_count(match->path)) {
    seq.spec.conversation = match->path;
  } else {
    seq.share_from = match;
  }
}

void SchedulerCore::share_unnamed_prefix(Sequence& seq, std::int64_t now_ns) {
  const auto from = std::exchange(seq.share_from, std::nullopt);
  if (!from || seq.computed != 0 || seq.table.num_tokens() != 0) return;
  if (auto shared = kv_.share_prefix(from->path, seq.spec.tokens, now_ns)) {
    seq.table = std::move(*shared);
    seq.computed = seq.table.num_tokens();
    seq.reused = std::int32_t(seq.computed);
  }
}

void SchedulerCore::share_running_prefix(Sequence& seq) {
  const auto& ns = sharing_namespace(seq.spec);
  if (!ns || !options_.keep_kv || !options_.share_running_prefixes || seq.computed != 0 || seq.table.num_tokens() != 0 || seq.spec.tokens.empty()) return;
  // Its newest token is fed whatever matched: its logits pick the next one.
  const std::span<const std::int32_t> want(seq.spec.tokens.data(), seq.spec.tokens.size() - 1);
  const std::int64_t bt = kv_.block_tokens();
  const Sequence* best = nullptr;
  std::int64_t best_blocks = 0;
  for (const auto& r : running_) {
    // Written blocks only: not a dropped range still to feed, not a swap-in still to land.
    if (r->written < bt || !r->holes.empty() || !r->swap_in.empty() || sharing_namespace(r->spec) != ns) continue;
    const auto upto = std::min<std::int64_t>(r->written, r->table.num_tokens());
    const auto [mismatch, _] =
        std::mismatch(r->spec.tokens.begin(), r->spec.tokens.begin() + upto, want.begin(), want.end());
    const std::int64_t blocks = (mismatch - r->spec.tokens.begin()) / bt;
    if (blocks > best_blocks) {
      best = r.get();
      best_blocks = blocks;
    }
  }
  if (best == nullptr) return;
  seq.table = kv_.share_running(best->table, best_blocks);
  seq.computed = seq.table.num_tokens();
  seq.reused = std::int32_t(seq.computed);
}

// With a host tier, a new turn leaves decode_reserve of the device for the
// running decodes (counting what idle chunks could give up).
bool SchedulerCore::within_decode_reserve(const Sequence& seq, std::int32_t need, std::int64_t budget) const {
  if (!kv_.tiered() || running_.empty() || options_.decode_reserve <= 0.0) return true;
  const std::int64_t cached = kv_.cached_token_count(seq.spec.conversation);
  const std::int64_t first = std::min<std::int64_t>(budget, std::int64_t(seq.spec.tokens.size()) - cached);
  const std::int64_t total = need + blocks_for(cached + first, kv_.block_tokens()) - blocks_for(cached, kv_.block_tokens());
  const auto reserve = std::int64_t(std::ceil(options_.decode_reserve * double(kv_.device_blocks())));
  const std::int64_t available =
      kv_.free_device_blocks() + kv_.reclaimable_device_blocks(seq.spec.conversation);
  return available - total >= reserve;
}

// One step towards `need` free device blocks: cached KV first (copied out
// or dropped per the tiers; waiting turns' chunks after idle ones, but never
// `keep`'s own), then the latest-arrived running sequence. False when
// nothing more helps now (or copies already under way will do, or a spill
// under way must make host room first).
bool SchedulerCore::make_room_step(const Sequence& keep, std::int32_t need, std::int64_t now_ns,
                                   IterationPlan& plan) {
  const DeviceRoom room = kv_.make_device_room(now_ns, plan.transfers, freed_since_plan_, keep.spec.conversation);
  switch (room.step) {
    case DeviceRoom::Step::wait: return false;  // disk moves under way make room: ask again then
    case DeviceRoom::Step::exhausted: return preempt_latest(keep, now_ns, plan);
    case DeviceRoom::Step::progress: break;
  }
  // Enough now, or evict more unless moves under way will make up the rest.
  const std::int32_t free = kv_.free_device_blocks();
  return free >= need || free + room.coming < need;
}

// Preempts the latest-arrived running sequence that arrived after `keep` and
// has no work in this plan. With a host tier its KV becomes cached chunks
// of its conversation (the next room-making step copies them out to the
// host, or drops them if the host has no room) and it re-attaches them when
// it runs again; otherwise its KV is freed and it is recomputed.
bool SchedulerCore::preempt_latest(const Sequence& keep, std::int64_t now_ns, IterationPlan& plan) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Sequence& s = **it;
    if (s.arrival <= keep.arrival) return false;
    const bool planned = std::any_of(plan.sequences.begin(), plan.sequences.end(),
                                     [&](const PlannedSequence& p) { return p.turn == s.spec.turn; });
    if (planned) continue;
    // Swapped-in chunks not yet planned have no KV in their blocks yet.
    const bool keep_kv = kv_.tiered() && s.swap_in.empty() && keeps_kv(s);
    if (keep_kv) {
      if (!s.holes.empty()) {
        s.computed = s.holes.front().first;  // only what precedes the first unfilled range is valid
        kv_.truncate(s.table, s.computed, freed_since_plan_);
      }
      if (s.computed > 0) {
        kv_.put(s.spec.conversation, std::span(s.spec.tokens).first(std::size_t(s.computed)),
                std::exchange(s.table, kv::BlockTable(kv_.block_tokens())), now_ns, freed_since_plan_,
                s.spec.cache_namespace, s.spec.share_namespace);
      }
    }
    release(s.table);
    release_swap_in(s);
    s.computed = 0;
    s.holes.clear();
    s.attached = false;  // looks its KV up again
    s.preempted_in = stats_.iterations;
    ++stats_.preemptions;
    auto owned = std::move(*it);
    running_.erase(std::next(it).base());
    auto pos = std::find_if(waiting_.begin(), waiting_.end(),
                            [&](const auto& w) { return w->arrival > owned->arrival; });
    waiting_.insert(pos, std::move(owned));
    return true;
  }
  return false;
}

bool SchedulerCore::reserve(Sequence& seq, std::int64_t n, std::int64_t now_ns, IterationPlan& plan) {
  for (;;) {
    if (auto appended = kv_.append(seq.table, n)) {
      if (appended->copy) plan.copies.push_back(*appended->copy);
      return true;
    }
    if (!make_room_step(seq, kv_.blocks_needed(seq.table, n), now_ns, plan)) return false;
  }
}

PlannedSequence SchedulerCore::chunk(Sequence& seq, std::int64_t start, std::int64_t n) const {
  PlannedSequence p;
  p.turn = seq.spec.turn;
  const auto begin = seq.spec.tokens.begin() + start;
  p.tokens.assign(begin, begin + n);
  p.start_pos = std::int32_t(start);
  p.blocks.assign(seq.table.blocks().begin(), seq.table.blocks().end());
  p.sample = start + n == std::int64_t(seq.spec.tokens.size());
  if (!seq.sampler_ready) {
    p.new_sampler = seq.spec.sampling;
    p.sampler_context = seq.spec.tokens;
  }
  return p;
}

void SchedulerCore::plan_chunk(Sequence& s, std::int64_t start, std::int64_t n, IterationPlan& plan,
                               std::vector<TurnUpdate>& events) {
  if (!s.started) {
    events.push_back(
        {s.spec.turn, TurnStarted{std::int32_t(s.spec.tokens.size()), std::int32_t(s.reused)}});
    s.started = true;
    stats_.reused_tokens += s.reused;
  }
  // Its swapped-in chunks land before this very batch reads them.
  for (const DeviceHostCopy& c : s.swap_in) {
    plan.transfers.swap_in.push_back(c);
    swap_in_sources_.push_back(c.host);
  }
  s.swap_in.clear();
  plan.sequences.push_back(chunk(s, start, n));
  s.sampler_ready = true;
}

// A prefill chunk of `s`: a dropped range first (positions stay right: each
// fed token attends only up to its own position), then the rest.
bool SchedulerCore::prefill(Sequence& s, std::int64_t& budget, std::int64_t now_ns,
                            IterationPlan& plan, std::vector<TurnUpdate>& events) {
  if (!s.holes.empty()) {
    auto& hole = s.holes.front();
    const std::int64_t n = std::min(hole.second - hole.first, budget);
    if (n <= 0) return false;
    plan_chunk(s, hole.first, n, plan, events);
    hole.first += n;
    if (hole.first == hole.second) s.holes.erase(s.holes.begin());
    budget -= n;
    plan.prefill_tokens += std::int32_t(n);
    return true;
  }
  const std::int64_t remaining = std::int64_t(s.spec.tokens.size()) - s.computed;
  const std::int64_t n = std::min(remaining, budget);
  if (n <= 0 || !reserve(s, n, now_ns, plan)) return false;
  plan_chunk(s, s.computed, n, plan, events);
  s.computed += n;
  budget -= n;
  plan.prefill_tokens += std::int32_t(n);
  return true;
}

void SchedulerCore::finish(Sequence& seq, model::FinishReason reason, std::int64_t now_ns,
                           IterationPlan*, std::vector<TurnUpdate>& events,
                           std::optional<model::SampledToken> stop_token) {
  TurnDone done;
  done.finish = reason;
  done.stop_token = stop_token;
  events.push_back({seq.spec.turn, std::move(done)});
  if (seq.sampler_ready) released_since_plan_.push_back(seq.spec.turn);
  kv_.detach(seq.spec.conversation, seq.spec.turn);  // a waiting turn's attached KV stays cached
  release_swap_in(seq);
  if (!seq.holes.empty()) {
    // Only what precedes the first unfilled range is valid KV.
    seq.computed = seq.holes.front().first;
    kv_.truncate(seq.table, seq.computed, freed_since_plan_);
    seq.holes.clear();
  }
  if (keeps_kv(seq) && seq.computed > 0) {
    kv_.put(seq.spec.conversation, std::span(seq.spec.tokens).first(std::size_t(seq.computed)),
            std::move(seq.table), now_ns, freed_since_plan_, seq.spec.cache_namespace, seq.spec.share_namespace);
    // The prompt's full blocks only, as asked; pins admitted since this
    // turn's admission may have taken the room. kv_.pin is false only for a
    // path without a namespace or a full block: nothing to pin.
    if (seq.spec.pin_ttl_ns > 0 && !pin_fits(seq, now_ns)) {
      ++stats_.refused_pins;
    } else if (seq.spec.pin_ttl_ns > 0) {
      (void)kv_.pin(seq.spec.conversation, now_ns + seq.spec.pin_ttl_ns, std::int64_t(seq.prompt_size));
    }
  } else {
    release(seq.table);
  }
}

// With tiers, every waiting turn attaches its KV at once, so restores from disk
// start while it queues (and retry when they found no host room).
void SchedulerCore::prefetch_waiting_kv(std::int64_t now_ns, IterationPlan& plan) {
  if (!kv_.tiered()) return;
  for (auto& s : waiting_) {
    if (s->attached) {
      if (kv_.attached_to(s->spec.conversation, s->spec.turn)) {
        kv_.continue_restores(s->spec.conversation, now_ns, plan.transfers);
      }
      continue;
    }
    s->attached = true;
    if (s->computed == 0) {
      adopt_unnamed_path(*s);
      kv_.attach(s->spec.conversation, s->spec.turn, s->spec.tokens, now_ns, plan.transfers, freed_since_plan_);
    }
  }
}

// New turns, first come first served, while budget and room last; one whose
// restores are under way lets later ones pass.
void SchedulerCore::admit_waiting(std::int64_t& budget, std::int64_t now_ns, IterationPlan& plan,
                                  std::vector<TurnUpdate>& events) {
  for (std::size_t i = 0; budget > 0 && i < waiting_.size() && std::int32_t(running_.size()) < options_.max_running;) {
    Sequence& s = *waiting_[i];
    const KvReady kv = attach_kv(s, budget, now_ns, plan);
    if (kv == KvReady::later) {
      ++i;
      continue;
    }
    if (kv == KvReady::no_room) break;
    // Keep running_ in arrival order (a preempted turn returns among newer ones).
    auto owned = std::move(waiting_[i]);
    waiting_.erase(waiting_.begin() + std::ptrdiff_t(i));
    auto pos = std::find_if(running_.begin(), running_.end(),
                            [&](const auto& r) { return r->arrival > s.arrival; });
    running_.insert(pos, std::move(owned));
    if (!prefill(s, budget, now_ns, plan, events)) break;  // no room now; it keeps its place among the running
  }
}

IterationPlan SchedulerCore::plan(std::int64_t now_ns, std::vector<TurnUpdate>& events) {
  IterationPlan plan;
  plan.index = next_iteration_;
  // The last plan's swap_in has landed (its batch has run).
  for (HostSlot h : std::exchange(swap_in_sources_, {})) kv_.release_host(h);
  for (TurnId turn : std::exchange(pending_cancels_, {})) {
    auto r = std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s->spec.turn == turn; });
    if (r != running_.end()) {
      finish(**r, model::FinishReason::none, now_ns, &plan, events);
      running_.erase(r);
      continue;
    }
    auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const auto& s) { return s->spec.turn == turn; });
    if (w != waiting_.end()) {
      finish(**w, model::FinishReason::none, now_ns, &plan, events);
      waiting_.erase(w);
    }
  }
  // What the iterations before this one wrote, before this plan feeds more.
  for (auto& s : running_) s->written = s->holes.empty() ? s->computed : std::min(s->computed, s->holes.front().first);
  prefetch_waiting_kv(now_ns, plan);
  std::int64_t budget = options_.max_batch_tokens;
  // Decodes first: a running sequence never waits behind a prefill.
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (!s.started || !s.holes.empty() || std::int64_t(s.spec.tokens.size()) - s.computed != 1) continue;
    if (!reserve(s, 1, now_ns, plan)) continue;
    plan_chunk(s, s.computed, 1, plan, events);
    s.computed += 1;
    --budget;
    ++plan.decode_tokens;
  }
  // Then prefill chunks, first come first served: running sequences still
  // prefilling (they arrived first), then new turns, in the prefill chunk.
  std::int64_t prefill_budget =
      options_.max_prefill_tokens > 0 ? std::min<std::int64_t>(budget, options_.max_prefill_tokens) : budget;
  for (std::size_t i = 0; i < running_.size() && prefill_budget > 0; ++i) {
    Sequence& s = *running_[i];
    const std::int64_t remaining = std::int64_t(s.spec.tokens.size()) - s.computed;
    if (!s.holes.empty() || remaining > 1 || (!s.started && remaining == 1)) {
      prefill(s, prefill_budget, now_ns, plan, events);
    }
  }
  admit_waiting(prefill_budget, now_ns, plan, events);
  if (kv_flush_) {
    kv_flush_ = kv_.flush_to_disk(now_ns, plan.transfers);
  } else {
    kv_.ahead_of_time(now_ns, plan.transfers);
  }
  if (!plan.empty()) ++next_iteration_;
  plan.freed_blocks = std::exchange(freed_since_plan_, {});
  plan.released_samplers = std::exchange(released_since_plan_, {});
  ++stats_.iterations;
  stats_.prefill_tokens += plan.prefill_tokens;
  stats_.decode_tokens += plan.decode_tokens;
  return plan;
}

void SchedulerCore::complete(const IterationPlan& plan, std::span<const SampleResult> samples,
                             std::int64_t now_ns, std::vector<TurnUpdate>& events) {
  (void)plan;
  for (const SampleResult& r : samples) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s->spec.turn == r.turn; });
    if (it == running_.end()) continue;  // preempted or cancelled since
    Sequence& s = **it;
    s.spec.tokens.push_back(r.token.token);
    ++s.generated;
    // A stop token (EOS, a stop id) is not part of the reply's text: it
    // travels on the Done; the last token of a length finish is.
    const bool stop_token = r.finish == model::FinishReason::stop;
    if (!stop_token) events.push_back({s.spec.turn, TurnDelta{{}, {r.token}, 0}});
    if (r.finish != model::FinishReason::none) {
      finish(s, r.finish, now_ns, nullptr, events,
             stop_token ? std::optional(r.token) : std::nullopt);
      running_.erase(it);
    }
  }
}

void SchedulerCore::carry_over(IterationPlan& empty_plan) {
  released_since_plan_.insert(released_since_plan_.end(), empty_plan.released_samplers.begin(),
                              empty_plan.released_samplers.end());
  empty_plan.released_samplers.clear();
}

void SchedulerCore::fail(const IterationPlan& plan, const std::string& error,
                         std::vector<TurnUpdate>& events) {
  for (const PlannedSequence& p : plan.sequences) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s->spec.turn == p.turn; });
    if (it == running_.end()) continue;
    events.push_back({p.turn, TurnFailed{TurnError{TurnErrorKind::internal, error}}});
    if ((*it)->sampler_ready) released_since_plan_.push_back(p.turn);
    release((*it)->table);
    release_swap_in(**it);
    running_.erase(it);
  }
}

SchedulerStats SchedulerCore::stats() const {
  SchedulerStats s = stats_;
  s.waiting = std::int32_t(waiting_.size());
  s.running = std::int32_t(running_.size());
  s.free_blocks = kv_.free_device_blocks();
  s.num_blocks = kv_.device_blocks();
  s.tiers = kv_.stats();
  s.cost_model = kv_.cost_model();
  s.cached_conversations = std::int32_t(std::int64_t(kv_.size()) - s.tiers.unnamed_paths);  // named ones
  s.evicted_conversations = s.tiers.evicted_conversations;
  s.pinned_blocks = kv_.pinned_blocks();
  s.pin_cap_blocks = kv_.pin_cap_blocks();
  return s;
}

}  // namespace pensieve::actors
