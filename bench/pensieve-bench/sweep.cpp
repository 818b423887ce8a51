#include "bench/pensieve-bench/sweep.hpp"

#include "bench/pensieve-bench/report.hpp"
#include "bench/pensieve-bench/runner.hpp"
#include "bench/pensieve-bench/svg_plot.hpp"
#include "bench/pensieve-bench/workload.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

namespace pensieve::bench {

namespace fs = std::filesystem;

namespace {

Result<void> write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return fail(path.string() + ": cannot write");
  return {};
}

std::vector<LoadSpec> loads(const BenchOptions& o) {
  std::vector<LoadSpec> out;
  for (std::size_t c : o.concurrency) out.push_back({std::nullopt, c});
  for (double r : o.rates) out.push_back({r, std::nullopt});
  return out;
}

double load_x(const LoadSpec& l) { return l.rate_per_s ? *l.rate_per_s : double(l.concurrency.value_or(0)); }

std::vector<double> ttfts(const RunRecords& r) {
  std::vector<double> out;
  for (const auto& q : r.requests) {
    if (q.error.empty() && q.ttft_s) out.push_back(*q.ttft_s);
  }
  return out;
}

// The state of one invocation while its runs go by.
struct Sweep {
  const BenchOptions& o;
  const Workload& workload;
  std::vector<std::string> models;  // per target
  std::vector<LoadSpec> loads;
  long long nonce = 0;
  std::FILE* log = nullptr;
  std::FILE* progress = nullptr;
  LinePlot latency;
  LinePlot cdf;
  SweepOutput out;

  RunConfig config(std::size_t li, std::size_t ti) const {
    RunConfig c;
    c.target = o.targets[ti];
    c.model = models[ti];
    c.mode = c.target.mode.value_or(o.mode);
    c.load = loads[li];
    c.duration_s = o.duration_s;
    c.request_timeout_s = o.request_timeout_s;
    // Conversation ids must not collide with an earlier invocation's or
    // run's: a stateful server would append to their histories.
    c.conversation_prefix = "bench-" + std::to_string(nonce) + "-" + c.target.label + "-l" + std::to_string(li);
    c.progress = progress;
    return c;
  }

  Result<void> run(std::size_t li, std::size_t ti) {
    const RunConfig c = config(li, ti);
    RunReport report;
    report.timestamp_utc = utc_timestamp_now();
    auto records = run_load(c, workload);
    if (!records) return records.error();
    report.options = &o;
    report.target = &o.targets[ti];
    report.model = models[ti];
    report.load = c.load;
    report.workload_conversations = workload.conversations.size();
    report.workload_requests = workload.requests();
    report.records = &*records;
    report.summary = summarize(records->requests, records->duration_s, o.slo);
    const fs::path path = fs::path(o.out_dir) / run_file_name(c.target.label, c.load);
    if (auto w = write_file(path, format_run_json(report)); !w) return w.error();
    out.run_files.push_back(path.string());
    if (log) std::fprintf(log, "%s\n", format_run_line(report).c_str());
    latency.series[ti].points.emplace_back(load_x(c.load), report.summary.normalized_s_per_token.mean.value_or(NAN));
    if (li + 1 == loads.size()) {
      std::vector<std::pair<double, double>> points;
      for (auto [x, y] : cdf_points(ttfts(*records))) points.emplace_back(x * 1000.0, y);
      cdf.series.push_back({c.target.label, std::move(points)});
    }
    return {};
  }
};

Result<std::vector<std::string>> models_of(const BenchOptions& o) {
  std::vector<std::string> models;
  for (const Target& t : o.targets) {
    auto m = o.model ? Result<std::string>(*o.model) : discover_model(t, 30.0);
    if (!m) return m.error();
    models.push_back(*m);
  }
  return models;
}

}  // namespace

Result<SweepOutput> run_bench(const BenchOptions& o, std::FILE* log, std::FILE* progress) {
  auto dataset = load_dataset(o.data_path);
  if (!dataset) return dataset.error();
  const Workload workload = make_workload(*dataset, {o.conversations, o.think_time_s, o.max_tokens, o.seed});
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) return fail(o.out_dir + ": cannot create: " + ec.message());
  auto models = models_of(o);
  if (!models) return models.error();

  Sweep sweep{o, workload, std::move(*models), loads(o), 0, log, progress, {}, {}, {}};
  sweep.nonce = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  const bool by_rate = sweep.loads.front().rate_per_s.has_value();
  sweep.latency = {"Normalized latency vs load", by_rate ? "conversation arrival rate (1/s)" : "conversations in flight",
                   "mean latency per output token (s)", true, {}};
  sweep.cdf = {"TTFT CDF at the highest load", "time to first token (ms)", "fraction of requests", false, {}};
  for (const Target& t : o.targets) sweep.latency.series.push_back({t.label, {}});
  // Loads outer, targets inner: the targets see the same machine drift.
  for (std::size_t li = 0; li < sweep.loads.size(); ++li) {
    for (std::size_t ti = 0; ti < o.targets.size(); ++ti) {
      if (auto r = sweep.run(li, ti); !r) return r.error();
    }
  }
  SweepOutput& out = sweep.out;
  out.latency_plot = (fs::path(o.out_dir) / "latency-vs-rate.svg").string();
  out.ttft_plot = (fs::path(o.out_dir) / "ttft-cdf.svg").string();
  if (auto w = write_file(out.latency_plot, render_svg(sweep.latency)); !w) return w.error();
  if (auto w = write_file(out.ttft_plot, render_svg(sweep.cdf)); !w) return w.error();
  return std::move(out);
}

}  // namespace pensieve::bench
