#include "bench/fe-latency/report.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cstdio>

namespace pensieve::bench {

namespace json = boost::json;

namespace {

// Every round of one setting pooled: the setting's samples and totals.
struct Pooled {
  std::vector<double> samples_s, taken_s, wakeup_late_s;
  std::uint64_t ok = 0, failed = 0;
  std::int64_t tokens = 0;
  double cpu_s = 0, client_cpu_s = 0, wall_s = 0;
};

// "nice 10", or "idle" for the SCHED_IDLE class (rt::kIdleClass, 20).
std::string nice_name(int nice) { return nice > 19 ? std::string("idle") : "nice " + std::to_string(nice); }

Pooled pool(const std::vector<FeRun>& runs, int nice) {
  Pooled p;
  for (const FeRun& r : runs) {
    if (r.compute_nice != nice) continue;
    p.samples_s.insert(p.samples_s.end(), r.samples_s.begin(), r.samples_s.end());
    p.taken_s.insert(p.taken_s.end(), r.taken_s.begin(), r.taken_s.end());
    p.wakeup_late_s.insert(p.wakeup_late_s.end(), r.wakeup_late_s.begin(), r.wakeup_late_s.end());
    p.ok += r.load.ok;
    p.failed += r.load.failed;
    p.tokens += r.completion_tokens;
    p.cpu_s += r.cpu_s;
    p.client_cpu_s += r.client_cpu_s;
    p.wall_s += r.wall_s;
  }
  return p;
}

// cpu_s: the server's process; client_cpu_s: the clients'.
json::object summary(std::vector<double>& samples, std::vector<double>& taken,
                     std::vector<double>& wakeup, std::uint64_t ok, std::uint64_t failed,
                     std::int64_t tokens, double cpu_s, double client_cpu_s, double wall_s) {
  const Quantiles q = quantiles(samples);
  const Quantiles t = quantiles(taken);
  const Quantiles w = quantiles(wakeup);
  return json::object{{"requests_ok", ok},
                      {"requests_failed", failed},
                      {"completion_tokens", tokens},
                      {"deltas", samples.size()},
                      {"tokens_per_s", wall_s > 0 ? double(tokens) / wall_s : 0.0},
                      {"tokens_per_cpu_s", cpu_s > 0 ? double(tokens) / cpu_s : 0.0},
                      {"p50_ms", q.p50 * 1e3},
                      {"p99_ms", q.p99 * 1e3},
                      {"p999_ms", q.p999 * 1e3},
                      {"max_ms", q.max * 1e3},
                      {"until_taken_p50_ms", t.p50 * 1e3},
                      {"until_taken_p99_ms", t.p99 * 1e3},
                      {"process_cpu_s", cpu_s},
                      {"server_cpu_s", cpu_s},
                      {"client_cpu_s", client_cpu_s},
                      {"wall_s", wall_s},
                      {"cores_used", wall_s > 0 ? cpu_s / wall_s : 0.0},
                      {"client_cores_used", wall_s > 0 ? client_cpu_s / wall_s : 0.0},
                      {"wakeup_late_p50_ms", w.p50 * 1e3},
                      {"wakeup_late_p99_ms", w.p99 * 1e3}};
}

void print_line(const char* label, std::vector<double>& samples, std::vector<double>& taken,
                std::vector<double>& wakeup, std::uint64_t ok, std::uint64_t failed,
                std::int64_t tokens, double cpu_s, double client_cpu_s, double wall_s) {
  const Quantiles q = quantiles(samples);
  const Quantiles t = quantiles(taken);
  const Quantiles w = quantiles(wakeup);
  std::printf(
      "%-22s %7llu req (%llu failed) %8.0f tok/s %7.0f tok/server-cpu-s %4.2f server + %4.2f client cores | "
      "p50 %7.3f p99 %8.3f "
      "p999 %8.3f "
      "max %8.3f ms | until taken p50 %.3f p99 %.3f ms | wake late p50 %.3f p99 %.3f ms\n",
      label, static_cast<unsigned long long>(ok), static_cast<unsigned long long>(failed),
      wall_s > 0 ? double(tokens) / wall_s : 0.0, cpu_s > 0 ? double(tokens) / cpu_s : 0.0,
      wall_s > 0 ? cpu_s / wall_s : 0.0, wall_s > 0 ? client_cpu_s / wall_s : 0.0, q.p50 * 1e3, q.p99 * 1e3, q.p999 * 1e3, q.max * 1e3,
      t.p50 * 1e3, t.p99 * 1e3, w.p50 * 1e3, w.p99 * 1e3);
}

}  // namespace

void print_runs(std::vector<FeRun>& runs, const std::vector<int>& settings) {
  char label[64];
  for (FeRun& r : runs) {
    std::snprintf(label, sizeof label, "%s round %d", nice_name(r.compute_nice).c_str(), r.round);
    print_line(label, r.samples_s, r.taken_s, r.wakeup_late_s, r.load.ok, r.load.failed,
               r.completion_tokens, r.cpu_s, r.client_cpu_s, r.wall_s);
    std::printf("%-22s load average before %s, after %s\n", "", r.load_before.c_str(),
                r.load_after.c_str());
    if (!r.load.first_error.empty())
      std::printf("%-22s first error: %s\n", "", r.load.first_error.c_str());
  }
  if (runs.size() <= settings.size()) return;
  for (int nice : settings) {
    Pooled p = pool(runs, nice);
    std::snprintf(label, sizeof label, "%s, all rounds", nice_name(nice).c_str());
    print_line(label, p.samples_s, p.taken_s, p.wakeup_late_s, p.ok, p.failed, p.tokens, p.cpu_s,
               p.client_cpu_s, p.wall_s);
  }
}

json::object runs_json(std::vector<FeRun>& runs, const std::vector<int>& settings) {
  json::array per_run, per_setting;
  for (FeRun& r : runs) {
    json::object o = summary(r.samples_s, r.taken_s, r.wakeup_late_s, r.load.ok, r.load.failed,
                             r.completion_tokens, r.cpu_s, r.client_cpu_s, r.wall_s);
    o["compute_nice"] = r.compute_nice;
    o["round"] = r.round;
    o["load_average_before"] = r.load_before;
    o["load_average_after"] = r.load_after;
    if (!r.load.first_error.empty()) o["first_error"] = r.load.first_error;
    per_run.push_back(std::move(o));
  }
  for (int nice : settings) {
    Pooled p = pool(runs, nice);
    json::object o = summary(p.samples_s, p.taken_s, p.wakeup_late_s, p.ok, p.failed, p.tokens,
                             p.cpu_s, p.client_cpu_s, p.wall_s);
    o["compute_nice"] = nice;
    per_setting.push_back(std::move(o));
  }
  return json::object{{"runs", std::move(per_run)}, {"settings", std::move(per_setting)}};
}

}  // namespace pensieve::bench
