#include "bench/pensieve-sim/cpu_calibration.hpp"

#include "bench/common/machine_info.hpp"
#include "bench/pensieve-bench/dataset.hpp"
#include "bench/pensieve-sim/simulator.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>


#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>

namespace pensieve::sim {

namespace {

std::string today_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string cut_utf8(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// The first conversations with at least two user turns: their user
// messages, cut to max_bytes each.
Result<std::vector<std::vector<std::string>>> user_turns(const CalibrationOptions& o) {
  auto data = bench::load_dataset(o.data);
  if (!data) return fail(o.data + ": " + data.error().message);
  std::vector<std::vector<std::string>> out;
  for (const bench::Conversation& c : *data) {
    std::vector<std::string> turns;
    for (const auto& m : c.turns) {
      if (m.role == "user" && turns.size() < o.turns) turns.push_back(cut_utf8(m.content, o.max_bytes));
    }
    if (turns.size() >= 2) out.push_back(std::move(turns));
    if (out.size() >= o.conversations) break;
  }
  if (out.size() < o.conversations) return fail(o.data + " has too few multi-turn conversations");
  return out;
}

double nearest_rank(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = std::size_t(std::clamp(std::ceil(p * double(v.size())) - 1.0, 0.0, double(v.size() - 1)));
  return v[i];
}

// The replay's token counts and schedule as the simulator's workload: each
// turn's new prompt tokens are what its prompt adds to the previous prompt
// and reply.
Result<Workload> workload_of(const bench::ReplayResult& r, std::size_t conversations, const CalibrationOptions& o) {
  std::map<std::size_t, std::map<std::size_t, const bench::TurnSample*>> by;
  for (const bench::TurnSample& t : r.turns) {
    if (!t.ok) return fail("the engine failed turn " + std::to_string(t.turn) + " of conversation " +
                           std::to_string(t.conversation) + ": " + t.error);
    by[t.conversation][t.turn] = &t;
  }
  Workload w;
  w.source = o.data + " (the engine's token counts)";
  for (std::size_t c = 0; c < conversations; ++c) {
    SimConversation conv;
    conv.start_s = double(c) * o.replay.stagger_s;
    const auto thinks = bench::think_times(c, by[c].size(), o.replay);
    std::int64_t context = 0;
    for (const auto& [index, t] : by[c]) {
      if (index != conv.turns.size()) return fail("the replay is missing a turn");
      SimTurn st;
      st.user_tokens = std::int32_t(t->prompt_tokens - context);
      st.output_tokens = t->completion_tokens;
      if (index > 0) st.think_before_s = thinks[index];
      if (st.user_tokens <= 0 || st.output_tokens <= 0) return fail("a replayed turn added no prompt or reply tokens");
      context = t->prompt_tokens + t->completion_tokens;
      conv.turns.push_back(st);
    }
    w.conversations.push_back(std::move(conv));
  }
  return w;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Every round's turns pooled; token counts per round (each round replays the same).
ReplayFigures measured_figures(const std::vector<bench::ReplayResult>& rounds) {
  ReplayFigures f;
  std::vector<double> ttft;
  double tokens = 0, makespan = 0;
  for (const bench::ReplayResult& r : rounds) {
    for (const bench::TurnSample& t : r.turns) {
      ttft.push_back(t.ttft_s);
      tokens += t.completion_tokens;
    }
    makespan += r.makespan_s;
  }
  const bench::ReplayResult& r = rounds.front();
  f.turns = r.turns.size();
  f.makespan_s = makespan / double(rounds.size());
  f.turns_per_s = double(ttft.size()) / makespan;
  f.output_tokens_per_s = tokens / makespan;
  double sum = 0;
  for (double v : ttft) sum += v;
  f.ttft_mean_s = sum / double(std::max<std::size_t>(1, ttft.size()));
  f.ttft_p50_s = nearest_rank(ttft, 0.5);
  f.prefill_tokens = r.scheduler.prefill_tokens;
  f.reused_tokens = r.scheduler.reused_tokens;
  return f;
}

ReplayFigures simulated_figures(const SimResult& r) {
  ReplayFigures f;
  f.turns = r.turns;
  f.makespan_s = r.makespan_s;
  f.turns_per_s = r.throughput_turns_s;
  f.output_tokens_per_s = r.output_tokens_s;
  f.ttft_mean_s = r.ttft_mean_s;
  f.ttft_p50_s = r.ttft_p50_s;
  f.prefill_tokens = r.prefill_tokens;
  f.reused_tokens = r.reused_tokens;
  return f;
}

double ratio_error(double simulated, double measured) { return measured > 0 ? simulated / measured - 1.0 : INFINITY; }

}  // namespace

double Calibration::throughput_error() const { return ratio_error(simulated.turns_per_s, measured.turns_per_s); }
double Calibration::ttft_mean_error() const { return ratio_error(simulated.ttft_mean_s, measured.ttft_mean_s); }
double Calibration::ttft_p50_error() const { return ratio_error(simulated.ttft_p50_s, measured.ttft_p50_s); }
double Calibration::max_drift() const {
  double worst = 0;
  for (double d : round_drift) worst = std::max(worst, std::abs(d));
  return worst;
}

Result<Calibration> calibrate_cpu(const CalibrationOptions& o) {
  Calibration c;
  c.cpu = bench::machine_info().cpu_model;
  c.date = o.date.empty() ? today_utc() : o.date;
  auto shape = load_model_shape(o.engine.model_path);
  if (!shape) return shape.error();
  auto convs = user_turns(o);
  if (!convs) return convs.error();
  std::vector<bench::ReplayResult> replays;
  std::vector<ProbeResult> probes;
  // The engine's iterations, a list per replay.
  std::vector<std::vector<actors::IterationRecord>> round_iterations;
  {
    IterationLog log;            // outlives the engine, which fills it
    boost::asio::io_context io;  // outlives the engine, which completes operations on it
    auto engine = make_engine(o.engine, true, &log);
    if (!engine) return engine.error();
    auto stats = [&] {
      io.restart();
      auto f = boost::asio::co_spawn(io, (*engine)->stats(), boost::asio::use_future);
      io.run();
      return f.get();
    };
    for (std::size_t round = 0; round < std::max<std::size_t>(1, o.rounds); ++round) {
      auto probe = probe_engine(io, **engine, log, o.engine, o.probe);
      if (!probe) return probe.error();
      probes.push_back(std::move(*probe));
      // The engine's counts are cumulative: the replay's are what it adds.
      const actors::SchedulerStats before = stats();
      (void)log.take();
      replays.push_back(bench::replay(io, **engine, *convs, o.replay));
      const actors::SchedulerStats after = stats();  // every record of the replay is logged
      replays.back().scheduler.prefill_tokens = after.prefill_tokens - before.prefill_tokens;
      replays.back().scheduler.reused_tokens = after.reused_tokens - before.reused_tokens;
      auto& records = round_iterations.emplace_back();
      for (const auto& e : log.take()) records.push_back(e.record);
    }
  }
  for (std::size_t i = 0; i < probes.front().compute.size(); ++i) {
    std::vector<double> times;
    for (const auto& p : probes) times.push_back(p.compute[i].seconds);
    c.samples.push_back(probes.front().compute[i]);
    c.samples.back().seconds = median_of(times);
  }
  std::vector<double> overheads, excess;
  for (const auto& p : probes) overheads.push_back(p.overhead_us), excess.push_back(p.prefill_ttft_excess_us);
  c.overhead_us = median_of(overheads);
  c.prefill_ttft_excess_us = median_of(excess);
  const bench::ReplayResult& replayed = replays.front();
  c.measured_turns = replayed.turns;
  c.first_makespan_s = replayed.makespan_s;
  DeviceModel base;
  base.name = c.cpu + ", " + std::to_string(o.engine.threads) + " thread(s), calibrated " + c.date;
  base.memory_gb = 0;
  base.memory_utilization = 1.0;
  base.activation_reserve_gb = 0;
  base.kv_budget_gb = double(o.engine.kv_cache_mb) * 1048576.0 / 1e9;
  // The host tier of the CPU backend is a copy between two RAM pools.
  base.pcie_h2d_gbps = base.pcie_d2h_gbps = 10;
  base.pcie_duplex_loss = 0;
  base.disk_read_gbps = 1, base.disk_write_gbps = 0.5;
  base.interconnect_gbps = 10, base.allreduce_latency_us = 20;
  // The rates from the forward passes alone; the overhead as measured.
  auto fit = fit_device(base, *shape, c.samples, 0.0);
  if (!fit) return fit.error();
  c.fit = std::move(*fit);
  c.fit.device.iteration_overhead_us = c.overhead_us;
  // A lone prefill's TTFT is its forward pass, one iteration's overhead and
  // the turn's front half: the rest of its excess is the front half.
  c.fit.device.turn_start_us = std::max(0.0, c.prefill_ttft_excess_us - c.overhead_us);

  auto w = workload_of(replayed, convs->size(), o);
  if (!w) return w.error();
  c.workload = std::move(*w);
  for (const bench::ReplayResult& r : replays) {
    auto again = workload_of(r, convs->size(), o);
    if (!again) return again.error();
    for (std::size_t i = 0; i < again->conversations.size(); ++i) {
      for (std::size_t t = 0; t < again->conversations[i].turns.size(); ++t) {
        const SimTurn &a = again->conversations[i].turns[t], &b = c.workload.conversations[i].turns[t];
        if (a.user_tokens != b.user_tokens || a.output_tokens != b.output_tokens)
          return fail("the replay's token counts differ between rounds");
      }
    }
  }
  c.measured = measured_figures(replays);

  SimOptions so;
  so.policy = Policy::pensieve;
  so.host_gb = 0;
  so.block_tokens = o.engine.block_tokens;
  so.max_batch_tokens = o.engine.max_batch_tokens;
  so.max_running = actors::SchedulerOptions{}.max_running;
  so.seed = o.replay.seed;
  so.record_turns = true;
  auto simulated = simulate(c.workload, c.fit.device, *shape, so);
  if (!simulated) return simulated.error();
  if (simulated->failed_turns > 0) return fail("the simulation failed turns the engine served");
  c.simulated = simulated_figures(*simulated);
  c.simulated_turns = simulated->turn_timings;
  {
    double context = 0;
    for (const bench::TurnSample& t : replayed.turns) context += t.prompt_tokens + 0.5 * t.completion_tokens;
    context /= double(std::max<std::size_t>(1, replayed.turns.size()));
    c.engine_iterations = round_iterations.front();
    for (std::size_t round = 0; round < round_iterations.size(); ++round) {
      double measured_ms = 0, model_total_ms = 0;
      for (const actors::IterationRecord& r : round_iterations[round]) {
        std::vector<BatchRow> rows(std::size_t(r.decode_tokens),
                                   BatchRow{std::int64_t(context), 1, true});
        if (r.prefill_tokens > 0)
          rows.push_back({std::int64_t(context / 2), r.prefill_tokens, true});
        const double model_ms = iteration_cost(c.fit.device, *shape, 1, rows, 0).total_s * 1e3;
        measured_ms += r.compute_ms, model_total_ms += model_ms;
        if (round > 0) continue;
        (r.prefill_tokens > 0 ? c.with_prefill_ms : c.decode_only_ms) += r.compute_ms;
        (r.prefill_tokens > 0 ? c.with_prefill_model_ms : c.decode_only_model_ms) += model_ms;
      }
      c.round_drift.push_back(model_total_ms > 0 ? measured_ms / model_total_ms - 1.0 : 0.0);
    }
  }
  c.simulated_iterations = simulated->iterations;
  return c;
}

std::string render_calibration(const Calibration& c) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line,
                "calibration on %s (%s): fitted %.4g TFLOP/s, %.4g GB/s; measured %.0f us per iteration over its forward "
                "pass (a lone prefill's TTFT: %.0f us over it, so a turn's start %.0f us)\n",
                c.cpu.c_str(), c.date.c_str(), c.fit.device.tensor_tflops, c.fit.device.hbm_gbps, c.overhead_us,
                c.prefill_ttft_excess_us, c.fit.device.turn_start_us);
  out += line;
  std::snprintf(line, sizeof line, "%-14s %12s %12s %8s\n", "forward pass", "measured ms", "modelled ms", "error");
  out += line;
  for (std::size_t i = 0; i < c.samples.size(); ++i) {
    std::snprintf(line, sizeof line, "%-14s %12.3f %12.3f %+7.1f%%\n", c.samples[i].what.c_str(),
                  c.samples[i].seconds * 1e3, c.fit.modelled_s[i] * 1e3,
                  100.0 * (c.fit.modelled_s[i] / c.samples[i].seconds - 1.0));
    out += line;
  }
  std::snprintf(line, sizeof line, "%-22s %8s %10s %10s %12s %12s %10s %10s\n", "replay (per round)", "turns", "turns/s",
                "out tok/s", "TTFT mean", "TTFT p50", "prefill", "reused");
  out += line;
  auto row = [&](const char* name, const ReplayFigures& f) {
    std::snprintf(line, sizeof line, "%-22s %8zu %10.3f %10.2f %11.2fms %11.2fms %10lld %10lld\n", name, f.turns,
                  f.turns_per_s, f.output_tokens_per_s, f.ttft_mean_s * 1e3, f.ttft_p50_s * 1e3,
                  static_cast<long long>(f.prefill_tokens), static_cast<long long>(f.reused_tokens));
    out += line;
  };
  for (const bench::TurnSample& t : c.measured_turns) {
    for (const TurnTiming& s : c.simulated_turns) {
      if (s.conversation != t.conversation || s.turn != t.turn) continue;
      std::snprintf(line, sizeof line,
                    "  conversation %zu turn %zu: prompt %d (cached %d): TTFT %.1f ms measured, %.1f simulated; "
                    "latency %.1f ms measured, %.1f simulated\n",
                    t.conversation, t.turn, t.prompt_tokens, t.cached_tokens, t.ttft_s * 1e3, s.ttft_s * 1e3,
                    t.latency_s * 1e3, s.latency_s * 1e3);
      out += line;
    }
  }
  double compute_ms = 0;
  for (const auto& r : c.engine_iterations) compute_ms += r.compute_ms;
  std::snprintf(line, sizeof line,
                "  round 1: the engine ran %zu iterations, %.1f ms of forward passes in a %.1f ms replay; the "
                "simulation %llu iterations in %.1f ms\n",
                c.engine_iterations.size(), compute_ms, c.first_makespan_s * 1e3,
                static_cast<unsigned long long>(c.simulated_iterations), c.simulated.makespan_s * 1e3);
  out += line;
  std::snprintf(line, sizeof line,
                "  its forward passes as the fit prices them: decode-only %.1f ms measured, %.1f modelled; with a "
                "prefill %.1f ms measured, %.1f modelled\n",
                c.decode_only_ms, c.decode_only_model_ms, c.with_prefill_ms, c.with_prefill_model_ms);
  out += line;
  std::string drifts;
  for (double d : c.round_drift) {
    std::snprintf(line, sizeof line, "%s%+.1f%%", drifts.empty() ? "" : ", ", 100.0 * d);
    drifts += line;
  }
  out += "  each round's forward passes over the fit's pricing of them: " + drifts + "\n";
  if (c.max_drift() > calibration_drift_limit) {
    std::snprintf(line, sizeof line,
                  "  warning: a round ran %.0f%% off the probes' speed (the machine changed "
                  "speed); the figures below "
                  "compare two speeds: calibrate again on a quiet machine\n",
                  100.0 * c.max_drift());
    out += line;
  }
  row("measured (engine)", c.measured);
  row("simulated (fitted)", c.simulated);
  std::snprintf(line, sizeof line, "simulated / measured - 1: throughput %+.1f%%, TTFT mean %+.1f%%, TTFT p50 %+.1f%%\n",
                100.0 * c.throughput_error(), 100.0 * c.ttft_mean_error(), 100.0 * c.ttft_p50_error());
  out += line;
  return out;
}

std::string render_calibrated_device(const Calibration& c, const CalibrationOptions& o) {
  DeviceModel d = c.fit.device;
  std::string probes;
  for (const auto& s : c.samples) probes += (probes.empty() ? "" : ", ") + s.what;
  char fit[160];
  std::snprintf(fit, sizeof fit, "; fit rms log error %.3f, worst %.1f%%", c.fit.rms_log_error,
                100.0 * c.fit.max_relative_error);
  d.sources = {"pensieve-sim --calibrate-cpu " + o.engine.model_path + " on " + c.date + ", " + c.cpu + ", " +
                   std::to_string(o.engine.threads) + " forward thread(s): the in-process Engine timed on " + probes +
                   fit};
  char check[320];
  std::snprintf(check, sizeof check,
                "replay of %zu conversations of %s: simulated / measured - 1 = throughput %+.1f%%, TTFT mean %+.1f%%, "
                "TTFT p50 %+.1f%%",
                c.workload.conversations.size(), o.data.c_str(), 100.0 * c.throughput_error(),
                100.0 * c.ttft_mean_error(), 100.0 * c.ttft_p50_error());
  d.sources.emplace_back(check);
  return render_device_json(d, "Fitted at run time: tensor_tflops, hbm_gbps and iteration_overhead_us are effective "
                               "figures of this engine on this machine (efficiencies 1); the KV budget is the "
                               "engine's --kv-cache-mb; tier figures are the CPU preset's.");
}

}  // namespace pensieve::sim
