#include "bench/model-bench/report.hpp"

#include "gpu/kernels/cpu/quant_dot.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cstdio>

namespace pensieve::bench {
namespace json = boost::json;

double ModelBenchReport::bandwidth_gb_per_s() const {
  double best = 0;
  for (const auto& b : bandwidth) best = std::max(best, b.best_gb_per_s);
  return best;
}

double ModelBenchReport::sgemm_gflops() const {
  double best = 0;
  for (const auto& s : sgemm) best = std::max(best, s.best_gflops);
  return best;
}

namespace {

std::string line(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

double decode_ceiling(const ModelBenchReport& r, const ModelRunResult& m) {
  return r.bandwidth_gb_per_s() * 1e9 / m.weight_bytes_per_token;
}

double prefill_gflops(const ModelRunResult& m) { return m.prefill_flops / m.prefill_seconds / 1e9; }

// The ceiling from the bandwidth measured between this model's decode steps
// (0 when none was measured).
double adjacent_decode_ceiling(const ModelRunResult& m) {
  return m.decode_bandwidth_median * 1e9 / m.weight_bytes_per_token;
}

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// The lower bound of a decode iteration: its weight bytes at the bandwidth
// measured beside the model's decode, or its FLOPs at the compute peaks,
// whichever is slower.
double roofline_seconds(const DecodeBatchRow& b) { return std::max(b.bytes_seconds, b.flops_seconds); }

// The peaks the FLOP column is held against.
std::string peaks_line(const ModelBenchReport& r) {
  if (r.int8_peak.best_gops <= 0)
    return line("\nFMA peak (%s, %d threads): %.1f GFLOP/s (no int8 dot peak: every matrix at "
                "it)\n\n",
                r.fma_peak.isa, r.fma_peak.threads, r.fma_peak.best_gflops);
  return line("\nFMA peak (%s, %d threads): %.1f GFLOP/s; int8 dot peak (zmm vpdpbusd): %.1f "
              "GOP/s, the quantised matrices' share of the FLOPs held against it\n\n",
              r.fma_peak.isa, r.fma_peak.threads, r.fma_peak.best_gflops, r.int8_peak.best_gops);
}

// Each model's decode iterations by batch size, against one sequence's and
// against the roofline.
std::string decode_batch_table(const ModelBenchReport& r) {
  std::string out;
  bool any = false;
  for (const auto& m : r.runs) any = any || !m.decode_batches.empty();
  if (!any) return out;
  out += peaks_line(r);
  out += "| model | dtype | batch | iteration ms (median) | x batch 1 | tok/s | roofline ms (bytes / "
         "FLOPs) | % of roofline | paged F16 pool ms | x batch 1, paged |\n"
         "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : r.runs) {
    const DecodeBatchRow* one = m.decode_batches.empty() ? nullptr : &m.decode_batches.front();
    for (const auto& b : m.decode_batches) {
      out += line("| %s | %s | %d | %.2f | %.2f | %.1f | %.2f (%.2f / %.2f) | %.0f%% | %.2f | %.2f |\n",
                  m.shape.c_str(), m.dtype.c_str(), b.batch, 1e3 * b.median_seconds,
                  one ? b.median_seconds / one->median_seconds : 0.0, b.batch / b.median_seconds,
                  1e3 * roofline_seconds(b), 1e3 * b.bytes_seconds, 1e3 * b.flops_seconds,
                  percent(roofline_seconds(b), b.median_seconds), 1e3 * b.paged_median_seconds,
                  one ? b.paged_median_seconds / one->paged_median_seconds : 0.0);
    }
  }
  return out;
}

double roofline_seconds(const MixedIterationRow& m) { return std::max(m.bytes_seconds, m.flops_seconds); }

// Each model's mixed iterations against one sequence prefilling as many
// tokens in the same minutes, and against the roofline.
std::string mixed_table(const ModelBenchReport& r) {
  std::string out;
  bool any = false;
  for (const auto& m : r.runs) any = any || !m.mixed.empty();
  if (!any) return out;
  out += "\n| model | dtype | decodes + prefills x chunk @ history | tokens | iteration ms (median) | tok/s | "
         "one prefill of as many tokens, tok/s | mixed / one prefill | paged F16 pool ms | paged / one prefill | "
         "roofline ms (bytes / FLOPs) | % of roofline |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : r.runs) {
    for (const auto& x : m.mixed) {
      const double tokens = x.shape.tokens();
      out += line("| %s | %s | %d + %d x %d @ %d | %.0f | %.2f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f (%.2f / %.2f) | "
                  "%.0f%% |\n",
                  m.shape.c_str(), m.dtype.c_str(), x.shape.decodes, x.shape.prefills, x.shape.chunk,
                  x.shape.history, tokens, 1e3 * x.median_seconds, tokens / x.median_seconds,
                  tokens / x.single_prefill_seconds, x.single_prefill_seconds / x.median_seconds,
                  1e3 * x.paged_median_seconds, x.single_prefill_seconds / x.paged_median_seconds, 1e3 * roofline_seconds(x), 1e3 * x.bytes_seconds, 1e3 * x.flops_seconds,
                  percent(roofline_seconds(x), x.median_seconds));
    }
  }
  return out;
}

json::array to_json(const std::vector<MixedIterationRow>& rows) {
  json::array a;
  for (const auto& x : rows)
    a.push_back(json::object{{"decodes", x.shape.decodes},
                             {"prefills", x.shape.prefills},
                             {"chunk", x.shape.chunk},
                             {"history", x.shape.history},
                             {"tokens", x.shape.tokens()},
                             {"median_seconds", x.median_seconds},
                             {"single_prefill_median_seconds", x.single_prefill_seconds},
                             {"mixed_over_single_prefill_rate", x.single_prefill_seconds / x.median_seconds},
                             {"paged_f16_median_seconds", x.paged_median_seconds},
                             {"paged_over_single_prefill_rate", x.single_prefill_seconds / x.paged_median_seconds},
                             {"flops", x.flops},
                             {"roofline_bytes_seconds", x.bytes_seconds},
                             {"roofline_flops_seconds", x.flops_seconds},
                             {"fraction_of_roofline", percent(roofline_seconds(x), x.median_seconds) / 100.0}});
  return a;
}

json::array to_json(const std::vector<DecodeBatchRow>& rows) {
  json::array a;
  for (const auto& b : rows)
    a.push_back(json::object{{"batch", b.batch},
                             {"median_seconds", b.median_seconds},
                             {"paged_f16_median_seconds", b.paged_median_seconds},
                             {"matrix_flops", b.flops},
                             {"roofline_bytes_seconds", b.bytes_seconds},
                             {"roofline_flops_seconds", b.flops_seconds},
                             {"roofline_seconds", roofline_seconds(b)},
                             {"fraction_of_roofline", percent(roofline_seconds(b), b.median_seconds) / 100.0}});
  return a;
}

}  // namespace

