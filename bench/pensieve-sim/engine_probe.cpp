#include "bench/pensieve-sim/engine_probe.hpp"

#include "bench/engine-bench/replay.hpp"
#include "gpu/model/model_loader.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>

namespace pensieve::sim {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// About `tokens` tokens of text (a sentence of ~10 tokens, repeated).
std::string text_of(std::int32_t tokens) {
  std::string s;
  for (std::int32_t i = 0; i < std::max(1, tokens / 10); ++i) s += "The quick brown fox jumps over the lazy dog. ";
  return s;
}

struct Probe {
  std::vector<bench::TurnSample> turns;
  std::vector<IterationLog::Entry> iterations;
};

// `turns` single-turn conversations started together, each `max_tokens` long.
Result<Probe> run_probe(boost::asio::io_context& io, actors::Engine& engine, IterationLog& log, std::int32_t prompt,
                        std::int32_t turns, std::int32_t max_tokens) {
  bench::ReplayOptions o;
  o.stagger_s = 0;
  o.max_tokens = max_tokens;
  o.stateless = true;
  // Each its own first words: turns started together with one prompt would
  // share the blocks the first has written (SchedulerCore::share_running_prefix).
  std::vector<std::vector<std::string>> convs;
  // (One of its ~10-token sentences, not an extra one: the prompt keeps its length.)
  for (std::int32_t i = 0; i < turns; ++i) {
    convs.push_back({"Probe " + std::to_string(i) + " jumps over the dog. " + text_of(std::max(0, prompt - 10))});
  }
  (void)log.take();
  bench::ReplayResult r = bench::replay(io, engine, convs, o);
  engine.clear_prefix_cache();
  // The scheduler answers stats between iterations: every record of the
  // probe's iterations is in the log once it has.
  io.restart();
  auto stats = boost::asio::co_spawn(io, engine.stats(), boost::asio::use_future);
  io.run();
  (void)stats.get();
  Probe p{std::move(r.turns), log.take()};
  for (const bench::TurnSample& t : p.turns) {
    if (!t.ok) return fail("the engine failed a probe turn: " + t.error);
    if (t.cached_tokens != 0) return fail("a probe turn reused cached KV");
  }
  if (p.turns.size() != std::size_t(turns)) return fail("a probe lost turns");
  return p;
}

}  // namespace

void IterationLog::add(const actors::IterationRecord& r) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  entries_.push_back({r, now});
}

std::vector<IterationLog::Entry> IterationLog::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(entries_, {});
}

Result<std::unique_ptr<actors::Engine>> make_engine(const EngineSetup& s, bool keep_kv, IterationLog* log) {
  auto weights = model::load_model(s.model_path);
  if (!weights) return fail(s.model_path + ": " + weights.error().message);
  actors::EngineOptions eo;
  eo.n_threads = s.threads;
  eo.scheduler.keep_kv = keep_kv;
  eo.scheduler.max_batch_tokens = s.max_batch_tokens;
  eo.kv_block_tokens = s.block_tokens;
  eo.kv_cache_mb = s.kv_cache_mb;
  eo.kv_host_mb = 0;  // the replays here fit the device tier: no tier moves to model
  if (log) eo.on_iteration = [log](const actors::IterationRecord& r) { log->add(r); };
  auto engine = actors::Engine::create(std::move(*weights), eo);
  if (!engine) return fail("the engine: " + engine.error().message);
  return std::move(*engine);
}

Result<ProbeResult> probe_engine(boost::asio::io_context& io, actors::Engine& engine, IterationLog& log,
                                 const EngineSetup& setup, const ProbeOptions& o) {
  if (auto warm = run_probe(io, engine, log, o.prefill_tokens.back(), 2, 4); !warm) return warm.error();
  ProbeResult out;
  std::vector<double> excess;
  for (std::int32_t size : o.prefill_tokens) {
    std::vector<double> times;
    std::int32_t prompt = 0;
    for (std::int32_t rep = 0; rep < o.repetitions; ++rep) {
      auto p = run_probe(io, engine, log, size, 1, 1);
      if (!p) return p.error();
      prompt = p->turns.front().prompt_tokens;
      if (prompt > setup.max_batch_tokens) return fail("a prefill probe is longer than one iteration's tokens");
      if (p->iterations.size() != 1 || p->iterations.front().record.prefill_tokens != prompt)
        return fail("a lone prefill was not one iteration of its prompt");
      const double compute = p->iterations.front().record.compute_ms * 1e-3;
      times.push_back(compute);
      excess.push_back((p->turns.front().ttft_s - compute) * 1e6);
    }
    out.compute.push_back({"prefill " + std::to_string(prompt), {{0, prompt, true}}, median(times)});
  }
  std::vector<double> gaps;
  for (std::int32_t batch : o.decode_batches) {
    std::vector<double> times;
    std::int32_t prompt = 0;
    for (std::int32_t rep = 0; rep < o.repetitions; ++rep) {
      auto p = run_probe(io, engine, log, o.decode_prompt_tokens, batch, o.decode_steps);
      if (!p) return p.error();
      prompt = p->turns.front().prompt_tokens;
      // Steps of the whole batch, each after another such step.
      const auto& its = p->iterations;
      for (std::size_t i = 1; i < its.size(); ++i) {
        const auto& r = its[i].record;
        const auto& before = its[i - 1].record;
        if (r.decode_tokens != batch || r.prefill_tokens != 0 || before.prefill_tokens != 0) continue;
        times.push_back(r.compute_ms * 1e-3);
        gaps.push_back(std::chrono::duration<double, std::micro>(its[i].at - its[i - 1].at).count() -
                       r.compute_ms * 1e3);
      }
    }
    if (times.empty()) return fail("a decode probe of " + std::to_string(batch) + " turns never ran them together");
    // Each row's context in the middle of its decode.
    const std::vector<BatchRow> rows(std::size_t(batch), BatchRow{prompt + o.decode_steps / 2, 1, true});
    out.compute.push_back({"decode x" + std::to_string(batch), rows, median(times)});
  }
  out.overhead_us = std::max(0.0, median(gaps));
  out.prefill_ttft_excess_us = median(excess);
  return out;
}

}  // namespace pensieve::sim
