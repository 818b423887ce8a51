#include "bench/pensieve-sim/sim_report.hpp"

#include "bench/pensieve-bench/svg_plot.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <cstdio>
#include <map>

namespace pensieve::sim {

namespace json = boost::json;

namespace {

std::string format(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

bool meets(const SimRun& run, const SimResult& r) {
  return r.turns > 0 && r.mean_normalized_latency_s <= run.latency_target_s &&
         (run.ttft_p99_target_s <= 0 || r.ttft_p99_s <= run.ttft_p99_target_s);
}

std::vector<Policy> policies_of(const SimRun& run) {
  std::vector<Policy> out;
  for (const SimResult& r : run.results) {
    if (std::find(out.begin(), out.end(), r.policy) == out.end()) out.push_back(r.policy);
  }
  return out;
}

double hit_ratio(const SimResult& r) { return r.prompt_tokens > 0 ? double(r.reused_tokens) / double(r.prompt_tokens) : 0; }

}  // namespace

const SimResult* at_target(const SimRun& run, Policy policy) {
  const SimResult* best = nullptr;
  for (const SimResult& r : run.results) {
    if (r.policy != policy || !meets(run, r)) continue;
    if (best == nullptr || r.throughput_turns_s > best->throughput_turns_s) best = &r;
  }
  return best;
}

std::string render_table(const SimRun& run) {
  std::string out = "SIMULATED (pensieve-sim, not measured): device " + run.device + " (" + run.device_file +
                    "), model " + run.model + ", tp " + std::to_string(run.tp) + ", host tier " +
                    format("%g", run.host_gb) + " GB, data " + run.data + ", think " + format("%g", run.think_s) +
                    " s, seed " + std::to_string(run.seed) + "\n";
  out += "| policy | host GB | rate (turns/s) | turns/s | out tok/s | mean norm. latency (s/tok) | TTFT p50 | TTFT p99 | "
         "reused / prompt tokens | device / host / disk hits | recomputed | H2D GB | D2H GB |\n";
  out += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const SimResult& r : run.results) {
    out += "| " + std::string(policy_name(r.policy)) + " | " + format("%g", r.host_gb) + " | " + format("%g", r.rate) + " | " +
           format("%.3f", r.throughput_turns_s) + " | " + format("%.1f", r.output_tokens_s) + " | " +
           format("%.4f", r.mean_normalized_latency_s) + " | " + format("%.3f s", r.ttft_p50_s) + " | " +
           format("%.3f s", r.ttft_p99_s) + " | " + std::to_string(r.reused_tokens) + " / " +
           std::to_string(r.prompt_tokens) + " (" + format("%.1f%%", 100 * hit_ratio(r)) + ") | " +
           std::to_string(r.hit_device) + " / " + std::to_string(r.hit_host) + " / " + std::to_string(r.hit_disk) +
           " | " + std::to_string(r.recomputed) + " | " + format("%.2f", r.h2d_bytes / 1e9) + " | " +
           format("%.2f", r.d2h_bytes / 1e9) + " |\n";
  }
  out += "\nAt a mean normalized latency of at most " + format("%g", run.latency_target_s) + " s per output token" +
         (run.ttft_p99_target_s > 0 ? " and TTFT p99 at most " + format("%g", run.ttft_p99_target_s) + " s" : "") +
         ":\n";
  const SimResult* base = at_target(run, Policy::stateless);
  for (Policy p : policies_of(run)) {
    const SimResult* r = at_target(run, p);
    out += "  " + std::string(policy_name(p)) + ": ";
    if (r == nullptr) {
      out += "no swept rate meets it\n";
      continue;
    }
    out += "up to " + format("%g", r->rate) + " turns/s offered, " + format("%.3f", r->throughput_turns_s) +
           " turns/s served";
    if (base != nullptr && p != Policy::stateless && base->throughput_turns_s > 0)
      out += format(" (%.2fx stateless)", r->throughput_turns_s / base->throughput_turns_s);
    out += "\n";
  }
  return out;
}

std::string render_json(const SimRun& run) {
  json::object root;
  root["simulated"] = true;
  root["device"] = run.device;
  root["device_file"] = run.device_file;
  root["model"] = run.model;
  root["data"] = run.data;
  root["tp"] = run.tp;
  root["host_gb"] = run.host_gb;
  root["think_s"] = run.think_s;
  root["seed"] = run.seed;
  root["latency_target_s"] = run.latency_target_s;
  json::array results;
  for (const SimResult& r : run.results) {
    json::object o;
    o["policy"] = policy_name(r.policy);
    o["rate"] = r.rate;
    o["host_gb"] = r.host_gb;
    o["turns"] = r.turns;
    o["failed_turns"] = r.failed_turns;
    o["makespan_s"] = r.makespan_s;
    o["throughput_turns_s"] = r.throughput_turns_s;
    o["output_tokens_s"] = r.output_tokens_s;
    o["mean_normalized_latency_s"] = r.mean_normalized_latency_s;
    o["ttft_p50_s"] = r.ttft_p50_s;
    o["ttft_p99_s"] = r.ttft_p99_s;
    o["prompt_tokens"] = r.prompt_tokens;
    o["reused_tokens"] = r.reused_tokens;
    o["prefill_tokens"] = r.prefill_tokens;
    o["hit_tokens"] = json::object{{"device", r.hit_device}, {"host", r.hit_host}, {"disk", r.hit_disk}};
    o["recomputed_tokens"] = r.recomputed;
    o["h2d_bytes"] = r.h2d_bytes;
    o["d2h_bytes"] = r.d2h_bytes;
    o["disk_bytes"] = r.disk_bytes;
    o["device_blocks"] = r.device_blocks;
    o["host_slots"] = r.host_slots;
    o["iterations"] = r.iterations;
    results.push_back(std::move(o));
  }
  root["results"] = std::move(results);
  json::object capacity;
  for (Policy p : policies_of(run)) {
    const SimResult* r = at_target(run, p);
    capacity[policy_name(p)] = r ? json::value(r->rate) : json::value(nullptr);
  }
  root["max_rate_at_target"] = std::move(capacity);
  return json::serialize(root) + "\n";
}

std::string render_plot(const SimRun& run) {
  bench::LinePlot plot;
  plot.title = "SIMULATED: " + run.model + " on " + run.device + " (tp " + std::to_string(run.tp) + ")";
  plot.x_label = "served turns/s";
  plot.y_label = "mean normalized latency (s per output token)";
  plot.markers = true;
  for (Policy p : policies_of(run)) {
    bench::PlotSeries s;
    s.label = policy_name(p);
    for (const SimResult& r : run.results) {
      if (r.policy == p) s.points.emplace_back(r.throughput_turns_s, r.mean_normalized_latency_s);
    }
    plot.series.push_back(std::move(s));
  }
  return bench::render_svg(plot);
}

}  // namespace pensieve::sim
