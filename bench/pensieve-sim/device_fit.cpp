#include "bench/pensieve-sim/device_fit.hpp"

#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

namespace pensieve::sim {

namespace json = boost::json;

namespace {

struct Point {
  double log_tflops, log_gbps, log_overhead_us;
};

DeviceModel with(const DeviceModel& base, const Point& p) {
  DeviceModel d = base;
  d.tensor_tflops = std::exp(p.log_tflops);
  d.tensor_efficiency = 1.0;
  d.hbm_gbps = std::exp(p.log_gbps);
  d.hbm_efficiency = 1.0;
  d.iteration_overhead_us = std::exp(p.log_overhead_us);
  return d;
}

double loss(const DeviceModel& d, const ModelShape& m, std::span<const TimedIteration> samples) {
  double sum = 0;
  for (const TimedIteration& s : samples) {
    const double e = std::log(iteration_cost(d, m, 1, s.rows, 0).total_s / s.seconds);
    sum += e * e;
  }
  return sum;
}

}  // namespace

namespace {

Result<DeviceFit> fit_at_overlap(const DeviceModel& base, const ModelShape& m, std::span<const TimedIteration> samples,
                                 double overhead_us) {
  if (samples.size() < 3) return fail("fitting a device needs at least three timed iterations");
  for (const TimedIteration& s : samples) {
    if (!(s.seconds > 0) || s.rows.empty()) return fail("a timed iteration (" + s.what + ") has no rows or no time");
  }
  // The overhead is fitted inside (for each rate pair, the best overhead):
  // a search over all three at once stalls on the roofline's ridge, where
  // no single axis helps but the overhead and a rate together would.
  // Each search is a coarse log grid (10 MFLOP/s to 1 PFLOP/s, 0.1 GB/s to
  // 100 TB/s, 1 us to 1 s: every machine), then a pattern search from its
  // best point: each axis stepped both ways, the step halved when neither
  // helps.
  const double lo[3] = {std::log(1e-5), std::log(0.1), std::log(1.0)};
  const double hi[3] = {std::log(1e3), std::log(1e5), std::log(1e6)};
  constexpr int steps = 32;
  constexpr double finest = 1e-6;
  auto at = [&](double f, double b, double o) { return loss(with(base, {f, b, o}), m, samples); };
  auto best_overhead = [&](double f, double b, double& loss_out) {
    if (overhead_us >= 0) {
      const double fixed = std::log(std::max(overhead_us, 1e-9));
      loss_out = at(f, b, fixed);
      return fixed;
    }
    double step = (hi[2] - lo[2]) / steps, best = lo[2], best_loss = INFINITY;
    for (int k = 0; k <= steps; ++k) {
      const double l = at(f, b, lo[2] + k * step);
      if (l < best_loss) best_loss = l, best = lo[2] + k * step;
    }
    for (; step > finest; step /= 2) {
      for (bool moved = true; moved;) {
        moved = false;
        for (double sign : {1.0, -1.0}) {
          const double l = at(f, b, best + sign * step);
          if (l < best_loss) best_loss = l, best += sign * step, moved = true;
        }
      }
    }
    loss_out = best_loss;
    return best;
  };
  auto profile = [&](double f, double b) {
    double l = 0;
    best_overhead(f, b, l);
    return l;
  };
  double step[2] = {(hi[0] - lo[0]) / steps, (hi[1] - lo[1]) / steps};
  double best[2] = {lo[0], lo[1]}, best_loss = INFINITY;
  for (int i = 0; i <= steps; ++i) {
    for (int j = 0; j <= steps; ++j) {
      const double f = lo[0] + i * step[0], b = lo[1] + j * step[1];
      const double l = profile(f, b);
      if (l < best_loss) best_loss = l, best[0] = f, best[1] = b;
    }
  }
  while (step[0] > finest || step[1] > finest) {
    bool moved = false;
    for (int a = 0; a < 2; ++a) {
      for (double sign : {1.0, -1.0}) {
        double p[2] = {best[0], best[1]};
        p[a] += sign * step[a];
        const double l = profile(p[0], p[1]);
        if (l < best_loss) best_loss = l, best[0] = p[0], best[1] = p[1], moved = true;
      }
    }
    if (!moved) step[0] /= 2, step[1] /= 2;
  }
  double final_loss = 0;
  const Point found{best[0], best[1], best_overhead(best[0], best[1], final_loss)};
  best_loss = final_loss;
  DeviceFit fit;
  fit.device = with(base, found);
  fit.rms_log_error = std::sqrt(best_loss / double(samples.size()));
  for (const TimedIteration& s : samples) {
    const double t = iteration_cost(fit.device, m, 1, s.rows, 0).total_s;
    fit.modelled_s.push_back(t);
    fit.max_relative_error = std::max(fit.max_relative_error, std::abs(t / s.seconds - 1.0));
  }
  return fit;
}

}  // namespace

Result<DeviceFit> fit_device(const DeviceModel& base, const ModelShape& m, std::span<const TimedIteration> samples,
                             double overhead_us) {
  // The overlap from five points of [0, 1]: the one whose best rates fit best.
  std::optional<DeviceFit> best;
  for (double overlap : {1.0, 0.75, 0.5, 0.25, 0.0}) {
    DeviceModel b = base;
    b.compute_memory_overlap = overlap;
    auto fit = fit_at_overlap(b, m, samples, overhead_us);
    if (!fit) return fit.error();
    if (!best || fit->rms_log_error < best->rms_log_error) best = std::move(*fit);
  }
  return std::move(*best);
}

std::string render_device_json(const DeviceModel& d, const std::string& notes) {
  json::object o;
  o["name"] = d.name;
  json::array sources;
  for (const auto& s : d.sources) sources.emplace_back(s);
  o["sources"] = std::move(sources);
  o["notes"] = notes;
  o["memory_gb"] = d.memory_gb;
  o["memory_utilization"] = d.memory_utilization;
  o["activation_reserve_gb"] = d.activation_reserve_gb;
  o["kv_budget_gb"] = d.kv_budget_gb;
  o["tensor_tflops"] = d.tensor_tflops;
  o["tensor_efficiency"] = d.tensor_efficiency;
  o["hbm_gbps"] = d.hbm_gbps;
  o["hbm_efficiency"] = d.hbm_efficiency;
  o["iteration_overhead_us"] = d.iteration_overhead_us;
  o["turn_start_us"] = d.turn_start_us;
  o["compute_memory_overlap"] = d.compute_memory_overlap;
  o["pcie_h2d_gbps"] = d.pcie_h2d_gbps;
  o["pcie_d2h_gbps"] = d.pcie_d2h_gbps;
  o["pcie_duplex_loss"] = d.pcie_duplex_loss;
  o["disk_read_gbps"] = d.disk_read_gbps;
  o["disk_write_gbps"] = d.disk_write_gbps;
  o["interconnect_gbps"] = d.interconnect_gbps;
  o["allreduce_latency_us"] = d.allreduce_latency_us;
  return json::serialize(o) + "\n";
}

}  // namespace pensieve::sim
