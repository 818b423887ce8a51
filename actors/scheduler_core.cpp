#include "actors/scheduler_core.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace pensieve::actors {

namespace {

std::int64_t blocks_for(std::int64_t tokens, std::int32_t block_tokens) {
  return (tokens + block_tokens - 1) / block_tokens;
}

// Relative cost of recomputing n tokens of context: the linear layers grow
// with n, attention with n^2 (the 2048 puts the two at par for a 2k context
// on a ~100M model, close enough to rank conversations).
double recompute_cost(std::size_t n) {
  const double t = double(n);
  return t + t * t / 2048.0;
}

}  // namespace

SchedulerCore::SchedulerCore(SchedulerLimits limits)
    : limits_(limits), allocator_(std::max(0, limits.num_blocks)) {
  assert(limits_.block_tokens > 0 && limits_.max_batch_tokens > 0 && limits_.max_running > 0);
}

AdmitStatus SchedulerCore::admit(TurnSpec spec, std::int64_t now_ns) {
  (void)now_ns;
  if (std::int64_t(waiting_.size() + running_.size()) >= limits_.max_admitted) {
    ++stats_.refused_overloaded;
    return AdmitStatus::overloaded;
  }
  const std::int64_t need = std::int64_t(spec.tokens.size()) + std::max(0, spec.sampling.max_tokens);
  if (spec.tokens.empty() || blocks_for(need, limits_.block_tokens) > limits_.num_blocks) {
    return AdmitStatus::too_large;
  }
  auto seq = std::make_unique<Sequence>(Sequence{std::move(spec), next_arrival_++, 0,
                                                 kv::BlockTable(limits_.block_tokens)});
  waiting_.push_back(std::move(seq));
  return AdmitStatus::admitted;
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
  forget_cached(conversation);
}

void SchedulerCore::forget_cached(ConversationId conversation) {
  auto it = cached_.find(conversation);
  if (it == cached_.end()) return;
  release(it->second.table, &freed_since_plan_);
  cached_.erase(it);
}

std::optional<std::vector<std::int32_t>> SchedulerCore::cached_tokens(ConversationId conversation) const {
  auto it = cached_.find(conversation);
  if (it == cached_.end()) return std::nullopt;
  return it->second.tokens;
}

void SchedulerCore::release(kv::BlockTable& table, std::vector<kv::BlockId>* freed) {
  auto gone = table.release(allocator_);
  if (freed) freed->insert(freed->end(), gone.begin(), gone.end());
}

SchedulerCore::Sequence* SchedulerCore::find_running(TurnId turn) {
  for (auto& s : running_) {
    if (s->spec.turn == turn) return s.get();
  }
  return nullptr;
}

void SchedulerCore::attach_cached_kv(Sequence& seq) {
  auto it = cached_.find(seq.spec.conversation);
  if (it == cached_.end()) return;
  const auto& have = it->second.tokens;
  const auto& want = seq.spec.tokens;
  std::size_t common = 0;
  while (common < have.size() && common < want.size() && have[common] == want[common]) ++common;
  // At least the newest token is fed again: its logits pick the next one.
  const std::int64_t keep = std::min<std::int64_t>(std::int64_t(common), std::int64_t(want.size()) - 1);
  seq.table = std::move(it->second.table);
  auto gone = seq.table.truncate(keep, allocator_);
  freed_since_plan_.insert(freed_since_plan_.end(), gone.begin(), gone.end());
  seq.computed = keep;
  seq.reused = std::int32_t(keep);
  cached_.erase(it);
}

bool SchedulerCore::evict_idle(std::int64_t now_ns, IterationPlan&) {
  auto victim = cached_.end();
  double lowest = 0.0;
  for (auto it = cached_.begin(); it != cached_.end(); ++it) {
    const double idle_ns = double(std::max<std::int64_t>(1, now_ns - it->second.last_active_ns));
    const double value = recompute_cost(it->second.tokens.size()) / idle_ns;
    if (victim == cached_.end() || value < lowest) {
      victim = it;
      lowest = value;
    }
  }
  if (victim == cached_.end()) return false;
  release(victim->second.table, &freed_since_plan_);
  cached_.erase(victim);
  ++stats_.evicted_conversations;
  return true;
}

// Preempts the latest-arrived running sequence that arrived after `keep` and
// has no work in this plan: its KV is freed and it waits to be recomputed.
bool SchedulerCore::preempt_latest(const Sequence& keep, IterationPlan& plan) {
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    Sequence& s = **it;
    if (s.arrival <= keep.arrival) return false;
    const bool planned = std::any_of(plan.sequences.begin(), plan.sequences.end(),
                                     [&](const PlannedSequence& p) { return p.turn == s.spec.turn; });
    if (planned) continue;
    release(s.table, &freed_since_plan_);
    s.computed = 0;
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
    if (seq.table.blocks_needed(n, allocator_) <= allocator_.free_blocks()) {
      auto appended = seq.table.append(n, allocator_);
      assert(appended);
      if (appended->copy) plan.copies.push_back(*appended->copy);
      return true;
    }
    if (evict_idle(now_ns, plan)) continue;
    if (preempt_latest(seq, plan)) continue;
    return false;
  }
}