double compute_seconds(const ModelBenchReport& report, const ModelRunResult& run, double flops) {
  const double fma = report.fma_peak.best_gflops * 1e9, int8 = report.int8_peak.best_gops * 1e9;
  if (int8 <= 0) return flops / fma;
  return flops * (run.integer_matrix_share / int8 + (1.0 - run.integer_matrix_share) / fma);
}

std::string format_table(const ModelBenchReport& r) {
  std::string out;
  out += line("cpu: %s; %s; quant dot kernels: %s\n", r.machine.cpu_model.c_str(),
              r.machine.vector_extensions.c_str(), kernels::cpu::quant_dot_isa());
  out += line("memory read bandwidth (best of run): %.1f GB/s; sgemm (best of run): %.1f GFLOP/s; "
              "threads %zu; load average %s at start, %s at end\n\n", r.bandwidth_gb_per_s(),
              r.sgemm_gflops(), r.threads, r.load_average_start.c_str(),
              r.load_average_end.c_str());
  out += "| model | ff | dtype | params | weight MB/token | decode tok/s | decode ceiling tok/s | "
         "decode % of ceiling | GB/s between decode steps | decode % of the probes around it | prefill tok/s | "
         "prefill GFLOP/s | prefill % of sgemm |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& m : r.runs) {
    const double ceiling = decode_ceiling(r, m);
    out += line("| %s | %d | %s | %.1fM | %.1f | %.1f | %.1f | %.0f%% | %.1f | %.0f%% | %.1f | %.1f | %.0f%% |\n",
                m.shape.c_str(), m.ff, m.dtype.c_str(), m.params / 1e6, m.weight_bytes_per_token / 1e6,
                m.decode_tokens_per_s, ceiling, 100.0 * m.decode_tokens_per_s / ceiling,
                m.decode_bandwidth_median, 100.0 * m.decode_fraction_between_probes,
                m.prefill_tokens_per_s, prefill_gflops(m),
                100.0 * prefill_gflops(m) / r.sgemm_gflops());
  }
  out += decode_batch_table(r);
  out += mixed_table(r);
  return out;
}

