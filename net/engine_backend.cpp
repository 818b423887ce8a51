#include "net/engine_backend.hpp"

#include <boost/asio/this_coro.hpp>

namespace pensieve::net {

namespace asio = boost::asio;

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
  auto call =
      TurnCall::start(engine_, executor, turn_request(request, next_seed()), options_.limits);
  if (!call) co_return api_error(call.error());
  std::vector<GenerationDelta> out;
  TurnWrite write = [&](std::span<actors::TurnDelta> deltas) -> asio::awaitable<bool> {
    out.clear();
    for (auto& d : deltas) out.push_back(generation_delta(d));
    const DeltaSink::Batch batch(out);
    co_return co_await sink(batch);
  };
  const actors::TurnResult result = co_await call->drain(
      std::move(write), TurnCallOptions{options_.request_timeout, options_.metrics});
  if (!result) co_return api_error(result.error());
  GenerationResult g;
  g.finish_reason = result->finish == model::FinishReason::length ? "length" : "stop";
  g.prompt_tokens = result->prompt_tokens;
  g.completion_tokens = result->completion_tokens;
  g.cached_tokens = result->cached_tokens;
  g.truncated_tokens = result->truncated_tokens;
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
  auto kv = co_await engine_.kv_placement(tenant, id);
  if (!kv) co_return api_error(kv.error());
  v.kv = ConversationKv{kv->block_tokens, kv->device, kv->host, kv->disk, kv->dropped, kv->moving};
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
  const actors::ConversationCounts c = engine_.conversation_counts();
  g.live_conversations = c.live;
  g.journaled_conversations = c.journaled;
  g.unloaded_conversations = c.unloaded_total;
  g.reloaded_conversations = c.reloaded_total;
  g.expired_conversations = c.expired_total;
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
  g.disk_scan_slots = std::int64_t(t.disk_scan_slots);
  g.disk_scan_labelled = std::int64_t(t.disk_scan_labelled);
  g.disk_scan_empty = std::int64_t(t.disk_scan_empty);
  g.disk_scan_corrupt = std::int64_t(t.disk_scan_corrupt);
  g.disk_scan_foreign = std::int64_t(t.disk_scan_foreign);
  g.disk_scan_unreadable = std::int64_t(t.disk_scan_unreadable);
  g.disk_found_paths = std::int64_t(t.found_disk_paths);
  g.disk_found_chunks = std::int64_t(t.found_disk_chunks);
  g.disk_found_discarded = std::int64_t(t.found_disk_discarded);
  g.disk_found_front_missing = std::int64_t(t.found_disk_front_missing);
  g.disk_restores_read = std::int64_t(t.restore_chunks);
  g.disk_restores_recomputed = std::int64_t(t.restores_recomputed);
  g.disk_read_seconds_per_chunk = t.disk_read_s_per_chunk;
  if (t.disk_slots > 0) g.disk_restore_mode = actors::disk_restore_mode_name(engine_.options().kv_cache.disk_restore);
  g.prefix_queried_tokens = t.prefix_queried_tokens;
  g.prefix_matched_tokens = t.prefix_matched_tokens;
  g.unnamed_paths = t.unnamed_paths;
  g.shared_blocks = t.shared_device_blocks;
  g.pinned_chunks = t.pinned_chunks;
  g.pinned_blocks = s.pinned_blocks;
  g.pin_cap_blocks = s.pin_cap_blocks;
  g.refused_pins = std::int64_t(s.refused_pins);
  g.cost_per_token_s = s.cost_model.per_token;
  g.cost_per_token_pair_s = s.cost_model.per_token_pair;
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