PlannedSequence SchedulerCore::chunk(Sequence& seq, std::int64_t n) const {
  PlannedSequence p;
  p.turn = seq.spec.turn;
  const auto begin = seq.spec.tokens.begin() + seq.computed;
  p.tokens.assign(begin, begin + n);
  p.start_pos = std::int32_t(seq.computed);
  p.blocks.assign(seq.table.blocks().begin(), seq.table.blocks().end());
  p.sample = seq.computed + n == std::int64_t(seq.spec.tokens.size());
  if (!seq.sampler_ready) {
    p.new_sampler = seq.spec.sampling;
    p.sampler_context = seq.spec.tokens;
  }
  return p;
}

void SchedulerCore::finish(Sequence& seq, model::FinishReason reason, std::int64_t now_ns,
                           IterationPlan*, std::vector<TurnEvent>& events) {
  TurnEvent e{TurnEvent::Kind::finished, seq.spec.turn};
  e.finish = reason;
  events.push_back(std::move(e));
  if (seq.sampler_ready) released_since_plan_.push_back(seq.spec.turn);
  if (limits_.keep_kv && seq.spec.keep_kv && seq.computed > 0) {
    forget_cached(seq.spec.conversation);  // a stale entry, if any
    CachedKv entry{{seq.spec.tokens.begin(), seq.spec.tokens.begin() + seq.computed},
                   std::move(seq.table), now_ns};
    cached_.emplace(seq.spec.conversation, std::move(entry));
  } else {
    release(seq.table, &freed_since_plan_);
  }
}

IterationPlan SchedulerCore::plan(std::int64_t now_ns, std::vector<TurnEvent>& events) {
  IterationPlan plan;
  plan.index = next_iteration_;
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
  std::int64_t budget = limits_.max_batch_tokens;
  // Decodes first: a running sequence never waits behind a prefill.
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (std::int64_t(s.spec.tokens.size()) - s.computed != 1) continue;
    if (!reserve(s, 1, now_ns, plan)) continue;
    plan.sequences.push_back(chunk(s, 1));
    s.sampler_ready = true;
    s.computed += 1;
    --budget;
    ++plan.decode_tokens;
  }
  // Then prefill chunks: running sequences still prefilling, then new turns.
  auto prefill = [&](Sequence& s) {
    const std::int64_t remaining = std::int64_t(s.spec.tokens.size()) - s.computed;
    const std::int64_t n = std::min(remaining, budget);
    if (n <= 0 || !reserve(s, n, now_ns, plan)) return false;
    if (!s.started) {
      TurnEvent e{TurnEvent::Kind::started, s.spec.turn};
      e.cached_tokens = s.reused;
      events.push_back(std::move(e));
      s.started = true;
      stats_.reused_tokens += s.reused;
    }
    plan.sequences.push_back(chunk(s, n));
    s.sampler_ready = true;
    s.computed += n;
    budget -= n;
    plan.prefill_tokens += std::int32_t(n);
    return true;
  };
  for (std::size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence& s = *running_[i];
    if (std::int64_t(s.spec.tokens.size()) - s.computed > 1) prefill(s);
  }
  while (budget > 0 && !waiting_.empty() && std::int32_t(running_.size()) < limits_.max_running) {
    // Keep running_ in arrival order (a preempted turn returns among newer ones).
    auto owned = std::move(waiting_.front());
    waiting_.pop_front();
    Sequence& s = *owned;
    auto pos = std::find_if(running_.begin(), running_.end(),
                            [&](const auto& r) { return r->arrival > s.arrival; });
    running_.insert(pos, std::move(owned));
    if (s.computed == 0 && s.table.num_tokens() == 0) attach_cached_kv(s);
    if (!prefill(s)) break;  // no room now; it keeps its place among the running
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
                             std::int64_t now_ns, std::vector<TurnEvent>& events) {
  (void)plan;
  for (const SampleResult& r : samples) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s->spec.turn == r.turn; });
    if (it == running_.end()) continue;  // preempted or cancelled since
    Sequence& s = **it;
    s.spec.tokens.push_back(r.token.token);
    ++s.generated;
    TurnEvent e{TurnEvent::Kind::token, s.spec.turn};
    e.token = r.token;
    e.finish = r.finish;
    events.push_back(std::move(e));
    if (r.finish != model::FinishReason::none) {
      finish(s, r.finish, now_ns, nullptr, events);
      running_.erase(it);
    }
  }
}

void SchedulerCore::fail(const IterationPlan& plan, const std::string& error, std::vector<TurnEvent>& events) {
  for (const PlannedSequence& p : plan.sequences) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](const auto& s) { return s->spec.turn == p.turn; });
    if (it == running_.end()) continue;
    TurnEvent e{TurnEvent::Kind::failed, p.turn};
    e.error = error;
    events.push_back(std::move(e));
    if ((*it)->sampler_ready) released_since_plan_.push_back(p.turn);
    release((*it)->table, &freed_since_plan_);
    running_.erase(it);
  }
}

SchedulerStats SchedulerCore::stats() const {
  SchedulerStats s = stats_;
  s.waiting = std::int32_t(waiting_.size());
  s.running = std::int32_t(running_.size());
  s.cached_conversations = std::int32_t(cached_.size());
  s.free_blocks = allocator_.free_blocks();
  s.num_blocks = allocator_.num_blocks();
  return s;
}

}  // namespace pensieve::actors
