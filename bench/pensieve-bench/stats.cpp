#include "bench/pensieve-bench/stats.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pensieve::bench {

std::optional<double> percentile(std::vector<double> values, double p) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(values.size() - 1);
  const auto lo = std::size_t(std::floor(rank));
  const auto hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - double(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

std::optional<double> mean(const std::vector<double>& values) {
  if (values.empty()) return std::nullopt;
  return std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
}

Distribution distribution(const std::vector<double>& values) {
  Distribution d;
  d.count = values.size();
  d.mean = mean(values);
  d.p50 = percentile(values, 50);
  d.p90 = percentile(values, 90);
  d.p99 = percentile(values, 99);
  d.max = percentile(values, 100);
  return d;
}

namespace {

std::optional<double> tpot_s(const RequestRecord& r) {
  if (!r.ttft_s || r.completion_tokens < 2) return std::nullopt;
  return (r.e2e_s - *r.ttft_s) / double(r.completion_tokens - 1);
}

}  // namespace

RunSummary summarize(const std::vector<RequestRecord>& records, double duration_s, const Slo& slo) {
  RunSummary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, itl, tpot, e2e, normalized;
  for (const RequestRecord& r : records) {
    if (!r.error.empty()) {
      ++s.errors;
      if (s.error_examples.size() < 5) s.error_examples.push_back(r.error);
      continue;
    }
    ++s.requests;
    s.prompt_tokens += r.prompt_tokens;
    s.completion_tokens += r.completion_tokens;
    s.cached_tokens += r.cached_tokens;
    if (r.ttft_s) ttft.push_back(*r.ttft_s);
    itl.insert(itl.end(), r.inter_token_s.begin(), r.inter_token_s.end());
    const auto per_token = tpot_s(r);
    if (per_token) tpot.push_back(*per_token);
    e2e.push_back(r.e2e_s);
    if (r.completion_tokens > 0) normalized.push_back(r.e2e_s / double(r.completion_tokens));
    const bool ttft_ok = r.ttft_s && *r.ttft_s * 1000.0 <= slo.ttft_ms;
    const bool tpot_ok = !per_token || *per_token * 1000.0 <= slo.tpot_ms;
    if (ttft_ok && tpot_ok) ++s.good_requests;
  }
  if (duration_s > 0) {
    s.requests_per_s = double(s.requests) / duration_s;
    s.output_tokens_per_s = double(s.completion_tokens) / duration_s;
    s.goodput_requests_per_s = double(s.good_requests) / duration_s;
  }
  s.ttft_s = distribution(ttft);
  s.inter_token_s = distribution(itl);
  s.tpot_s = distribution(tpot);
  s.e2e_s = distribution(e2e);
  s.normalized_s_per_token = distribution(normalized);
  return s;
}

}  // namespace pensieve::bench