namespace {

json::object to_json(const BandwidthResult& b) {
  return {{"best_gb_per_s", b.best_gb_per_s}, {"median_gb_per_s", b.median_gb_per_s},
          {"buffer_bytes", b.buffer_bytes}, {"threads", b.threads}, {"passes", b.passes}};
}

json::object to_json(const SgemmResult& s) {
  return {{"best_gflops", s.best_gflops}, {"median_gflops", s.median_gflops},
          {"m", s.m}, {"n", s.n}, {"k", s.k}, {"threads", s.threads}, {"reps", s.reps}};
}

json::object to_json(const ModelBenchReport& r, const ModelRunResult& m) {
  const double ceiling = decode_ceiling(r, m);
  return {{"model", m.shape},
          {"dtype", m.dtype},
          {"ff", m.ff},
          {"tied_output", m.tied_output},
          {"params", m.params},
          {"weight_bytes_per_decode_token", m.weight_bytes_per_token},
          {"kv_bytes_per_decode_token", m.kv_bytes_per_decode_token},
          {"decode_tokens_per_s", m.decode_tokens_per_s},
          {"decode_mean_seconds_per_token", m.decode_seconds_per_token},
          {"decode_median_seconds_per_token", m.decode_median_seconds},
          {"decode_ceiling_tokens_per_s", ceiling},
          {"decode_fraction_of_ceiling", m.decode_tokens_per_s / ceiling},
          {"decode_bandwidth_samples_gb_per_s", json::value_from(m.decode_bandwidth_samples)},
          {"decode_bandwidth_median_gb_per_s", m.decode_bandwidth_median},
          {"decode_adjacent_ceiling_tokens_per_s", adjacent_decode_ceiling(m)},
          {"decode_fraction_of_adjacent_ceiling", percent(m.decode_tokens_per_s, adjacent_decode_ceiling(m)) / 100.0},
          {"decode_chunk_fractions", json::value_from(m.decode_chunk_fractions)},
          {"decode_fraction_between_probes", m.decode_fraction_between_probes},
          {"prefill_tokens", r.options.prompt_tokens},
          {"prefill_seconds", m.prefill_seconds},
          {"prefill_tokens_per_s", m.prefill_tokens_per_s},
          {"prefill_flops", m.prefill_flops},
          {"prefill_gflops", prefill_gflops(m)},
          {"prefill_fraction_of_sgemm", prefill_gflops(m) / r.sgemm_gflops()},
          {"prefill_cpu_share", m.prefill_cpu_share},
          {"decode_cpu_share", m.decode_cpu_share},
          {"generate_seconds", m.generate_seconds},
          {"weight_huge_page_bytes", m.weight_huge_page_bytes},
          {"matrix_params", m.matrix_params},
          {"integer_matrix_share", m.integer_matrix_share},
          {"decode_batches", to_json(m.decode_batches)},
          {"mixed_iterations", to_json(m.mixed)}};
}

}  // namespace

std::string format_json(const ModelBenchReport& r) {
  json::array bandwidth, sgemm, runs;
  for (const auto& b : r.bandwidth) bandwidth.push_back(to_json(b));
  for (const auto& s : r.sgemm) sgemm.push_back(to_json(s));
  for (const auto& m : r.runs) runs.push_back(to_json(r, m));
  json::object doc{
      {"command_line", r.command_line},
      {"commit", r.commit},
      {"note", r.note},
      {"machine", {{"hardware_threads", r.machine.hardware_threads},
                   {"cpu_model", r.machine.cpu_model},
                   {"vector_extensions", r.machine.vector_extensions},
                   {"quant_dot_isa", kernels::cpu::quant_dot_isa()}}},
      {"load_average_start", r.load_average_start},
      {"load_average_end", r.load_average_end},
      {"threads", r.threads},
      {"bandwidth_gb_per_s", r.bandwidth_gb_per_s()},
      {"sgemm_gflops", r.sgemm_gflops()},
      {"fma_peak_gflops", r.fma_peak.best_gflops},
      {"fma_peak_isa", r.fma_peak.isa},
      {"fma_peak_threads", r.fma_peak.threads},
      {"int8_dot_peak_gops", r.int8_peak.best_gops},
      {"bandwidth_measurements", bandwidth},
      {"sgemm_measurements", sgemm},
      {"decode_context_tokens", r.options.decode_context},
      {"decode_timed_tokens", r.options.decode_tokens},
      {"prefill_tokens", r.options.prompt_tokens},
      {"seed", r.options.seed},
      {"weights_on_huge_pages", r.options.weights_on_huge_pages},
      {"notes", "decode ceiling = best measured read bandwidth / weight bytes per decoded token; "
                "adjacent ceiling = median of the read bandwidth measured before and after every 8 "
                "timed decode steps of that model / weight bytes per decoded token; "
                "decode_fraction_between_probes (the table's 'decode % of that') = median over the "
                "runs of 8 steps of their weight bytes per second / the mean of the probes on either "
                "side; prefill FLOPs = 2 x tokens x layer matrix params + causal attention + one "
                "output row"},
      {"models", runs}};
  return json::serialize(doc) + "\n";
}

}  // namespace pensieve::bench
