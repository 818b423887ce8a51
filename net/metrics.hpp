#pragma once
// ServerMetrics: what GET /metrics reports, in the Prometheus text format:
// requests by route and status, tokens (prompt, generated, served from the
// KV cache), TTFT and inter-token latency histograms, batch sizes, and the
// engine's gauges (queue depth, KV blocks) read at scrape time.
//
// Thread-safe: recorded from the front ends' and the scheduler's threads.
#include "actors/turn.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace pensieve::net {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of `name`.
  void render(std::string_view name, std::string& out) const;
  // The smallest bucket bound at or below which a fraction q of the values
  // fall (+inf when beyond the last bound); 0 without values.
  double quantile_bound(double q) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bucket, not cumulative; last: +Inf
  double sum_ = 0;
  std::uint64_t count_ = 0;
};

// The engine's state at scrape time.
struct EngineGauges {
  std::int64_t waiting = 0, running = 0, cached_conversations = 0;
  std::int64_t kv_blocks_free = 0, kv_blocks_total = 0;
  std::int64_t preemptions = 0, evicted_conversations = 0, refused_overloaded = 0, iterations = 0;
  std::int64_t prefill_tokens = 0, decode_tokens = 0, reused_tokens = 0;
  // KV tiers (zero without a host tier).
  std::int64_t host_slots_free = 0, host_slots_total = 0, disk_slots_free = 0, disk_slots_total = 0;
  std::int64_t hit_tokens_device = 0, hit_tokens_host = 0, hit_tokens_disk = 0, recomputed_tokens = 0;
  std::int64_t swap_in_bytes = 0, swap_out_bytes = 0, spill_bytes = 0, restore_bytes = 0;
  double swap_in_seconds = 0, swap_out_seconds = 0, spill_seconds = 0, restore_seconds = 0;
  std::int64_t corrupt_chunks = 0;
  // The disk tier at start-up: the scan of the previous run's file (slots
  // read, by what they held), the chunks the prefix index took (as paths)
  // or discarded; then the restore rule's choices for chunks found only on
  // disk (read or recompute), the measured read time per chunk (0: none
  // yet) and the rule in force ("auto", "always", "never"; empty: no disk tier).
  std::int64_t disk_scan_slots = 0, disk_scan_labelled = 0, disk_scan_empty = 0, disk_scan_corrupt = 0;
  std::int64_t disk_scan_foreign = 0, disk_scan_unreadable = 0;
  std::int64_t disk_found_paths = 0, disk_found_chunks = 0, disk_found_discarded = 0, disk_found_front_missing = 0;
  std::int64_t disk_restores_read = 0, disk_restores_recomputed = 0;
  double disk_read_seconds_per_chunk = 0;
  std::string disk_restore_mode;
  // The conversation store (--max-conversations, --conversation-idle-s):
  // in memory, unloaded to the journal; times one was unloaded, reloaded,
  // deleted by the limits.
  std::int64_t live_conversations = 0, journaled_conversations = 0;
  std::int64_t unloaded_conversations = 0, reloaded_conversations = 0, expired_conversations = 0;
  // Stateless requests' prefix cache: prompt tokens looked up and matched
  // by a cached unnamed path; such paths; device blocks several paths or
  // turns share.
  std::int64_t prefix_queried_tokens = 0, prefix_matched_tokens = 0, unnamed_paths = 0, shared_blocks = 0;
  std::int64_t pinned_chunks = 0;  // cached chunks a pin keeps where they are
  // Pinned prefix blocks (cached or not yet), the most pins may hold
  // (--pin-cap-share of the device blocks), pins refused for want of room.
  std::int64_t pinned_blocks = 0, pin_cap_blocks = 0, refused_pins = 0;
  // The eviction policy's recompute costs (measured at start-up, or given).
  double cost_per_token_s = 0, cost_per_token_pair_s = 0;
  // Evictions by tier and reason ("device","host"; "reclaimed","to_host","dropped").
  std::vector<std::pair<std::string, std::int64_t>> evictions;  // label text -> count
};

class ServerMetrics {
 public:
  ServerMetrics();

  void request(std::string_view route, int status);
  void ttft(double seconds);
  void inter_token(double seconds);
  // A finished turn's phases as the scheduler saw them: admitted to first
  // planned (queue), to its first token (prefill), to its end (decode).
  // Phases it did not reach (a turn cancelled while waiting) are skipped.
  void turn_phases(const actors::TurnTimings& timings);
  void tokens(std::int64_t prompt, std::int64_t completion, std::int64_t cached);
  void batch(std::int32_t sequences, std::int32_t tokens);
  // From a token being sampled to its bytes written to the socket.
  void frontend_latency(double seconds);
  // The same, and the part of it before the writer took the token (from the
  // scheduler through the conversation to the turn's channel and the I/O
  // thread's wake-up), kept with the samples: where the time goes.
  void frontend_latency(double seconds, double taken_seconds);
  double frontend_latency_bound(double q) const;
  // Also keeps every front-end latency sample (off by default: the memory
  // grows with the run), for exact quantiles: bench/fe-latency, the soak test.
  void keep_frontend_samples(bool keep);
  std::vector<double> frontend_samples() const;  // seconds, in arrival order
  std::vector<double> frontend_taken_samples() const;  // the parts before the writer, likewise

  std::string render(const EngineGauges& engine) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::int64_t prompt_tokens_ = 0, completion_tokens_ = 0, cached_tokens_ = 0;
  Histogram ttft_, inter_token_, turn_queue_, turn_prefill_, turn_decode_, batch_sequences_, batch_tokens_, frontend_;
  bool keep_frontend_samples_ = false;
  std::vector<double> frontend_samples_;
  std::vector<double> frontend_taken_samples_;
};

}  // namespace pensieve::net
