#include "bench/engine-bench/tiers.hpp"

#include "gpu/kv/kv_pool.hpp"
#include "gpu/model/model_loader.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

namespace pensieve::bench {

namespace json = boost::json;
namespace asio = boost::asio;

namespace {

struct TierSizing {
  std::int64_t total_tokens = 0;
  std::int64_t total_blocks = 0;       // every conversation's final context, in blocks
  std::int64_t largest_blocks = 0;     // one conversation's
  std::int32_t device_blocks = 0;
  std::int32_t host_blocks = 0;
  std::int64_t disk_bytes = 0;
  std::size_t kv_bytes_per_token = 0;  // the measured model's, in the run's KV dtype
};

struct Mode {
  const char* name;
  bool stateful;
  bool tiers;  // host + disk
  actors::EvictionPolicyKind policy;
};

constexpr Mode kModes[] = {
    {"a_cost_aware_tiers", true, true, actors::EvictionPolicyKind::cost_aware},
    {"b_lru_tiers", true, true, actors::EvictionPolicyKind::lru},
    {"c_device_only_recompute", true, false, actors::EvictionPolicyKind::cost_aware},
    {"d_no_state", false, false, actors::EvictionPolicyKind::cost_aware},
};

struct ModeRun {
  ReplayResult result;
  ReplaySummary summary;
  actors::SwapStats swap;
  double cpu_s = 0;  // the process's user + system CPU time during the replay
};

double process_cpu_s() {
  rusage u{};
  const int rc = getrusage(RUSAGE_SELF, &u);
  assert(rc == 0 && "getrusage(RUSAGE_SELF) cannot fail");
  (void)rc;
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) * 1e-6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

Result<ModeRun> run_mode(const std::string& model_path, const actors::EngineOptions& eo,
                         const std::vector<std::vector<std::string>>& conversations, const ReplayOptions& ro) {
  boost::asio::io_context io;  // outlives the engine, which completes operations on it
  auto weights = model::load_model(model_path);
  if (!weights) return weights.error();
  auto engine = actors::Engine::create(std::move(*weights), eo);
  if (!engine) return engine.error();
  ModeRun run;
  const double cpu0 = process_cpu_s();
  run.result = replay(io, **engine, conversations, ro);
  run.cpu_s = process_cpu_s() - cpu0;
  run.summary = summarize(run.result);
  io.restart();
  auto swap = asio::co_spawn(io, (*engine)->swap_stats(), asio::use_future);
  io.run();
  run.swap = swap.get();
  return run;
}

// Token counts depend on the tokenizer, the chat template and max_tokens
// only, so a small model with the same vocabulary measures each
// conversation's final context quickly.
Result<TierSizing> size_tiers(const std::vector<std::vector<std::string>>& conversations, const ReplayOptions& ro,
                              const TierBenchOptions& o) {
  actors::EngineOptions eo;
  eo.n_threads = o.threads;
  eo.scheduler.max_batch_tokens = o.batch_tokens;
  eo.kv_block_tokens = o.block_tokens;
  ReplayOptions fast = ro;
  fast.think_time_s = 0;
  fast.stagger_s = 0;
  auto run = run_mode(o.calibration_model_path, eo, conversations, fast);
  if (!run) return run.error();
  if (run->summary.failed) return fail("the calibration replay failed a turn: " + run->result.turns.front().error);
  std::vector<std::int64_t> context(conversations.size(), 0);
  for (const auto& t : run->result.turns) {
    context[t.conversation] = std::max<std::int64_t>(context[t.conversation], t.prompt_tokens + t.completion_tokens);
  }
  TierSizing s;
  for (const auto tokens : context) {
    const std::int64_t blocks = (tokens + o.block_tokens - 1) / o.block_tokens;
    s.total_tokens += tokens;
    s.total_blocks += blocks;
    s.largest_blocks = std::max(s.largest_blocks, blocks);
  }
  const auto weights = model::load_model(o.model_path);
  if (!weights) return weights.error();
  const auto& c = weights->config;
  s.kv_bytes_per_token = kv::kv_bytes_per_token(
      {.block_tokens = o.block_tokens, .n_layers = c.n_layers, .n_kv_heads = c.n_kv_heads, .head_dim = c.head_dim,
       .dtype = o.kv_dtype});
  // A quarter of the total, but always room for the largest conversation
  // beside the decode reserve (the scheduler refuses a turn that never fits).
  const auto quarter = std::int64_t(std::ceil(double(s.total_blocks) / o.total_over_device));
  s.device_blocks = std::int32_t(std::max<std::int64_t>(quarter, s.largest_blocks * 5 / 4 + 2));
  s.host_blocks = std::max(1, std::int32_t(double(s.device_blocks) * o.host_over_device));
  // A disk slot is a chunk plus a header block, rounded to header blocks
  // (DiskTierFile); no slack, so a budget below the total forces drops.
  const std::int64_t header = 4096;
  const std::int64_t chunk_bytes = std::int64_t(s.kv_bytes_per_token) * o.block_tokens;
  const std::int64_t slot_bytes = (header + chunk_bytes + header - 1) / header * header;
  s.disk_bytes = o.disk_over_total <= 0
                     ? 0
                     : std::int64_t(std::ceil(o.disk_over_total * double(s.total_blocks))) * slot_bytes;
  return s;
}

actors::EngineOptions mode_options(const Mode& m, const TierSizing& s, const TierBenchOptions& o,
                                   const std::filesystem::path& disk_dir) {
  actors::EngineOptions eo;
  eo.n_threads = o.threads;
  eo.scheduler.keep_kv = m.stateful;
  eo.scheduler.max_batch_tokens = o.batch_tokens;
  eo.kv_block_tokens = o.block_tokens;
  eo.kv_dtype = o.kv_dtype;
  eo.kv_device_blocks = s.device_blocks;
  eo.kv_cache.eviction_policy = m.policy;
  eo.kv_cache.swap_out_watermark = o.swap_out_watermark;
  eo.scheduler.decode_reserve = o.decode_reserve;
  eo.kv_host_mb = 0;  // (c) and (d): device only, whatever the engine's default
  if (m.tiers) {
    eo.kv_host_blocks = s.host_blocks;
    if (s.disk_bytes > 0) {
      eo.kv_disk_dir = disk_dir.string();
      eo.kv_disk_bytes = s.disk_bytes;
    }
  }
  return eo;
}

json::object run_json(const ModeRun& r) {
  const auto& t = r.result.scheduler.tiers;
  std::int64_t recorded = 0;  // streamed text, which the modes' comparison covers
  for (const auto& turn : r.result.turns) recorded += std::int64_t(turn.text.size());
  // CPU seconds per second of the replay: how much of the machine a mode
  // kept busy (idle while waiting for copies shows up as a lower figure).
  return json::object{{"makespan_s", r.result.makespan_s},
                      {"cpu_s", r.cpu_s},
                      {"cpu_s_per_s", r.result.makespan_s > 0 ? r.cpu_s / r.result.makespan_s : 0.0},
                      {"output_bytes_recorded", recorded},
                      {"output_tokens_per_s", r.summary.output_tokens_per_s},
                      {"ttft_p50_s", r.summary.ttft_p50_s},
                      {"ttft_p99_s", r.summary.ttft_p99_s},
                      {"failed_turns", r.summary.failed},
                      {"prefill_tokens_computed", r.summary.prefill_tokens},
                      {"recomputed_tokens", t.recomputed_tokens},
                      {"hit_tokens_device", t.hit_tokens_device},
                      {"hit_tokens_host", t.hit_tokens_host},
                      {"hit_tokens_disk", t.hit_tokens_disk},
                      {"swap_in_chunks", t.swap_in_chunks},
                      {"swap_out_chunks", t.swap_out_chunks},
                      {"spill_chunks", t.spill_chunks},
                      {"restore_chunks", t.restore_chunks},
                      {"restore_bytes", r.swap.restore_bytes},
                      {"restore_ns", r.swap.restore_ns},
                      {"device_dropped", t.device_dropped},
                      {"device_dropped_host_busy", t.device_dropped_host_busy},
                      {"device_dropped_coldest", t.device_dropped_coldest},
                      {"device_dropped_spilling", t.device_dropped_spilling},
                      {"host_dropped", t.host_dropped},
                      {"disk_dropped", t.disk_dropped},
                      {"restores_given_up", t.restores_given_up},
                      {"corrupt_chunks", t.corrupt_chunks},
                      {"evicted_conversations", t.evicted_conversations},
                      {"preemptions", r.result.scheduler.preemptions},
                      {"iterations", r.result.scheduler.iterations},
                      {"decode_tokens", r.result.scheduler.decode_tokens},
                      // Sequences decoded per iteration: how many turns the device's KV let run at once.
                      {"decode_tokens_per_iteration",
                       r.result.scheduler.iterations > 0
                           ? double(r.result.scheduler.decode_tokens) / double(r.result.scheduler.iterations)
                           : 0.0}};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Every mode's greedy output text, keyed by (conversation, turn).
using Outputs = std::vector<std::vector<std::string>>;

Outputs outputs_of(const ReplayResult& r, std::size_t conversations) {
  Outputs out(conversations);
  for (const auto& t : r.turns) {
    if (out[t.conversation].size() <= t.turn) out[t.conversation].resize(t.turn + 1);
    out[t.conversation][t.turn] = t.text;
  }
  return out;
}

json::object sizing_json(const TierSizing& s, const TierBenchOptions& o) {
  return json::object{{"block_tokens", o.block_tokens},
                      {"kv_bytes_per_token", s.kv_bytes_per_token},
                      {"total_context_tokens", s.total_tokens},
                      {"total_kv_blocks", s.total_blocks},
                      {"largest_conversation_blocks", s.largest_blocks},
                      {"kv_device_blocks", s.device_blocks},
                      {"kv_host_blocks", s.host_blocks},
                      {"kv_disk_bytes", s.disk_bytes},
                      {"disk_over_total", o.disk_over_total},
                      {"total_over_device", double(s.total_blocks) / double(s.device_blocks)}};
}

double ratio(double a, double b) { return b > 0 ? a / b : 0; }

void add_comparison(json::object& report, const std::vector<std::vector<ModeRun>>& runs) {
  json::object modes;
  std::vector<double> tput(4), ttft(4), recomputed(4);
  for (std::size_t m = 0; m < 4; ++m) {
    if (runs[m].empty()) continue;  // not selected (--modes)
    std::vector<double> t, f, rc;
    json::array reps;
    for (const auto& r : runs[m]) {
      t.push_back(r.summary.output_tokens_per_s);
      f.push_back(r.summary.ttft_p50_s);
      rc.push_back(double(r.result.scheduler.tiers.recomputed_tokens));
      reps.push_back(run_json(r));
    }
    tput[m] = median(t), ttft[m] = median(f), recomputed[m] = median(rc);
    const auto& last = runs[m].back().result.scheduler.tiers;
    modes[kModes[m].name] = json::object{
        {"median_output_tokens_per_s", tput[m]}, {"median_ttft_p50_s", ttft[m]},
        {"median_recomputed_tokens", recomputed[m]}, {"hit_tokens_device", last.hit_tokens_device},
        {"hit_tokens_host", last.hit_tokens_host}, {"hit_tokens_disk", last.hit_tokens_disk},
        {"repetitions", std::move(reps)}};
  }
  report["modes"] = std::move(modes);
  const double a_over_c = ratio(tput[0], tput[2]), a_over_d = ratio(tput[0], tput[3]);
  report["throughput_a_over_c"] = a_over_c;
  report["throughput_a_over_d"] = a_over_d;
  report["ttft_p50_c_over_a"] = ratio(ttft[2], ttft[0]);
  report["ttft_p50_d_over_a"] = ratio(ttft[3], ttft[0]);
  report["recomputed_a"] = recomputed[0];
  report["recomputed_b"] = recomputed[1];
  report["recomputed_a_over_b"] = ratio(recomputed[0], recomputed[1]);
  const bool all = std::all_of(runs.begin(), runs.end(), [](const auto& r) { return !r.empty(); });
  if (all) {
    report["targets"] = json::object{{"a_over_c_at_least_1_5", a_over_c >= 1.5},
                                     {"a_over_d_at_least_2_5", a_over_d >= 2.5},
                                     {"a_recomputes_fewer_than_b", recomputed[0] < recomputed[1]}};
  }
}

}  // namespace

Result<json::object> run_tier_comparison(const std::vector<std::vector<std::string>>& conversations,
                                         const ReplayOptions& replay_options, const TierBenchOptions& options) {
  auto sizing = size_tiers(conversations, replay_options, options);
  if (!sizing) return sizing.error();
  json::object report;
  report["sizing"] = sizing_json(*sizing, options);
  report["repetitions"] = options.repetitions;
  report["modes_run"] = options.modes;
  report["swap_out_watermark"] = options.swap_out_watermark;
  report["decode_reserve"] = options.decode_reserve;
  std::vector<std::vector<ModeRun>> runs(4);
  std::optional<Outputs> reference;
  bool identical = true;
  for (int rep = 0; rep < options.repetitions; ++rep) {
    for (std::size_t m = 0; m < 4; ++m) {
      if (options.modes.find(char('a' + m)) == std::string::npos) continue;
      // A fresh disk folder per run: no chunk outlives its engine.
      const auto disk_dir = std::filesystem::path(options.scratch_dir) /
                            ("disk-" + std::string(kModes[m].name) + "-" + std::to_string(rep));
      std::filesystem::remove_all(disk_dir);
      std::filesystem::create_directories(disk_dir);
      std::fprintf(stderr, "tier-bench: repetition %d, %s\n", rep + 1, kModes[m].name);
      auto run = run_mode(options.model_path, mode_options(kModes[m], *sizing, options, disk_dir), conversations,
                          replay_options);
      std::filesystem::remove_all(disk_dir);
      if (!run) return run.error();
      auto outputs = outputs_of(run->result, conversations.size());
      if (!reference) reference = std::move(outputs);
      else identical = identical && outputs == *reference;
      runs[m].push_back(std::move(*run));
    }
  }
  add_comparison(report, runs);
  report["identical_greedy_tokens"] = identical;
  return report;
}

}  // namespace pensieve::bench
