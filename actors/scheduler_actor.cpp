#include "actors/scheduler_actor.hpp"

#include "runtime/clock.hpp"
#include "runtime/trace_names.hpp"

#include <cstdio>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <map>
#include <set>

namespace pensieve::actors {

namespace asio = boost::asio;

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Scheduler::State {
  State(const asio::any_io_executor& ex, SchedulerConfig c, rt::ActorRef<GpuWorkerMsg> w)
      : core(c.options, c.kv_sizes, c.kv_cache), config(std::move(c)), worker(std::move(w)), wake(ex), loop_done(ex) {
    wake.expires_at(asio::steady_timer::time_point::max());
    loop_done.expires_at(asio::steady_timer::time_point::max());
    core.restore_disk_paths(config.restored_kv);
    config.restored_kv = {};
  }

  struct Route {
    std::shared_ptr<TurnEventChannel> events;
    ConversationId conversation;
    // Request phases for the trace: admitted, first planned, first token.
    std::int64_t admitted_ns = 0, planned_ns = 0, first_token_ns = 0;
  };

  void trace_point(std::string_view name, TurnId turn, const Route& route, std::int64_t at) const {
    if (!config.tracer) return;
    config.tracer->record({rt::SpanKind::request, rt::trace_names::scheduler, name, route.conversation.value, at,
                           at, turn.value});
  }
  void trace_phase(std::string_view name, TurnId turn, std::int64_t from, std::int64_t to) const {
    if (!config.tracer || from == 0 || to < from) return;
    config.tracer->record({rt::SpanKind::request, rt::trace_names::scheduler, name, turn.value, from, to, turn.value});
  }

  // computed_ns: when the events' tokens were sampled (0: now); the front
  // ends' latency samples start there.
  void dispatch(std::vector<TurnUpdate>& events, std::int64_t computed_ns = 0);
  void cancel(TurnId turn);
  asio::awaitable<rt::AskResult<SwapTicket>> submit_transfers(const IterationPlan& plan);
  // A message that may make work runnable. `woken` keeps it for a loop that
  // is not waiting yet (it is awaiting the worker or the swap engine).
  void notify() {
    woken = true;
    wake.cancel();
  }
  asio::awaitable<void> loop();
  // Answers a flush once its last plan's step is done or its time is up.
  void check_flush();

  struct PendingFlush {
    std::int64_t deadline_ns = 0;
    std::int64_t started_ns = 0;
    std::uint64_t spills_before = 0;
    rt::Reply<KvFlushReport> reply;
  };

  SchedulerCore core;
  SchedulerConfig config;
  rt::ActorRef<GpuWorkerMsg> worker;
  std::map<TurnId, Route> routes;
  asio::steady_timer wake;       // cancelled to wake an idle loop
  asio::steady_timer loop_done;  // cancelled when the loop has ended
  // Cancels of turns not admitted yet (their conversation is still
  // preparing them); bounded: the oldest are forgotten first, and a turn
  // whose client left is cancelled again by its conversation.
  std::set<TurnId> early_cancels;
  std::uint64_t loop_passes = 0;
  bool woken = false;
  bool stopping = false;
  bool loop_ended = false;
  std::optional<PendingFlush> flush;
};

void Scheduler::State::check_flush() {
  if (!flush || !core.kv_flush()) return;
  const KvFlushStep& step = *core.kv_flush();
  const std::int64_t now = now_ns();
  if (!step.done() && now < flush->deadline_ns) return;
  KvFlushReport r;
  r.chunks_written = std::int64_t(core.stats().tiers.spill_chunks - flush->spills_before);
  r.chunks_left = step.left;
  r.waiting = step.waiting + step.started;
  r.timed_out = !step.done();
  r.seconds = double(now - flush->started_ns) * 1e-9;
  flush->reply.send(r);
  flush.reset();
}

void Scheduler::State::cancel(TurnId turn) {
  if (routes.contains(turn)) {
    core.cancel(turn);
    notify();
    return;
  }
  constexpr std::size_t kMaxEarlyCancels = 4096;
  early_cancels.insert(turn);
  if (early_cancels.size() > kMaxEarlyCancels) early_cancels.erase(early_cancels.begin());
}

void Scheduler::State::dispatch(std::vector<TurnUpdate>& events, std::int64_t computed_ns) {
  const std::int64_t now = rt::steady_now_ns();
  for (TurnUpdate& u : events) {
    auto it = routes.find(u.turn);
    if (it == routes.end()) continue;
    Route& r = it->second;
    const bool last = ends_turn(u.event);
    if (auto* delta = std::get_if<TurnDelta>(&u.event)) {
      delta->computed_ns = computed_ns > 0 ? computed_ns : now;
      if (r.first_token_ns == 0) {
        r.first_token_ns = now;
        trace_phase(rt::trace_names::phase_queue, u.turn, r.admitted_ns, r.planned_ns);
        trace_phase(rt::trace_names::phase_prefill, u.turn, r.planned_ns, now);
        trace_point(rt::trace_names::request_first_token, u.turn, r, now);
      }
    }
    if (auto* done = std::get_if<TurnDone>(&u.event))
      done->timings = {r.admitted_ns, r.planned_ns, r.first_token_ns, now};
    if (last) {
      trace_phase(rt::trace_names::phase_decode, u.turn, r.first_token_ns, now);
      trace_point(rt::trace_names::request_done, u.turn, r, now);
    }
    // Sized for the whole turn: never full; closed only if its reader left.
    (void)r.events->try_send(boost::system::error_code{}, std::move(u.event));
    if (last) routes.erase(it);
  }
  events.clear();
}

asio::awaitable<rt::AskResult<SwapTicket>> Scheduler::State::submit_transfers(const IterationPlan& plan) {
  if (!config.swap) co_return rt::ask_error<SwapTicket>(rt::AskError::actor_stopped);
  SwapIteration request;
  request.iteration = plan.index;
  request.transfers = plan.transfers;  // the worker reads swap_in from the plan too
  co_return co_await config.swap.ask(std::move(request));
}

asio::awaitable<void> Scheduler::State::loop() {
  std::vector<TurnUpdate> events;
  while (!stopping) {
    ++loop_passes;
    woken = false;
    IterationPlan plan = core.plan(now_ns(), events);
    check_flush();
    dispatch(events);
    // Every plan's tier moves go out, also a plan with nothing to run.
    std::vector<rt::Event> layer_ready;
    bool swap_ok = true;
    if (!plan.transfers.empty()) {
      auto ticket = co_await submit_transfers(plan);
      swap_ok = ticket.has_value();
      if (swap_ok) layer_ready = std::move(ticket->layer_ready);
    }
    if (!swap_ok && !plan.empty()) {
      core.fail(plan, "the swap engine is gone", events);
      dispatch(events);
      continue;
    }
    if (plan.empty()) core.carry_over(plan);
    if (plan.empty() && !layer_ready.empty()) {
      // The core counts on swap_in having landed before its next plan.
      co_await layer_ready.back().wait(wake.get_executor(), asio::use_awaitable);
      continue;
    }
    if (plan.empty()) {
      // Nothing runnable: sleep until a message arrives (what frees blocked
      // work, a cancel or finished transfers, is a message too).
      if (woken) continue;
      // A flush in progress is answered at its deadline at the latest.
      wake.expires_at(flush ? asio::steady_timer::time_point(std::chrono::nanoseconds(flush->deadline_ns))
                            : asio::steady_timer::time_point::max());
      co_await wake.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    const std::int64_t start = rt::steady_now_ns();
    for (const PlannedSequence& p : plan.sequences) {
      auto r = routes.find(p.turn);
      if (r != routes.end() && r->second.planned_ns == 0) r->second.planned_ns = start;
    }
    IterationPlan sent = plan;  // the core needs the plan's turns back if the batch fails
    RunBatch run{std::move(sent), {}, layer_ready};
    auto outcome = co_await worker.ask(std::move(run));
    if (!layer_ready.empty()) {
      // A pass that failed early may not have waited for every layer: the
      // swap-in must still land before the next plan.
      co_await layer_ready.back().wait(wake.get_executor(), asio::use_awaitable);
    }
    if (!outcome) {
      core.fail(plan, std::string("the GPU worker is gone: ") + std::string(rt::to_string(outcome.error())), events);
    } else if (!outcome->error.empty()) {
      core.fail(plan, "the forward pass failed: " + outcome->error, events);
    } else {
      core.complete(plan, outcome->samples, now_ns(), events);
    }
    dispatch(events, outcome ? outcome->sampled_ns : 0);
    // Let the conversations pass this iteration's tokens on before planning
    // the next one: they share this thread, and each token's delivery
    // otherwise waits for the whole plan.
    co_await asio::post(wake.get_executor(), asio::use_awaitable);
    if (config.tracer && config.tracer->enabled()) {
      char detail[64];
      std::snprintf(detail, sizeof detail, "seqs=%zu prefill=%d decode=%d", plan.sequences.size(),
                    plan.prefill_tokens, plan.decode_tokens);
      rt::SpanRecord span{rt::SpanKind::iteration, rt::trace_names::scheduler, "iteration", plan.index, start,
                          rt::steady_now_ns()};
      span.detail = detail;
      config.tracer->record(span);
    }
    if (config.on_iteration) {
      IterationRecord r{plan.index, std::int32_t(plan.sequences.size()), plan.decode_tokens, plan.prefill_tokens,
                        core.allocator().free_blocks(), outcome ? outcome->compute_ms : 0.0};
      config.on_iteration(r);
    }
  }
  // Stopping: every turn still routed ends now.
  for (auto& [turn, route] : routes) {
    TurnEvent failed = TurnFailed{TurnError{TurnErrorKind::internal, "the server is stopping"}};
    (void)route.events->try_send(boost::system::error_code{}, std::move(failed));
  }
  routes.clear();
  if (flush) {
    KvFlushReport cut;
    cut.timed_out = true;
    flush->reply.send(cut);
    flush.reset();
  }
  loop_ended = true;
  loop_done.cancel();
}

namespace {

struct SchedulerHandler {
  std::shared_ptr<Scheduler::State> state;

  void operator()(AdmitTurn m) {
    const TurnId turn = m.spec.turn;
    const ConversationId conversation = m.spec.conversation;
    if (state->stopping) {
      m.reply.send(AdmitStatus::overloaded);
      return;
    }
    const AdmitStatus status = state->core.admit(std::move(m.spec), now_ns());
    if (status == AdmitStatus::admitted) {
      Scheduler::State::Route route{std::move(m.events), conversation, rt::steady_now_ns()};
      state->trace_point(rt::trace_names::request_arrival, turn, route, route.admitted_ns);
      state->routes[turn] = std::move(route);
      if (state->early_cancels.erase(turn) > 0) state->core.cancel(turn);
      state->notify();
    }
    m.reply.send(status);
  }
  void operator()(CancelTurn m) { state->cancel(m.turn); }
  void operator()(DropConversation m) { state->core.drop_conversation(m.conversation); }
  void operator()(ClearUnnamedPaths) { state->core.clear_unnamed_paths(); }
  void operator()(UnpinPrefixes m) {
    const std::int64_t blocks = state->core.unpin(m.ns);
    if (blocks > 0) state->notify();  // a turn waiting for room may fit now
    m.reply.send(blocks);
  }
  void operator()(GetSchedulerStats m) {
    SchedulerStats stats = state->core.stats();
    stats.loop_passes = state->loop_passes;
    m.reply.send(stats);
  }
  void operator()(GetConversationChunks m) { m.reply.send(state->core.cached_chunks(m.conversation)); }
  void operator()(FlushKvToDisk m) {
    if (state->stopping || state->flush) {
      m.reply.send(KvFlushReport{});  // one at a time; none once stopping
      return;
    }
    state->flush = Scheduler::State::PendingFlush{m.deadline_ns, now_ns(), state->core.stats().tiers.spill_chunks,
                                                  std::move(m.reply)};
    state->core.start_kv_flush();
    state->notify();
  }
  void operator()(TransfersFinished m) {
    state->core.transfers_done(m.done);
    state->notify();  // a turn waiting for its restores may run now
  }
};

}  // namespace

Scheduler::Scheduler(rt::TaskGroup& group, const asio::any_io_executor& executor, SchedulerConfig config,
                     rt::ActorRef<GpuWorkerMsg> worker)
    : state_(std::make_shared<State>(executor, std::move(config), std::move(worker))) {
  ref_ = rt::spawn_actor<SchedulerMsg>(group, executor, SchedulerHandler{state_},
                                       {.name = "scheduler", .mailbox_capacity = state_->config.mailbox_messages, .tracer = state_->config.tracer});
  group.spawn(executor, [](std::shared_ptr<State> s) -> asio::awaitable<void> { co_await s->loop(); }(state_));
}

asio::awaitable<void> Scheduler::stop() {
  auto state = state_;
  co_await asio::post(state->wake.get_executor(), asio::use_awaitable);  // onto the scheduler's thread
  state->stopping = true;
  state->notify();
  if (!state->loop_ended) {
    co_await state->loop_done.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  co_await ref_.stop(rt::StopMode::reject);
}

}  // namespace pensieve::actors
