#include "net/metrics.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace pensieve::net {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void gauge(std::string& out, std::string_view name, std::string_view help, std::string_view type, double v,
           std::string_view labels = {}) {
  out += "# HELP " + std::string(name) + " " + std::string(help) + "\n";
  out += "# TYPE " + std::string(name) + " " + std::string(type) + "\n";
  out += std::string(name) + std::string(labels) + " " + number(v) + "\n";
}

// The disk KV tier's start-up scan and restore rule (none without a disk tier).
std::string disk_tier_metrics(const EngineGauges& e) {
  std::string out;
  if (e.disk_restore_mode.empty()) return out;
  out += "# HELP pensieve_kv_disk_scan_slots Disk KV tier slots the start-up scan read, by what they held.\n"
         "# TYPE pensieve_kv_disk_scan_slots gauge\n";
  const std::pair<const char*, std::int64_t> scan[] = {{"chunk", e.disk_scan_labelled},
                                                       {"empty", e.disk_scan_empty},
                                                       {"corrupt", e.disk_scan_corrupt},
                                                       {"foreign", e.disk_scan_foreign},
                                                       {"unreadable", e.disk_scan_unreadable}};
  for (const auto& [result, n] : scan) {
    out += "pensieve_kv_disk_scan_slots{result=\"" + std::string(result) + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP pensieve_kv_disk_found_chunks The scan's chunks of this model: registered in the prefix index, or "
         "discarded (earlier chunks of their path gone, duplicates).\n"
         "# TYPE pensieve_kv_disk_found_chunks gauge\n";
  out += "pensieve_kv_disk_found_chunks{state=\"registered\"} " + std::to_string(e.disk_found_chunks) + "\n";
  out += "pensieve_kv_disk_found_chunks{state=\"discarded\"} " + std::to_string(e.disk_found_discarded) + "\n";
  gauge(out, "pensieve_kv_disk_found_paths", "Cached paths the start-up scan's chunks were registered as.", "gauge",
        double(e.disk_found_paths));
  gauge(out, "pensieve_kv_disk_found_front_missing_paths",
        "Of those, paths whose first chunks were gone, placed by a journaled history (their front is recomputed).",
        "gauge", double(e.disk_found_front_missing));
  out += "# HELP pensieve_kv_disk_restores_total Chunks found only on disk when a turn needed them: read back, or "
         "recomputed (the restore rule, --kv-disk-restore).\n"
         "# TYPE pensieve_kv_disk_restores_total counter\n";
  out += "pensieve_kv_disk_restores_total{choice=\"read\"} " + std::to_string(e.disk_restores_read) + "\n";
  out += "pensieve_kv_disk_restores_total{choice=\"recompute\"} " + std::to_string(e.disk_restores_recomputed) +
         "\n";
  gauge(out, "pensieve_kv_disk_read_seconds_per_chunk",
        "Measured time to read one chunk back from disk (moving average; 0: none read yet).", "gauge",
        e.disk_read_seconds_per_chunk);
  gauge(out, "pensieve_kv_disk_restore_mode", "The restore rule in force (--kv-disk-restore).", "gauge", 1.0,
        "{mode=\"" + e.disk_restore_mode + "\"}");
  return out;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[std::size_t(at)];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string_view name, std::string& out) const {
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += std::string(name) + "_bucket{le=\"" + number(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += std::string(name) + "_sum " + number(sum_) + "\n";
  out += std::string(name) + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      inter_token_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}),
      turn_queue_({0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      turn_prefill_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      turn_decode_({0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}),
      batch_sequences_({1, 2, 4, 8, 16, 32, 64, 128, 256}),
      batch_tokens_({1, 4, 16, 64, 128, 256, 512, 1024, 2048, 4096}),
      frontend_({0.00005, 0.0001, 0.00015, 0.0002, 0.0003, 0.0004, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.005, 0.01,
                 0.025, 0.05, 0.1, 0.25, 1}) {}

double Histogram::quantile_bound(double q) const {
  if (count_ == 0) return 0;
  const double want = q * double(count_);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    if (double(cumulative) >= want) return bounds_[i];
  }
  return std::numeric_limits<double>::infinity();
}

void ServerMetrics::frontend_latency(double seconds) {
  std::lock_guard lock(mutex_);
  frontend_.observe(seconds);
  if (keep_frontend_samples_) frontend_samples_.push_back(seconds);
}

void ServerMetrics::frontend_latency(double seconds, double taken_seconds) {
  std::lock_guard lock(mutex_);
  frontend_.observe(seconds);
  if (!keep_frontend_samples_) return;
  frontend_samples_.push_back(seconds);
  frontend_taken_samples_.push_back(taken_seconds);
}

std::vector<double> ServerMetrics::frontend_taken_samples() const {
  std::lock_guard lock(mutex_);
  return frontend_taken_samples_;
}

void ServerMetrics::keep_frontend_samples(bool keep) {
  std::lock_guard lock(mutex_);
  keep_frontend_samples_ = keep;
}

std::vector<double> ServerMetrics::frontend_samples() const {
  std::lock_guard lock(mutex_);
  return frontend_samples_;
}

double ServerMetrics::frontend_latency_bound(double q) const {
  std::lock_guard lock(mutex_);
  return frontend_.quantile_bound(q);
}

void ServerMetrics::request(std::string_view route, int status) {
  std::lock_guard lock(mutex_);
  ++requests_[{std::string(route), status}];
}

void ServerMetrics::ttft(double seconds) {
  std::lock_guard lock(mutex_);
  ttft_.observe(seconds);
}

void ServerMetrics::inter_token(double seconds) {
  std::lock_guard lock(mutex_);
  inter_token_.observe(seconds);
}

void ServerMetrics::turn_phases(const actors::TurnTimings& t) {
  const auto seconds = [](std::int64_t from, std::int64_t to) { return double(to - from) * 1e-9; };
  std::lock_guard lock(mutex_);
  if (t.admitted_ns > 0 && t.planned_ns >= t.admitted_ns) turn_queue_.observe(seconds(t.admitted_ns, t.planned_ns));
  if (t.planned_ns > 0 && t.first_token_ns >= t.planned_ns) turn_prefill_.observe(seconds(t.planned_ns, t.first_token_ns));
  if (t.first_token_ns > 0 && t.finished_ns >= t.first_token_ns)
    turn_decode_.observe(seconds(t.first_token_ns, t.finished_ns));
}

void ServerMetrics::tokens(std::int64_t prompt, std::int64_t completion, std::int64_t cached) {
  std::lock_guard lock(mutex_);
  prompt_tokens_ += prompt;
  completion_tokens_ += completion;
  cached_tokens_ += cached;
}

void ServerMetrics::batch(std::int32_t sequences, std::int32_t tokens) {
  std::lock_guard lock(mutex_);
  batch_sequences_.observe(sequences);
  batch_tokens_.observe(tokens);
}

std::string ServerMetrics::render(const EngineGauges& e) const {
  std::lock_guard lock(mutex_);
  std::string out;
  out += "# HELP pensieve_requests_total HTTP requests by route and status.\n";
  out += "# TYPE pensieve_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "pensieve_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  }
  gauge(out, "pensieve_prompt_tokens_total", "Prompt tokens of finished turns.", "counter", double(prompt_tokens_));
  gauge(out, "pensieve_generated_tokens_total", "Tokens generated.", "counter", double(completion_tokens_));
  gauge(out, "pensieve_cached_prompt_tokens_total", "Prompt tokens served from the KV cache.", "counter",
        double(cached_tokens_));
  out += "# HELP pensieve_ttft_seconds Time to first token.\n# TYPE pensieve_ttft_seconds histogram\n";
  ttft_.render("pensieve_ttft_seconds", out);
  out += "# HELP pensieve_inter_token_seconds Time between streamed tokens.\n"
         "# TYPE pensieve_inter_token_seconds histogram\n";
  inter_token_.render("pensieve_inter_token_seconds", out);
  out += "# HELP pensieve_turn_queue_seconds A turn's wait from admission to its first planned iteration.\n"
         "# TYPE pensieve_turn_queue_seconds histogram\n";
  turn_queue_.render("pensieve_turn_queue_seconds", out);
  out += "# HELP pensieve_turn_prefill_seconds A turn's first planned iteration to its first token.\n"
         "# TYPE pensieve_turn_prefill_seconds histogram\n";
  turn_prefill_.render("pensieve_turn_prefill_seconds", out);
  out += "# HELP pensieve_turn_decode_seconds A turn's first token to its end.\n"
         "# TYPE pensieve_turn_decode_seconds histogram\n";
  turn_decode_.render("pensieve_turn_decode_seconds", out);
  out += "# HELP pensieve_batch_sequences Sequences per scheduler iteration.\n"
         "# TYPE pensieve_batch_sequences histogram\n";
  batch_sequences_.render("pensieve_batch_sequences", out);
  out += "# HELP pensieve_batch_tokens Tokens per scheduler iteration.\n# TYPE pensieve_batch_tokens histogram\n";
  batch_tokens_.render("pensieve_batch_tokens", out);
  out += "# HELP pensieve_frontend_latency_seconds From a token being sampled to its bytes on the socket.\n"
         "# TYPE pensieve_frontend_latency_seconds histogram\n";
  frontend_.render("pensieve_frontend_latency_seconds", out);
  gauge(out, "pensieve_queue_waiting", "Turns admitted and waiting.", "gauge", double(e.waiting));
  gauge(out, "pensieve_queue_running", "Turns running.", "gauge", double(e.running));
  gauge(out, "pensieve_cached_conversations", "Idle conversations holding KV.", "gauge", double(e.cached_conversations));
  gauge(out, "pensieve_conversations_live", "Stored conversations in memory.", "gauge", double(e.live_conversations));
  gauge(out, "pensieve_conversations_journaled", "Stored conversations unloaded to the history journal.", "gauge",
        double(e.journaled_conversations));
  gauge(out, "pensieve_conversations_unloaded_total", "Conversations that left memory for the journal.", "counter",
        double(e.unloaded_conversations));
  gauge(out, "pensieve_conversations_reloaded_total", "Conversations loaded back from the journal.", "counter",
        double(e.reloaded_conversations));
  gauge(out, "pensieve_conversations_expired_total", "Conversations deleted by the idle or count limit.", "counter",
        double(e.expired_conversations));
  out += "# HELP pensieve_kv_blocks KV blocks per tier and state.\n# TYPE pensieve_kv_blocks gauge\n";
  out += "pensieve_kv_blocks{tier=\"device\",state=\"free\"} " + std::to_string(e.kv_blocks_free) + "\n";
  out += "pensieve_kv_blocks{tier=\"device\",state=\"used\"} " +
         std::to_string(e.kv_blocks_total - e.kv_blocks_free) + "\n";
  out += "pensieve_kv_blocks{tier=\"host\",state=\"free\"} " + std::to_string(e.host_slots_free) + "\n";
  out += "pensieve_kv_blocks{tier=\"host\",state=\"used\"} " +
         std::to_string(e.host_slots_total - e.host_slots_free) + "\n";
  out += "pensieve_kv_blocks{tier=\"disk\",state=\"free\"} " + std::to_string(e.disk_slots_free) + "\n";
  out += "pensieve_kv_blocks{tier=\"disk\",state=\"used\"} " +
         std::to_string(e.disk_slots_total - e.disk_slots_free) + "\n";
  out += "# HELP pensieve_swap_bytes_total Bytes moved between KV tiers, by direction.\n"
         "# TYPE pensieve_swap_bytes_total counter\n";
  out += "pensieve_swap_bytes_total{direction=\"in\"} " + std::to_string(e.swap_in_bytes) + "\n";
  out += "pensieve_swap_bytes_total{direction=\"out\"} " + std::to_string(e.swap_out_bytes) + "\n";
  out += "pensieve_swap_bytes_total{direction=\"spill\"} " + std::to_string(e.spill_bytes) + "\n";
  out += "pensieve_swap_bytes_total{direction=\"restore\"} " + std::to_string(e.restore_bytes) + "\n";
  out += "# HELP pensieve_swap_seconds_total Busy time of KV moves (copy stream, disk), by direction.\n"
         "# TYPE pensieve_swap_seconds_total counter\n";
  out += "pensieve_swap_seconds_total{direction=\"in\"} " + std::to_string(e.swap_in_seconds) + "\n";
  out += "pensieve_swap_seconds_total{direction=\"out\"} " + std::to_string(e.swap_out_seconds) + "\n";
  out += "pensieve_swap_seconds_total{direction=\"spill\"} " + std::to_string(e.spill_seconds) + "\n";
  out += "pensieve_swap_seconds_total{direction=\"restore\"} " + std::to_string(e.restore_seconds) + "\n";
  out += "# HELP pensieve_kv_hit_tokens_total Cached prompt tokens reused, by the tier they came from.\n"
         "# TYPE pensieve_kv_hit_tokens_total counter\n";
  out += "pensieve_kv_hit_tokens_total{tier=\"device\"} " + std::to_string(e.hit_tokens_device) + "\n";
  out += "pensieve_kv_hit_tokens_total{tier=\"host\"} " + std::to_string(e.hit_tokens_host) + "\n";
  out += "pensieve_kv_hit_tokens_total{tier=\"disk\"} " + std::to_string(e.hit_tokens_disk) + "\n";
  gauge(out, "pensieve_recomputed_tokens_total", "Cached tokens that were dropped and computed again.", "counter",
        double(e.recomputed_tokens));
  gauge(out, "pensieve_prefix_cache_queried_tokens_total",
        "Prompt tokens of stateless requests looked up in the prefix cache (all but each prompt's newest).",
        "counter", double(e.prefix_queried_tokens));
  gauge(out, "pensieve_prefix_cache_matched_tokens_total",
        "Of those, tokens a cached path matched (reused from a tier or recomputed: pensieve_kv_hit_tokens_total).",
        "counter", double(e.prefix_matched_tokens));
  gauge(out, "pensieve_prefix_cache_paths", "Cached KV paths of stateless requests (no conversation names them).",
        "gauge", double(e.unnamed_paths));
  gauge(out, "pensieve_kv_shared_blocks", "Device KV blocks held by more than one path or turn.", "gauge",
        double(e.shared_blocks));
  gauge(out, "pensieve_kv_pinned_chunks", "Cached KV chunks a pin keeps out of eviction.", "gauge",
        double(e.pinned_chunks));
  gauge(out, "pensieve_kv_pinned_blocks", "Prompt blocks pinned (cached or not yet computed).", "gauge",
        double(e.pinned_blocks));
  gauge(out, "pensieve_kv_pin_cap_blocks", "The most blocks pins may hold (--pin-cap-share of the device blocks).",
        "gauge", double(e.pin_cap_blocks));
  gauge(out, "pensieve_kv_pins_refused_total", "Pins refused because they would pass the cap.", "counter",
        double(e.refused_pins));
  gauge(out, "pensieve_eviction_cost_per_token_seconds",
        "The eviction cost model's time per recomputed token (measured at start-up or given).", "gauge",
        e.cost_per_token_s);
  gauge(out, "pensieve_eviction_cost_per_token_pair_seconds",
        "The eviction cost model's time per attended (token, key) pair of a recompute.", "gauge",
        e.cost_per_token_pair_s);
  gauge(out, "pensieve_kv_corrupt_chunks_total", "Chunks read back from disk that failed verification.", "counter",
        double(e.corrupt_chunks));
  out += disk_tier_metrics(e);
  out += "# HELP pensieve_kv_evictions_total KV chunks leaving a tier, by tier and reason.\n"
         "# TYPE pensieve_kv_evictions_total counter\n";
  for (const auto& [labels, count] : e.evictions) {
    out += "pensieve_kv_evictions_total{" + labels + "} " + std::to_string(count) + "\n";
  }
  gauge(out, "pensieve_preemptions_total", "Running turns preempted for KV space.", "counter", double(e.preemptions));
  gauge(out, "pensieve_evicted_conversations_total", "Idle conversations whose KV was dropped.", "counter",
        double(e.evicted_conversations));
  gauge(out, "pensieve_refused_overloaded_total", "Turns refused as overloaded.", "counter",
        double(e.refused_overloaded));
  gauge(out, "pensieve_iterations_total", "Scheduler iterations.", "counter", double(e.iterations));
  gauge(out, "pensieve_prefill_tokens_total", "Prompt tokens computed.", "counter", double(e.prefill_tokens));
  gauge(out, "pensieve_decode_tokens_total", "Decode tokens computed.", "counter", double(e.decode_tokens));
  return out;
}

}  // namespace pensieve::net
