#include "net/engine_backend.hpp"

#include "runtime/clock.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

namespace pensieve::net {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

model::SamplingParams sampling_params(const ChatRequest& r, std::uint64_t seed) {
  model::SamplingParams p;
  p.temperature = r.temperature;
  p.top_k = r.top_k;
  p.top_p = r.top_p;
  p.min_p = r.min_p;
  p.repetition_penalty = r.repetition_penalty;
  p.presence_penalty = r.presence_penalty;
  p.frequency_penalty = r.frequency_penalty;
  p.seed = seed;
  p.logprobs = r.logprobs;
  p.top_logprobs = r.top_logprobs;
  p.stop_strings = r.stop;
  p.max_tokens = r.max_tokens;
  p.min_tokens = r.min_tokens;
  p.ignore_eos = r.ignore_eos;
  return p;
}

ApiError api_error(const actors::TurnError& e) {
  switch (e.kind) {
    case actors::TurnErrorKind::invalid_request: return bad_request(e.message);
    case actors::TurnErrorKind::not_found: return ApiError{404, "invalid_request_error", e.message, {}, "not_found"};
    case actors::TurnErrorKind::overloaded:
      return ApiError{503, "server_error", e.message, {}, "overloaded"};
    case actors::TurnErrorKind::internal: break;
  }
  return ApiError{500, "server_error", e.message, {}, {}};
}

GenerationDelta EngineBackend::generation_delta(actors::TurnDelta& d) const {
  GenerationDelta delta{std::move(d.text), {}};
  for (const auto& t : d.tokens) {
    TokenLogprob lp{engine_.token_text(t.token), t.logprob, {}};
    for (const auto& alt : t.top) lp.top.emplace_back(engine_.token_text(alt.token), alt.logprob);
    delta.logprobs.push_back(std::move(lp));
  }
  return delta;
}

std::uint64_t EngineBackend::next_seed() {
  std::lock_guard lock(seeds_mutex_);
  return seeds_();
}

asio::awaitable<ApiResult<GenerationResult>> EngineBackend::generate(const ChatRequest& request, DeltaSink sink) {
  const auto executor = co_await asio::this_coro::executor;
  model::SamplingParams sampling = sampling_params(request, request.seed ? *request.seed : next_seed());
  actors::EngineResult<actors::TurnStream> started = actors::TurnError{};
  if (request.prompt) {
    started = engine_.start_completion(executor, *request.prompt, std::move(sampling));
  } else {
    std::vector<model::ChatMessage> messages;
    for (const auto& m : request.messages) messages.push_back({m.role, m.content});
    if (request.conversation_id) {
      if (!engine_.find_conversation(request.tenant, *request.conversation_id)) {
        auto created = engine_.create_conversation(request.tenant, *request.conversation_id);
        // Lost a race with another request creating it: fine.
        if (!created && !engine_.find_conversation(request.tenant, *request.conversation_id)) {
          co_return api_error(created.error());
        }
      }
      started = engine_.start_turn(executor, request.tenant, *request.conversation_id, std::move(messages),
                                   std::move(sampling));
    } else {
      started = engine_.start_stateless_turn(executor, actors::TurnRequest{std::move(messages), std::move(sampling)});
    }
  }
  if (!started) co_return api_error(started.error());
  auto stream = std::make_shared<actors::TurnStream>(std::move(*started));

  // The request timeout cancels the turn; the reply says why.
  auto timed_out = std::make_shared<bool>(false);
  asio::steady_timer timer(executor);
  timer.expires_after(options_.request_timeout);
  timer.async_wait([weak = std::weak_ptr<actors::TurnStream>(stream), timed_out](boost::system::error_code ec) {
    if (ec) return;
    *timed_out = true;
    if (auto s = weak.lock()) s->cancel();
  });

  const auto start = Clock::now();
  auto last = start;
  bool first = true;
  bool listening = true;
  // The deltas that go out in one write: the one awaited and every one queued
  // behind it (the engine got ahead of the socket), each with its time.
  std::vector<GenerationDelta> batch;
  std::vector<std::int64_t> computed_ns;
  std::int64_t taken_ns = 0;
  auto take = [&](actors::TurnDelta& d) {
    if (options_.metrics) {
      const auto now = Clock::now();
      if (first) {
        options_.metrics->ttft(std::chrono::duration<double>(now - start).count());
      } else {
        options_.metrics->inter_token(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    first = false;
    if (!listening) return;  // cancelled: drain to the turn's end
    computed_ns.push_back(d.computed_ns);
    batch.push_back(generation_delta(d));
  };
  for (;;) {
    batch.clear();
    computed_ns.clear();
    auto d = co_await stream->next();
    if (!d) break;
    taken_ns = rt::steady_now_ns();
    take(*d);
    for (auto more = stream->try_next(); more; more = stream->try_next()) take(*more);
    if (batch.empty()) continue;
    const DeltaSink::Batch deltas(batch);
    const bool keep_going = co_await sink(deltas);  // its own statement: GCC 12
    if (options_.metrics && keep_going) {
      // Every delta's own sample, taken at the write that carried it.
      const std::int64_t written_ns = rt::steady_now_ns();
      for (const std::int64_t c : computed_ns) {
        if (c > 0) options_.metrics->frontend_latency(double(written_ns - c) * 1e-9, double(taken_ns - c) * 1e-9);
      }
    }
    if (!keep_going) {
      listening = false;
      stream->cancel();
    }
  }
  timer.cancel();
  const actors::TurnResult& result = stream->result();
  if (!result) co_return api_error(result.error());
  if (*timed_out) {
    ApiError timeout{504, "server_error",
                     "the request timed out after " + std::to_string(options_.request_timeout.count()) + " ms", {},
                     "timeout"};
    co_return timeout;
  }
  if (options_.metrics) options_.metrics->tokens(result->prompt_tokens, result->completion_tokens, result->cached_tokens);
  GenerationResult g;
  g.finish_reason = result->finish == model::FinishReason::length ? "length" : "stop";
  g.prompt_tokens = result->prompt_tokens;
  g.completion_tokens = result->completion_tokens;
  g.cached_tokens = result->cached_tokens;
  co_return g;
}

namespace {

ConversationView view_of(const actors::ConversationInfo& info) { return ConversationView{info.id, info.created_unix_s, {}}; }

}  // namespace

asio::awaitable<ApiResult<ConversationView>> EngineBackend::create_conversation(const std::string& tenant,
                                                                                std::optional<std::string> id) {
  auto created = engine_.create_conversation(tenant, std::move(id));
  if (!created) co_return api_error(created.error());
  co_return view_of(*created);
}

asio::awaitable<ApiResult<ConversationView>> EngineBackend::get_conversation(const std::string& tenant,
                                                                             const std::string& id) {
  auto info = engine_.find_conversation(tenant, id);
  if (!info) co_return api_error(actors::TurnError{actors::TurnErrorKind::not_found, "no conversation '" + id + "'"});
  auto snapshot = co_await engine_.snapshot(tenant, id);
  if (!snapshot) co_return api_error(snapshot.error());
  ConversationView v = view_of(*info);
  for (const auto& m : snapshot->messages) v.messages.push_back({m.role, m.content});
  co_return v;
}

std::vector<ConversationView> EngineBackend::list_conversations(const std::string& tenant) {
  std::vector<ConversationView> out;
  for (const auto& info : engine_.list_conversations(tenant)) out.push_back(view_of(info));
  return out;
}

bool EngineBackend::delete_conversation(const std::string& tenant, const std::string& id) {
  return engine_.delete_conversation(tenant, id);
}

asio::awaitable<EngineGauges> EngineBackend::gauges() {
  const actors::SchedulerStats s = co_await engine_.stats();
  EngineGauges g;
  g.waiting = s.waiting;
  g.running = s.running;
  g.cached_conversations = s.cached_conversations;
  g.kv_blocks_free = s.free_blocks;
  g.kv_blocks_total = s.num_blocks;
  g.preemptions = std::int64_t(s.preemptions);
  g.evicted_conversations = std::int64_t(s.evicted_conversations);
  g.refused_overloaded = std::int64_t(s.refused_overloaded);
  g.iterations = std::int64_t(s.iterations);
  g.prefill_tokens = s.prefill_tokens;
  g.decode_tokens = s.decode_tokens;
  g.reused_tokens = s.reused_tokens;
  const actors::TierStats& t = s.tiers;
  g.host_slots_free = t.free_host_slots;
  g.host_slots_total = t.host_slots;
  g.disk_slots_free = t.free_disk_slots;
  g.disk_slots_total = t.disk_slots;
  g.hit_tokens_device = t.hit_tokens_device;
  g.hit_tokens_host = t.hit_tokens_host;
  g.hit_tokens_disk = t.hit_tokens_disk;
  g.recomputed_tokens = t.recomputed_tokens;
  g.corrupt_chunks = std::int64_t(t.corrupt_chunks);
  // Drops by why, so the reasons of one tier add up to its evictions: a
  // device chunk dropped with no lower tier (device only), or because every
  // host slot was busy, or it was colder than every host chunk, or while a
  // spill that would have made room was still running; a disk copy dropped
  // because no host slot was free for its restore, or for any other reason.
  const std::uint64_t device_dropped_tiered =
      t.device_dropped_host_busy + t.device_dropped_coldest + t.device_dropped_spilling;
  g.evictions = {
      {"tier=\"device\",reason=\"reclaimed\"", std::int64_t(t.device_reclaimed)},
      {"tier=\"device\",reason=\"to_host\"", std::int64_t(t.device_evicted_to_host)},
      {"tier=\"device\",reason=\"dropped_no_lower_tier\"", std::int64_t(t.device_dropped - device_dropped_tiered)},
      {"tier=\"device\",reason=\"dropped_host_busy\"", std::int64_t(t.device_dropped_host_busy)},
      {"tier=\"device\",reason=\"dropped_coldest\"", std::int64_t(t.device_dropped_coldest)},
      {"tier=\"device\",reason=\"dropped_while_spilling\"", std::int64_t(t.device_dropped_spilling)},
      {"tier=\"host\",reason=\"reclaimed\"", std::int64_t(t.host_reclaimed)},
      {"tier=\"host\",reason=\"dropped\"", std::int64_t(t.host_dropped)},
      {"tier=\"disk\",reason=\"dropped\"", std::int64_t(t.disk_dropped - t.restores_given_up)},
      {"tier=\"disk\",reason=\"restore_given_up\"", std::int64_t(t.restores_given_up)},
  };
  const actors::SwapStats w = co_await engine_.swap_stats();
  g.swap_in_bytes = w.swap_in_bytes;
  g.swap_out_bytes = w.swap_out_bytes;
  g.spill_bytes = w.spill_bytes;
  g.restore_bytes = w.restore_bytes;
  g.swap_in_seconds = double(w.swap_in_ns) * 1e-9;
  g.swap_out_seconds = double(w.swap_out_ns) * 1e-9;
  g.spill_seconds = double(w.spill_ns) * 1e-9;
  g.restore_seconds = double(w.restore_ns) * 1e-9;
  co_return g;
}

}  // namespace pensieve::net
