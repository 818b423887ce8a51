#include "actors/cost_calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace pensieve::actors {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One prefill of n tokens from position 0 over blocks 0, 1, ...; seconds.
Result<double> time_prefill(backend::PagedForward& forward, std::int32_t n) {
  const std::int32_t block_tokens = forward.pool_config().block_tokens;
  const std::int32_t vocab = forward.config().vocab_size;
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(n));
  // Spread over the vocabulary (a constant id would be as much work, but
  // reads one embedding row).
  for (std::int32_t i = 0; i < n; ++i) tokens[std::size_t(i)] = std::int32_t((std::int64_t(i) * 7919 + 1) % vocab);
  std::vector<kv::BlockId> blocks(static_cast<std::size_t>((n + block_tokens - 1) / block_tokens));
  for (std::size_t b = 0; b < blocks.size(); ++b) blocks[b] = kv::BlockId{std::uint32_t(b)};
  const model::PagedSequence seq{tokens, 0, blocks, false};
  const std::int64_t start = now_ns();
  auto out = forward.forward_paged(std::span(&seq, 1), {});
  if (!out) return fail("cost model calibration: a prefill of " + std::to_string(n) + " tokens failed: " +
                        out.error().message);
  return double(now_ns() - start) * 1e-9;
}

// The lengths to time: the options' cut to the limit, distinct, ascending;
// at least two where the limit allows (a fit needs two).
std::vector<std::int32_t> lengths(const CostCalibrationOptions& o) {
  const std::int32_t limit = std::max(o.limit_tokens, 1);
  std::vector<std::int32_t> n;
  for (std::int32_t t : o.prefill_tokens) n.push_back(std::clamp(t, 1, limit));
  std::sort(n.begin(), n.end());
  n.erase(std::unique(n.begin(), n.end()), n.end());
  if (n.size() < 2 && limit >= 2) {
    n = {std::max(limit / 4, 1), limit};
    n.erase(std::unique(n.begin(), n.end()), n.end());
  }
  return n;
}

}  // namespace

Result<CostModelReport> calibrate_cost_model(backend::PagedForward& forward, const CostCalibrationOptions& options,
                                             const CostModel& fallback) {
  const std::vector<std::int32_t> ns = lengths(options);
  CostModelReport report;
  report.model = fallback;
  if (ns.empty()) return report;
  // The first pass pays for lazily built buffers and cold caches.
  if (auto warm = time_prefill(forward, ns.front()); !warm) return warm.error();
  const std::int64_t start = now_ns();
  for (std::size_t i = 0; i < ns.size(); ++i) {
    if (i >= 2 && now_ns() - start > options.budget_ns) break;
    double best = 0;
    for (int run = 0; run < 2; ++run) {
      auto s = time_prefill(forward, ns[i]);
      if (!s) return s.error();
      best = run == 0 ? *s : std::min(best, *s);
    }
    report.samples.push_back(PrefillSample{ns[i], best});
  }
  if (auto fit = CostModel::fit(report.samples)) {
    report.model = *fit;
    report.measured = true;
    report.source = "measured";
  } else {
    report.source = "default (the timed prefills could not determine a fit)";
  }
  return report;
}

Result<CostModel> load_cost_profile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return fail("--cost-model: cannot read the profile '" + path + "'");
  CostModel m;
  bool token = false, pair = false;
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::istringstream words(line);
    std::string key;
    double value = 0;
    if (!(words >> key) || key.front() == '#') continue;
    std::string rest;
    if (!(words >> value) || value < 0 || (words >> rest)) {
      return fail("--cost-model: " + path + ":" + std::to_string(line_no) + ": expected '" + key +
                  " <non-negative number>'");
    }
    if (key == "per_token_s") {
      m.per_token = value;
      token = true;
    } else if (key == "per_token_pair_s") {
      m.per_token_pair = value;
      pair = true;
    } else {
      return fail("--cost-model: " + path + ":" + std::to_string(line_no) + ": unknown key '" + key +
                  "' (per_token_s, per_token_pair_s)");
    }
  }
  if (!token || !pair) return fail("--cost-model: " + path + " needs both per_token_s and per_token_pair_s");
  if (m.per_token <= 0 && m.per_token_pair <= 0) return fail("--cost-model: " + path + ": both constants are 0");
  return m;
}

std::string describe(const CostModelReport& r) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "per_token_s %.6g, per_token_pair_s %.6g", r.model.per_token,
                r.model.per_token_pair);
  std::string d = std::string(buf) + " (" + r.source;
  if (!r.samples.empty()) {
    d += ": prefills of";
    for (const PrefillSample& s : r.samples) {
      std::snprintf(buf, sizeof buf, " %lld tokens in %.3g ms,", static_cast<long long>(s.tokens), s.seconds * 1e3);
      d += buf;
    }
    d.pop_back();
  }
  return d + ")";
}

}  // namespace pensieve::actors
